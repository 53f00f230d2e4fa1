#include "pystack/stack_walker.h"

#include <algorithm>
#include <array>
#include <climits>
#include <optional>
#include <unordered_set>

#include "pystack/line_table.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

constexpr std::size_t kMaxStructRead = 4096;
constexpr std::string_view kTruncated = "<truncated>";

class Walker {
 public:
  Walker(RemoteMemory& memory, const InterpreterInfo& info, const NativeReaderLimits& limits,
         CodeCache& cache, const IsProcessThread& is_process_thread, WalkStats& stats)
      : memory_(memory),
        info_(info),
        layout_(info.layout),
        limits_(limits),
        cache_(cache),
        is_process_thread_(is_process_thread),
        stats_(stats),
        line_budget_(limits.max_line_table_bytes_per_sample) {}

  Result<std::vector<ThreadStack>> Run() {
    if (layout_.ThreadReadSize() > kMaxStructRead || layout_.FrameReadSize() > kMaxStructRead) {
      return InternalError("thread or frame fields lie past 4096 bytes");
    }
    EXPANSE_ASSIGN_OR_RETURN(std::uint64_t interp, ReadPointer(info_.runtime_address +
                                                               layout_.runtime_interpreters_head));
    std::uint64_t runtime_gil_holder = 0;
    if (layout_.runtime_gil_locked != kNoField) {
      EXPANSE_ASSIGN_OR_RETURN(runtime_gil_holder,
                               GilHolder(info_.runtime_address + layout_.runtime_gil_locked,
                                         info_.runtime_address + layout_.runtime_gil_holder));
    }
    std::unordered_set<std::uint64_t> seen_interpreters;
    for (std::size_t count = 0; interp != 0 && count < limits_.max_interpreters; ++count) {
      if (!PlausiblePointer(interp) || !seen_interpreters.insert(interp).second) {
        return InconsistentRead(
            Format("interpreter list reaches {:#x}: a loop or garbage", interp));
      }
      std::uint64_t gil_holder = runtime_gil_holder;
      if (layout_.interp_gil_pointer != kNoField) {
        EXPANSE_ASSIGN_OR_RETURN(gil_holder, InterpreterGilHolder(interp));
      }
      EXPANSE_RETURN_IF_ERROR(WalkInterpreter(interp, gil_holder));
      EXPANSE_ASSIGN_OR_RETURN(interp, ReadPointer(interp + layout_.interp_next));
    }
    return std::move(threads_);
  }

 private:
  Result<std::uint64_t> ReadPointer(std::uint64_t address) {
    std::array<std::uint8_t, 8> bytes{};
    EXPANSE_RETURN_IF_ERROR(memory_.ReadInto(address, bytes));
    return LoadU64(bytes, 0);
  }

  Result<std::uint32_t> ReadU32(std::uint64_t address) {
    std::array<std::uint8_t, 4> bytes{};
    EXPANSE_RETURN_IF_ERROR(memory_.ReadInto(address, bytes));
    return LoadU32(bytes, 0);
  }

  // The thread state holding the GIL, or 0 when it is free.
  Result<std::uint64_t> GilHolder(std::uint64_t locked_address, std::uint64_t holder_address) {
    EXPANSE_ASSIGN_OR_RETURN(const std::uint32_t locked, ReadU32(locked_address));
    if (locked == 0) {
      return std::uint64_t{0};
    }
    return ReadPointer(holder_address);
  }

  // 3.12+: each interpreter points at the GIL it uses (its own, or the main interpreter's).
  Result<std::uint64_t> InterpreterGilHolder(std::uint64_t interp) {
    EXPANSE_ASSIGN_OR_RETURN(const std::uint64_t gil,
                             ReadPointer(interp + layout_.interp_gil_pointer));
    if (gil == 0) {
      return std::uint64_t{0};
    }
    if (!PlausiblePointer(gil)) {
      return InconsistentRead(Format("GIL pointer {:#x} is not plausible", gil));
    }
    return GilHolder(gil + layout_.gil_locked, gil + layout_.gil_holder);
  }

