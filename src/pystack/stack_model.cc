#include "pystack/stack_model.h"

#include <string_view>

#include "core/utf8.h"

namespace expanse::pystack {

const char* ThreadStateName(ThreadState state) {
  switch (state) {
    case ThreadState::kHoldsGil:
      return "gil";
    case ThreadState::kRunning:
      return "running";
    case ThreadState::kIdle:
      return "idle";
    case ThreadState::kUnknown:
      break;
  }
  return "";
}

namespace {

// Replaces what the ingest format refuses inside a frame: control characters and the ';'
// separator become '?', and invalid UTF-8 is replaced byte by byte, so the folded text is
// always accepted and two different frames cannot merge into one.
std::string CleanPart(std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (char c : part) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f || c == ';' ? '?' : c);
  }
  if (!IsValidUtf8(out)) {
    for (char& c : out) {
      if (static_cast<unsigned char>(c) >= 0x80)
        c = '?';
    }
  }
  return out;
}

std::string FoldOne(const Frame& frame) {
  std::string text = CleanPart(frame.file.empty() ? "<unknown>" : frame.file);
  text += ':';
  text += CleanPart(frame.function.empty() ? "<unknown>" : frame.function);
  text += ':';
  text += std::to_string(frame.line);
  return text;
}

}  // namespace

std::string FoldFrames(const std::vector<Frame>& frames, std::size_t max_bytes) {
  std::vector<std::string> parts;
  parts.reserve(frames.size());
  std::size_t total = 0;
  for (const Frame& frame : frames) {
    parts.push_back(FoldOne(frame));
    total += parts.back().size() + 1;
  }
  auto join = [](const std::vector<std::string>& list) {
    std::string out;
    for (const std::string& p : list) {
      if (!out.empty())
        out += ';';
      out += p;
    }
    return out;
  };
  if (total <= max_bytes + 1)
    return join(parts);

  // Too deep (e.g. runaway recursion): keep the leaf, which says where the time goes, and as
  // many root frames as fit, which say how the program got there.
  static constexpr std::string_view kElided = "...:...:0";
  std::string leaf = parts.back();
  if (leaf.size() > max_bytes / 2)
    leaf.resize(max_bytes / 2);
  std::size_t budget = max_bytes - leaf.size() - kElided.size() - 2;
  std::vector<std::string> kept;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (parts[i].size() + 1 > budget)
      break;
    budget -= parts[i].size() + 1;
    kept.push_back(parts[i]);
  }
  kept.emplace_back(kElided);
  kept.push_back(std::move(leaf));
  std::string out = join(kept);
  // A truncated leaf may end inside a UTF-8 sequence.
  while (!out.empty() && !IsValidUtf8(out))
    out.pop_back();
  return out;
}

}  // namespace expanse::pystack
