#include "server/top_frames.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace expanse::server {

namespace {

struct Counts {
  int64_t self_count = 0;
  int64_t total_count = 0;
};

}  // namespace

std::vector<FrameCount> TopFrames(const std::vector<store::StackTotal>& stacks, size_t limit,
                                  size_t max_distinct) {
  std::unordered_map<std::string_view, Counts> by_frame;
  // The frame's counts, or null for a frame first met after max_distinct others.
  const auto counts_of = [&](std::string_view frame) -> Counts* {
    if (auto it = by_frame.find(frame); it != by_frame.end())
      return &it->second;
    return by_frame.size() < max_distinct ? &by_frame[frame] : nullptr;
  };
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
      if (in_stack.insert(frame).second) {
        if (Counts* counts = counts_of(frame))
          counts->total_count += stack.count;
      }
    }
    if (Counts* counts = leaf.empty() ? nullptr : counts_of(leaf))
      counts->self_count += stack.count;
  }
  // Sorted as views; only the frames kept are copied.
  std::vector<std::pair<std::string_view, Counts>> sorted(by_frame.begin(), by_frame.end());
  const size_t kept = std::min(limit, sorted.size());
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(kept),
                    sorted.end(), [](const auto& a, const auto& b) {
                      if (a.second.self_count != b.second.self_count)
                        return a.second.self_count > b.second.self_count;
                      if (a.second.total_count != b.second.total_count)
                        return a.second.total_count > b.second.total_count;
                      return a.first < b.first;
                    });
  std::vector<FrameCount> frames;
  frames.reserve(kept);
  for (size_t i = 0; i < kept; ++i) {
    frames.push_back({.frame = std::string(sorted[i].first),
                      .self_count = sorted[i].second.self_count,
                      .total_count = sorted[i].second.total_count});
  }
  return frames;
}

}  // namespace expanse::server