  Status WalkInterpreter(std::uint64_t interp, std::uint64_t gil_holder) {
    EXPANSE_ASSIGN_OR_RETURN(std::uint64_t thread,
                             ReadPointer(interp + layout_.interp_threads_head));
    std::array<std::uint8_t, kMaxStructRead> buffer;
    const std::span<std::uint8_t> block(buffer.data(), layout_.ThreadReadSize());
    while (thread != 0) {
      if (threads_seen_ >= limits_.max_threads) {
        return OkStatus();  // the rest are left out; the count is bounded, not the error
      }
      ++threads_seen_;
      if (!PlausiblePointer(thread) || !seen_threads_.insert(thread).second) {
        return InconsistentRead(Format("thread list reaches {:#x}: a loop or garbage", thread));
      }
      EXPANSE_RETURN_IF_ERROR(memory_.ReadInto(thread, block));
      if (LoadU64(block, layout_.thread_interp) != interp) {
        return InconsistentRead(Format("thread state {:#x} names interpreter {:#x}, not {:#x}",
                                       thread, LoadU64(block, layout_.thread_interp), interp));
      }
      ThreadStack stack;
      EXPANSE_ASSIGN_OR_RETURN(stack.frames, WalkFrames(block));
      stack.tid = ThreadId(block);
      if (thread == gil_holder) {
        stack.state = ThreadState::kHoldsGil;
      }
      if (!stack.frames.empty()) {
        threads_.push_back(std::move(stack));
      }
      thread = LoadU64(block, layout_.thread_next);
    }
    return OkStatus();
  }

  // The kernel's id of the thread, or 0 when it cannot be known for sure.
  pid_t ThreadId(std::span<const std::uint8_t> thread_block) {
    if (layout_.thread_native_id != kNoField) {
      const std::uint64_t tid = LoadU64(thread_block, layout_.thread_native_id);
      return tid > 0 && tid <= INT_MAX ? static_cast<pid_t>(tid) : 0;
    }
    const std::uint64_t pthread = LoadU64(thread_block, layout_.thread_id);
    if (!is_process_thread_ || !PlausiblePointer(pthread)) {
      return 0;
    }
    const Result<std::uint32_t> tid = ReadU32(pthread + kGlibcPthreadTidOffset);
    if (!tid.ok()) {
      return 0;  // not glibc's layout (musl): the tid stays unknown
    }
    const auto candidate = static_cast<pid_t>(*tid);
    return candidate > 0 && is_process_thread_(candidate) ? candidate : 0;
  }

  // The first frame of a thread, leaf end.
  Result<std::uint64_t> LeafFrame(std::span<const std::uint8_t> thread_block) {
    const std::uint64_t frame = LoadU64(thread_block, layout_.thread_frame);
    if (layout_.cframe_current_frame == kNoField || frame == 0) {
      return frame;
    }
    if (!PlausiblePointer(frame)) {
      return InconsistentRead(Format("cframe pointer {:#x} is not plausible", frame));
    }
    return ReadPointer(frame + layout_.cframe_current_frame);
  }

  // Byte offset into the bytecode of the frame's current instruction.
  std::int64_t InstructionOffset(std::span<const std::uint8_t> frame_block,
                                 std::uint64_t code) const {
    if (!layout_.interpreter_frames) {
      const auto lasti = static_cast<std::int32_t>(LoadU32(frame_block, layout_.frame_instruction));
      // 3.9 counts bytes, 3.10 code units of two bytes.
      return layout_.minor == 9 ? lasti : std::int64_t{lasti} * 2;
    }
    const std::uint64_t instruction = LoadU64(frame_block, layout_.frame_instruction);
    const std::uint64_t bytecode = code + layout_.code_bytecode;
    return instruction == 0 ? -1 : static_cast<std::int64_t>(instruction - bytecode);
  }

