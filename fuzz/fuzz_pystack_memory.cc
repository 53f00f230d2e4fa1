// Fuzzes the native CPython stack walker (src/pystack/stack_walker.h), which reads memory a
// hostile or half-written target process controls. The first input byte picks the CPython
// layout (3.9 + byte % 5); the rest is a memory image mapped where _PyRuntime lies (for 3.13
// its start is also the _Py_DebugOffsets table the layout is read from). Seeds are images
// built by src/pystack/synthetic_image.h. Properties, beyond no crash or sanitizer report:
//  - the walk fails only with the walker's reasons, and stays within its read budget;
//  - a result keeps to the limits: threads, frames per thread (plus the "<truncated>" root),
//    name lengths, lines never negative;
//  - folding every thread gives valid UTF-8 within the fold's limit;
//  - a second walk with the code cache the first one filled gives the same answer: the cache
//    never changes what a sample says.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "pystack/memory_image.h"
#include "pystack/stack_walker.h"
#include "pystack/synthetic_image.h"

namespace {

using expanse::pystack::BudgetedMemory;
using expanse::pystack::CodeCache;
using expanse::pystack::InterpreterInfo;
using expanse::pystack::MemoryImage;
using expanse::pystack::NativeReaderLimits;
using expanse::pystack::ThreadStack;

constexpr std::size_t kMaxReads = 4000;
constexpr std::size_t kMaxBytes = 1 << 20;
constexpr std::size_t kFoldLimit = 2048;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_pystack_memory: property violated: %s\n", what);
    std::abort();
  }
}

NativeReaderLimits Limits() {
  NativeReaderLimits limits;
  limits.max_interpreters = 4;
  limits.max_threads = 16;
  limits.max_frames = 64;
  limits.max_string_bytes = 128;
  limits.max_line_table_bytes = 4096;
  limits.max_code_cache_entries = 32;
  return limits;
}

struct Walked {
  expanse::Result<std::vector<ThreadStack>> threads;
  std::size_t reads = 0;
};

Walked Walk(const std::string& image, const InterpreterInfo& info, CodeCache& cache) {
  MemoryImage memory;
  memory.Map(expanse::pystack::kSyntheticBase, image);
  BudgetedMemory budget(memory, kMaxReads, kMaxBytes);
  Walked walked{expanse::pystack::WalkThreads(budget, info, Limits(), cache,
                                              [](pid_t tid) { return tid % 2 == 1; })};
  walked.reads = budget.reads();
  return walked;
}

bool SameStacks(const std::vector<ThreadStack>& a, const std::vector<ThreadStack>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].tid != b[i].tid || a[i].state != b[i].state ||
        a[i].frames.size() != b[i].frames.size()) {
      return false;
    }
    for (std::size_t k = 0; k < a[i].frames.size(); ++k) {
      const auto& x = a[i].frames[k];
      const auto& y = b[i].frames[k];
      if (x.file != y.file || x.function != y.function || x.line != y.line) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) {
    return 0;
  }
  const int minor = 9 + data[0] % 5;
  const std::string image(reinterpret_cast<const char*>(data + 1), size - 1);
  const expanse::Result<InterpreterInfo> info =
      expanse::pystack::SyntheticInterpreterInfo(minor, std::span(data + 1, size - 1));
  if (!info.ok()) {
    return 0;  // a 3.13 image without a usable debug offsets table
  }
  const NativeReaderLimits limits = Limits();
  CodeCache cache(limits.max_code_cache_entries);
  const Walked first = Walk(image, *info, cache);
  Require(first.reads <= kMaxReads, "read budget exceeded without an error");
  if (!first.threads.ok()) {
    static const std::set<std::string> kReasons = {"inconsistent_read", "unreadable_address",
                                                   "read_budget_exceeded"};
    Require(kReasons.contains(first.threads.status().reason()), "unexpected failure reason");
  } else {
    Require(first.threads->size() <= limits.max_threads, "too many threads");
    for (const ThreadStack& thread : *first.threads) {
      Require(!thread.frames.empty(), "a thread without frames");
      Require(thread.frames.size() <= limits.max_frames + 1, "too many frames");
      for (const auto& frame : thread.frames) {
        Require(frame.file.size() <= limits.max_string_bytes + 3, "file name too long");
        Require(frame.function.size() <= limits.max_string_bytes + 3, "function name too long");
        Require(frame.line >= 0, "negative line");
      }
      const std::string folded = expanse::pystack::FoldFrames(thread.frames, kFoldLimit);
      Require(folded.size() <= kFoldLimit, "fold over its limit");
      Require(expanse::IsValidUtf8(folded), "fold is not UTF-8");
    }
  }
  const Walked second = Walk(image, *info, cache);
  Require(first.threads.ok() == second.threads.ok(), "the code cache changed the outcome");
  if (first.threads.ok()) {
    Require(SameStacks(*first.threads, *second.threads), "the code cache changed the stacks");
  } else {
    Require(first.threads.status().reason() == second.threads.status().reason(),
            "the code cache changed the failure");
  }
  return 0;
}
