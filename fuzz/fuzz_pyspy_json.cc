// libFuzzer target for the py-spy adapter (src/pystack/pyspy_*): the JSON `py-spy dump --json`
// prints and the stderr text its failures are classified by. py-spy copies file and function
// names out of the sampled process, which belongs to a user, so both are outside input.
// Properties, checked on every input:
//  - nothing crashes, hangs or trips a sanitizer;
//  - a refused dump is kInvalidArgument with reason "pyspy_output";
//  - an accepted dump keeps the bounds: its pid, at most 4096 threads of at most 4096 frames,
//    no negative line, a known thread state; its threads fold into stacks the ingest format
//    takes (1..16384 bytes of UTF-8, no empty frame) and aggregate into positive counts;
//  - the error cause picked from stderr is at most 200 bytes without control characters.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/utf8.h"
#include "pystack/pyspy_json.h"
#include "pystack/pyspy_source.h"
#include "pystack/stack_aggregator.h"

namespace {

using expanse::StatusCode;
namespace pystack = expanse::pystack;

constexpr pid_t kPid = 4242;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_pyspy_json: property violated: %s\n", what);
    std::abort();
  }
}

void CheckFolded(const std::string& folded) {
  Require(!folded.empty() && folded.size() <= 16384, "folded size within the ingest limit");
  Require(expanse::IsValidUtf8(folded), "folded is UTF-8");
  Require(folded.front() != ';' && folded.back() != ';' && folded.find(";;") == std::string::npos,
          "no empty frame");
  for (char c : folded)
    Require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, "no control characters");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const auto stacks = pystack::ParsePyspyDump(text, kPid);
  if (!stacks.ok()) {
    Require(stacks.status().code() == StatusCode::kInvalidArgument, "refusal is kInvalidArgument");
    Require(stacks.status().reason() == pystack::kPyspyOutputReason, "refusal is pyspy_output");
  } else {
    Require(stacks->pid == kPid, "pid kept");
    Require(stacks->threads.size() <= pystack::kMaxPyspyThreads, "threads bounded");
    for (const pystack::ThreadStack& thread : stacks->threads) {
      Require(thread.frames.size() <= pystack::kMaxPyspyFramesPerThread, "frames bounded");
      Require(thread.tid >= 0, "thread id not negative");
      Require(thread.state != pystack::ThreadState::kUnknown, "thread state known");
      for (const pystack::Frame& frame : thread.frames)
        Require(frame.line >= 0, "line not negative");
      if (!thread.frames.empty())
        CheckFolded(pystack::FoldFrames(thread.frames));
    }
    pystack::StackAggregator aggregator;
    aggregator.Add("1", "node1", 1700000000000, *stacks, false);
    for (const auto& entry : aggregator.TakeAll()) {
      Require(entry.count >= 1, "counts positive");
      CheckFolded(entry.folded);
    }
  }

  const std::string cause = pystack::PyspyErrorCause(text);
  Require(!cause.empty() && cause.size() <= 200, "cause bounded");
  for (char c : cause)
    Require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, "cause printable");
  return 0;
}