  // The frame's line, decoded from the table only when the code object does not remember it
  // and the sample's decode budget allows: a table is up to 256 KiB and a sample may have a
  // million frames, so decoding each would cost far more than the rest of the walk.
  int Line(CodeInfo& info, std::int64_t byte_offset) {
    if (const std::optional<int> known = info.RememberedLine(byte_offset)) {
      ++stats_.lines_remembered;
      return *known;
    }
    // Decoding reads each byte of the table at most once, so its size bounds the work.
    const std::size_t cost = info.line_table.size();
    if (cost > line_budget_) {
      ++stats_.lines_over_budget;
      return 0;
    }
    line_budget_ -= cost;
    stats_.line_table_bytes_decoded += cost;
    const int line =
        LineForOffset(layout_.line_table, info.line_table, info.first_line, byte_offset);
    info.RememberLine(byte_offset, line);
    return line;
  }

  Result<std::vector<Frame>> WalkFrames(std::span<const std::uint8_t> thread_block) {
    std::vector<Frame> frames;
    EXPANSE_ASSIGN_OR_RETURN(std::uint64_t frame, LeafFrame(thread_block));
    // Loops are found after the walk, by sorting the addresses seen: cheaper than a hash set
    // per thread, and a loop still stops at max_frames.
    frame_addresses_.clear();
    std::array<std::uint8_t, kMaxStructRead> buffer;
    const std::span<std::uint8_t> block(buffer.data(), layout_.FrameReadSize());
    bool truncated = false;
    while (frame != 0) {
      if (frame_addresses_.size() >= limits_.max_frames) {
        truncated = true;
        break;
      }
      if (!PlausiblePointer(frame)) {
        return InconsistentRead(Format("frame pointer {:#x} is not plausible", frame));
      }
      frame_addresses_.push_back(frame);
      EXPANSE_RETURN_IF_ERROR(memory_.ReadInto(frame, block));
      const std::uint64_t previous = LoadU64(block, layout_.frame_previous);
      const std::uint64_t code = LoadU64(block, layout_.frame_code);
      frame = previous;
      if (layout_.frame_owner != kNoField &&
          LoadU8(block, layout_.frame_owner) == layout_.frame_owner_c_stack) {
        continue;  // a shim the interpreter pushes when C calls into Python
      }
      if (code == info_.none_object && info_.none_object != 0) {
        continue;  // 3.13 frames may hold None instead of a code object
      }
      EXPANSE_ASSIGN_OR_RETURN(CodeInfo * info, cache_.Get(memory_, info_, limits_, code));
      const int line = Line(*info, InstructionOffset(block, code));
      frames.push_back(Frame{info->file, info->function, line});
    }
    std::sort(frame_addresses_.begin(), frame_addresses_.end());
    if (const auto again = std::adjacent_find(frame_addresses_.begin(), frame_addresses_.end());
        again != frame_addresses_.end()) {
      return InconsistentRead(Format("frame list reaches {:#x} twice", *again));
    }
    if (truncated) {
      frames.push_back(Frame{std::string(kTruncated), std::string(kTruncated), 0});
    }
    std::reverse(frames.begin(), frames.end());
    return frames;
  }

  RemoteMemory& memory_;
  const InterpreterInfo& info_;
  const PythonLayout& layout_;
  const NativeReaderLimits& limits_;
  CodeCache& cache_;
  const IsProcessThread& is_process_thread_;
  WalkStats& stats_;
  std::size_t line_budget_;  // line-table bytes this sample may still decode
  std::vector<ThreadStack> threads_;
  std::unordered_set<std::uint64_t> seen_threads_;
  std::vector<std::uint64_t> frame_addresses_;  // reused for every thread
  std::size_t threads_seen_ = 0;
};

}  // namespace

Result<std::vector<ThreadStack>> WalkThreads(RemoteMemory& memory, const InterpreterInfo& info,
                                             const NativeReaderLimits& limits, CodeCache& cache,
                                             const IsProcessThread& is_process_thread,
                                             WalkStats* stats) {
  WalkStats ignored;
  return Walker(memory, info, limits, cache, is_process_thread, stats != nullptr ? *stats : ignored)
      .Run();
}

}  // namespace expanse::pystack
