#include "server/top_frames.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace expanse::server {

std::vector<FrameCount> TopFrames(const std::vector<store::StackTotal>& stacks, size_t limit) {
  std::unordered_map<std::string_view, FrameCount> by_frame;
  std::unordered_set<std::string_view> in_stack;
  for (const store::StackTotal& stack : stacks) {
    // Views into stack.folded, which outlives the maps.
    std::string_view rest = stack.folded;
    std::string_view leaf;
    in_stack.clear();
    while (!rest.empty()) {
      const size_t end = rest.find(';');
      const std::string_view frame = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      if (frame.empty())
        continue;
      leaf = frame;
      // A recursive function appears several times in one stack, but its samples once.
      if (in_stack.insert(frame).second)
        by_frame[frame].total_count += stack.count;
    }
    if (!leaf.empty())
      by_frame[leaf].self_count += stack.count;
  }
  std::vector<FrameCount> frames;
  frames.reserve(by_frame.size());
  for (auto& [frame, count] : by_frame) {
    count.frame = std::string(frame);
    frames.push_back(std::move(count));
  }
  const size_t kept = std::min(limit, frames.size());
  std::partial_sort(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(kept),
                    frames.end(), [](const FrameCount& a, const FrameCount& b) {
                      if (a.self_count != b.self_count)
                        return a.self_count > b.self_count;
                      if (a.total_count != b.total_count)
                        return a.total_count > b.total_count;
                      return a.frame < b.frame;
                    });
  frames.resize(kept);
  return frames;
}

}  // namespace expanse::server
