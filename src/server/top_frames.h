// The "top frames" view of a job's stacks: which Python frames the samples were in, as the leaf
// (self) or anywhere in the stack (total).
#ifndef EXPANSE_SERVER_TOP_FRAMES_H_
#define EXPANSE_SERVER_TOP_FRAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/job_store.h"

namespace expanse::server {

struct FrameCount {
  std::string frame;        // one "file.py:func:line" of a folded stack
  int64_t self_count = 0;   // samples with this frame as the leaf
  int64_t total_count = 0;  // samples with this frame anywhere, once per stack (recursion)
};

// The `limit` frames with the most self samples, then the most total samples, then by frame.
// Frames are the ';'-separated parts of StackTotal::folded, root first. Only the first
// `max_distinct` distinct frames met are counted (stacks are read in the order given, the
// most sampled first from the store): frame names are a job's to make up, and a job's 10,000
// stacks of 16 KiB could otherwise hold ~10^7 of them (gigabytes of map for one request).
inline constexpr size_t kMaxDistinctFrames = 200'000;
std::vector<FrameCount> TopFrames(const std::vector<store::StackTotal>& stacks, size_t limit,
                                  size_t max_distinct = kMaxDistinctFrames);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_TOP_FRAMES_H_
