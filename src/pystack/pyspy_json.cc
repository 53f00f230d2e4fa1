#include "pystack/pyspy_json.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

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

// Refuses nesting deeper than kMaxPyspyJsonDepth before the document is built, so hostile
// input cannot make the parser or the tree's destructor work through a million levels.
Status CheckNestingDepth(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxPyspyJsonDepth) {
        return OutputError("", "nested more than " + std::to_string(kMaxPyspyJsonDepth) +
                                   " levels deep; this is not py-spy output");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return OkStatus();
}

// The member `key` of `object`, or nullptr when absent or null.
const json* Member(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null())
    return nullptr;
  return &*it;
}

Result<bool> Flag(const json& object, const std::string& path, const char* key, bool fallback) {
  const json* value = Member(object, key);
  if (value == nullptr)
    return fallback;
  if (!value->is_boolean())
    return OutputError(path + "." + key, "expected true or false");
  return value->get<bool>();
}

Result<std::string> Text(const json& object, const std::string& path, const char* key) {
  const json* value = Member(object, key);
  if (value == nullptr)
    return OutputError(path + "." + key, "missing");
  if (!value->is_string())
    return OutputError(path + "." + key, "expected a string");
  return value->get<std::string>();
}

Result<Frame> ParseFrame(const json& entry, const std::string& path) {
  if (!entry.is_object())
    return OutputError(path, "expected an object");
  Frame frame;
  EXPANSE_ASSIGN_OR_RETURN(frame.file, Text(entry, path, "filename"));
  EXPANSE_ASSIGN_OR_RETURN(frame.function, Text(entry, path, "name"));
  if (const json* line = Member(entry, "line"); line != nullptr) {
    if (!line->is_number_integer())
      return OutputError(path + ".line", "expected an integer");
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

Result<pid_t> ThreadId(const json& trace, const std::string& path) {
  const json* tid = Member(trace, "os_thread_id");
  if (tid == nullptr)
    return 0;  // py-spy could not map the Python thread to a native one
  if (!tid->is_number_unsigned())
    return OutputError(path + ".os_thread_id", "expected a non-negative integer or null");
  const uint64_t value = tid->get<uint64_t>();
  if (value > static_cast<uint64_t>(std::numeric_limits<pid_t>::max()))
    return OutputError(path + ".os_thread_id", std::to_string(value) + " is not a thread id");
  return static_cast<pid_t>(value);
}

Result<ThreadStack> ParseThread(const json& trace, const std::string& path) {
  if (!trace.is_object())
    return OutputError(path, "expected an object");
  ThreadStack thread;
  EXPANSE_ASSIGN_OR_RETURN(thread.tid, ThreadId(trace, path));
  EXPANSE_ASSIGN_OR_RETURN(const bool owns_gil, Flag(trace, path, "owns_gil", false));
  // py-spy starts every trace as active and clears it from /proc/<tid>/stat or its idle
  // heuristic, so an absent flag means active.
  EXPANSE_ASSIGN_OR_RETURN(const bool active, Flag(trace, path, "active", true));
  if (owns_gil) {
    thread.state = ThreadState::kHoldsGil;
  } else {
    thread.state = active ? ThreadState::kRunning : ThreadState::kIdle;
  }

  const json* frames = Member(trace, "frames");
  if (frames == nullptr)
    return OutputError(path + ".frames", "missing");
  if (!frames->is_array())
    return OutputError(path + ".frames", "expected an array");
  if (frames->size() > kMaxPyspyFramesPerThread) {
    return OutputError(path + ".frames", std::to_string(frames->size()) + " frames (at most " +
                                             std::to_string(kMaxPyspyFramesPerThread) + ")");
  }
  thread.frames.reserve(frames->size());
  for (std::size_t i = 0; i < frames->size(); ++i) {
    EXPANSE_ASSIGN_OR_RETURN(Frame frame,
                             ParseFrame((*frames)[i], path + ".frames[" + std::to_string(i) + "]"));
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
  EXPANSE_RETURN_IF_ERROR(CheckNestingDepth(text));
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    return OutputError("",
                       "not valid JSON (syntax error at byte " + std::to_string(error.byte) + ")");
  } catch (const std::exception&) {
    return OutputError("", "not valid JSON");
  }
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
    EXPANSE_ASSIGN_OR_RETURN(ThreadStack thread,
                             ParseThread(document[i], "[" + std::to_string(i) + "]"));
    stacks.threads.push_back(std::move(thread));
  }
  return stacks;
}

}  // namespace expanse::pystack
