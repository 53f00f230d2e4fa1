#include "pystack/pyspy_json.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::pystack {
namespace {

using nlohmann::json;

Status OutputError(const std::string& path, std::string_view what) {
  std::string message = "py-spy dump: ";
  if (!path.empty()) {
    message += path;
    message += ": ";
  }
  message += what;
  return InvalidArgumentError(std::move(message)).WithReason(std::string(kPyspyOutputReason));
}

// A refusal from wire's reader ("[0].frames must be an array"), named as py-spy's output.
Status Named(const Status& status) {
  return InvalidArgumentError("py-spy dump: " + status.message())
      .WithReason(std::string(kPyspyOutputReason));
}

// A frame's file or function: present (it may be empty) and a string. The job names its own code
// (a function's name can be any string, control characters included), so odd text costs only
// its own frame's readability, never the dump: control characters are kept here and replaced
// by FoldFrames (stack_model.h), and text past kMaxTextBytes is cut (FoldFrames repairs a
// character cut in two).
constexpr size_t kMaxTextBytes = 4096;
Result<std::string> FrameText(const wire::FieldReader& r, const char* key) {
  const json* value = r.Find(key);
  if (value == nullptr)
    return r.Bad(key, "is required");
  if (!value->is_string())
    return r.Bad(key, "must be a string");
  const std::string& text = value->get_ref<const std::string&>();
  return text.substr(0, kMaxTextBytes);
}

Result<Frame> ParseFrame(const wire::FieldReader& entry) {
  Frame frame;
  EXPANSE_ASSIGN_OR_RETURN(frame.file, FrameText(entry, "filename"));
  EXPANSE_ASSIGN_OR_RETURN(frame.function, FrameText(entry, "name"));
  if (const json* line = entry.Find("line"); line != nullptr) {
    if (!line->is_number_integer())
      return entry.Bad("line", "must be an integer");
    // py-spy writes an i32; negative values come from odd line tables and mean "unknown",
    // as 0 does in our model.
    if (line->is_number_unsigned()) {
      const uint64_t value = line->get<uint64_t>();
      frame.line = value > static_cast<uint64_t>(std::numeric_limits<int>::max())
                       ? 0
                       : static_cast<int>(value);
    } else {
      const int64_t value = line->get<int64_t>();
      frame.line =
          value < 0 || value > std::numeric_limits<int>::max() ? 0 : static_cast<int>(value);
    }
  }
  return frame;
}

Result<ThreadStack> ParseThread(const wire::FieldReader& trace) {
  ThreadStack thread;
  // Absent or null: py-spy could not map the Python thread to a native one (0).
  EXPANSE_ASSIGN_OR_RETURN(
      const int64_t tid,
      trace.Int("os_thread_id", 0, std::numeric_limits<pid_t>::max(), wire::Need::kOptional));
  thread.tid = static_cast<pid_t>(tid);
  EXPANSE_ASSIGN_OR_RETURN(const bool owns_gil, trace.Bool("owns_gil", false));
  // py-spy starts every trace as active and clears it from /proc/<tid>/stat or its idle
  // heuristic, so an absent flag means active.
  EXPANSE_ASSIGN_OR_RETURN(const bool active, trace.Bool("active", true));
  if (owns_gil) {
    thread.state = ThreadState::kHoldsGil;
  } else {
    thread.state = active ? ThreadState::kRunning : ThreadState::kIdle;
  }

  EXPANSE_ASSIGN_OR_RETURN(
      std::vector<wire::FieldReader> frames,
      trace.Objects("frames", kMaxPyspyFramesPerThread, wire::Need::kRequired));
  thread.frames.reserve(frames.size());
  for (const wire::FieldReader& entry : frames) {
    EXPANSE_ASSIGN_OR_RETURN(Frame frame, ParseFrame(entry));
    thread.frames.push_back(std::move(frame));
  }
  // py-spy walks from the running frame outwards; the model wants the root first.
  std::reverse(thread.frames.begin(), thread.frames.end());
  return thread;
}

}  // namespace

Result<ProcessStacks> ParsePyspyDump(std::string_view text, pid_t pid) {
  if (text.size() > kMaxPyspyJsonBytes) {
    return OutputError("", std::to_string(text.size()) + " bytes (at most " +
                               std::to_string(kMaxPyspyJsonBytes) + ")");
  }
  Result<json> parsed =
      wire::ParseJson(text, wire::JsonLimits{.max_depth = static_cast<size_t>(kMaxPyspyJsonDepth)});
  if (!parsed.ok())
    return OutputError("", parsed.status().message());
  const json document = *std::move(parsed);
  if (!document.is_array())
    return OutputError("", "expected an array of thread stacks");
  if (document.size() > kMaxPyspyThreads) {
    return OutputError("", std::to_string(document.size()) + " threads (at most " +
                               std::to_string(kMaxPyspyThreads) + ")");
  }
  ProcessStacks stacks;
  stacks.pid = pid;
  stacks.threads.reserve(document.size());
  for (std::size_t i = 0; i < document.size(); ++i) {
    Result<wire::FieldReader> trace = wire::FieldReader::Object(
        document[i], "[" + std::to_string(i) + "]", std::string(kPyspyOutputReason));
    Result<ThreadStack> thread = trace.ok() ? ParseThread(*trace) : trace.status();
    if (!thread.ok())
      return Named(thread.status());
    stacks.threads.push_back(*std::move(thread));
  }
  return stacks;
}

}  // namespace expanse::pystack
