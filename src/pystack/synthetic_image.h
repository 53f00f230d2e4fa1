// Builds the memory of a pretend CPython process (3.9 to 3.13 layouts): _PyRuntime, one
// interpreter, thread states, frames, code objects, strs and line tables laid out as the real
// interpreter lays them out, in one region. The stack walker's tests and the fuzzer's seed
// corpus use it; no production path does.
#ifndef EXPANSE_PYSTACK_SYNTHETIC_IMAGE_H_
#define EXPANSE_PYSTACK_SYNTHETIC_IMAGE_H_

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "pystack/interpreter_info.h"

namespace expanse::pystack {

struct SyntheticFrame {
  std::string file;
  std::string function;  // co_qualname on 3.11+, co_name before
  int first_line = 1;
  int line = 1;  // the line the frame is at; the line table is built to say so
};

struct SyntheticThread {
  pid_t tid = 0;
  bool holds_gil = false;
  std::vector<SyntheticFrame> frames;  // root first
};

struct SyntheticProcess {
  int minor = 11;  // 9 to 13
  std::vector<SyntheticThread> threads;
  // 3.12+: put a C-stack shim frame (owner FRAME_OWNED_BY_CSTACK) under each thread's root.
  bool shim_frames = false;
};

// Where images are mapped, and the type addresses they use.
inline constexpr std::uint64_t kSyntheticBase = 0x100000;

struct SyntheticImage {
  std::string bytes;  // mapped at kSyntheticBase; _PyRuntime is at its start
  InterpreterInfo info;
  // Addresses, for tests that corrupt the image: thread states (list order) and each thread's
  // frames (leaf first).
  std::vector<std::uint64_t> thread_addresses;
  std::vector<std::vector<std::uint64_t>> frame_addresses;
};

// The _Py_DebugOffsets table of CPython 3.13.0 (x86-64, with the GIL), cookie included, as a
// live 3.13.0 process holds it at the start of _PyRuntime.
std::string DebugOffsetsTable3130();

// kInvalidArgument for a minor outside 9 to 13.
Result<SyntheticImage> BuildSyntheticImage(const SyntheticProcess& process);

// The InterpreterInfo an image for `minor` is read with: the built-in layout, or on 3.13 the
// layout from the debug offsets at the image's start (`image` is the image's bytes).
Result<InterpreterInfo> SyntheticInterpreterInfo(int minor, std::span<const std::uint8_t> image);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_SYNTHETIC_IMAGE_H_
