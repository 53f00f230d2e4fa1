#include "pystack/python_layout.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "pystack/remote_memory.h"
#include "pystack/text_format.h"

namespace expanse::pystack {
namespace {

// The end of the last of `fields` (offset, width) that the version has.
std::uint32_t EndOf(std::initializer_list<std::pair<std::uint32_t, std::uint32_t>> fields) {
  std::uint32_t end = 0;
  for (const auto& [offset, width] : fields) {
    if (offset != kNoField) {
      end = std::max(end, offset + width);
    }
  }
  return end;
}

// Fields every version from 3.9 on shares.
PythonLayout Common(int minor) {
  PythonLayout layout;
  layout.minor = minor;
  layout.interp_next = 0;
  layout.thread_next = 8;
  layout.thread_interp = 16;
  return layout;
}

PythonLayout Layout39And310(int minor) {
  // 3.9.18 and 3.10.13 headers; the two differ only in the frame object and line table.
  PythonLayout layout = Common(minor);
  layout.line_table = minor == 9 ? LineTableKind::kLnotab : LineTableKind::kLineTable310;
  layout.runtime_interpreters_head = 32;
  layout.runtime_gil_holder = 360;
  layout.runtime_gil_locked = 368;
  layout.interp_threads_head = 8;
  layout.thread_frame = 24;
  layout.thread_id = 176;
  layout.interpreter_frames = false;
  layout.frame_previous = 24;
  layout.frame_code = 32;
  layout.frame_instruction = minor == 9 ? 104 : 96;
  layout.code_first_line = 40;
  layout.code_filename = 104;
  layout.code_name = 112;
  layout.code_line_table = 120;
  layout.unicode_ascii_data = 48;
  layout.unicode_compact_data = 72;
  return layout;
}

PythonLayout Layout311() {
  // 3.11.2 and 3.11.7 headers.
  PythonLayout layout = Common(11);
  layout.runtime_interpreters_head = 40;
  layout.runtime_gil_holder = 368;
  layout.runtime_gil_locked = 376;
  layout.interp_threads_head = 16;
  layout.thread_frame = 56;
  layout.cframe_current_frame = 8;
  layout.thread_id = 152;
  layout.thread_native_id = 160;
  layout.frame_code = 32;
  layout.frame_previous = 48;
  layout.frame_instruction = 56;
  layout.frame_owner = 69;
  layout.code_first_line = 72;
  layout.code_filename = 112;
  layout.code_name = 120;
  layout.code_qualname = 128;
  layout.code_line_table = 136;
  layout.code_bytecode = 184;
  layout.unicode_ascii_data = 48;
  layout.unicode_compact_data = 72;
  return layout;
}

PythonLayout Layout312() {
  // 3.12.1 headers.
  PythonLayout layout = Common(12);
  layout.runtime_interpreters_head = 40;
  layout.interp_threads_head = 72;
  layout.interp_gil_pointer = 384;
  layout.gil_holder = 8;
  layout.gil_locked = 16;
  layout.thread_frame = 56;
  layout.cframe_current_frame = 0;
  layout.thread_id = 136;
  layout.thread_native_id = 144;
  layout.frame_code = 0;
  layout.frame_previous = 8;
  layout.frame_instruction = 56;
  layout.frame_owner = 70;
  layout.frame_owner_c_stack = 3;
  layout.code_first_line = 68;
  layout.code_filename = 112;
  layout.code_name = 120;
  layout.code_qualname = 128;
  layout.code_line_table = 136;
  layout.code_bytecode = 192;
  layout.unicode_ascii_data = 40;
  layout.unicode_compact_data = 56;
  return layout;
}

Status BadDebugOffsets(std::string what) {
  return DataLossError("_Py_DebugOffsets: " + std::move(what)).WithReason("bad_debug_offsets");
}

// Positions (in uint64 fields after the 8-byte cookie) of the 3.13 table's entries.
enum DebugField : std::size_t {
  kVersion = 0,
  kFreeThreaded = 1,
  kRuntimeSize = 2,
  kRuntimeInterpretersHead = 4,
  kInterpSize = 5,
  kInterpNext = 7,
  kInterpThreadsHead = 8,
  kInterpCevalGil = 13,
  kInterpGilRuntimeState = 14,
  kInterpGilLocked = 16,
  kInterpGilHolder = 17,
  kThreadSize = 18,
  kThreadNext = 20,
  kThreadInterp = 21,
  kThreadCurrentFrame = 22,
  kThreadId = 23,
  kThreadNativeId = 24,
  kFrameSize = 27,
  kFramePrevious = 28,
  kFrameExecutable = 29,
  kFrameInstrPtr = 30,
  kFrameOwner = 32,
  kCodeSize = 33,
  kCodeFilename = 34,
  kCodeName = 35,
  kCodeQualname = 36,
  kCodeLinetable = 37,
  kCodeFirstLine = 38,
  kCodeAdaptive = 42,
  kObjectSize = 43,
  kObjectType = 44,
  kBytesSize = 63,
  kBytesObSize = 64,
  kBytesData = 65,
  kUnicodeSize = 66,
  kUnicodeState = 67,
  kUnicodeLength = 68,
  kUnicodeAsciiSize = 69,
  kDebugFieldCount = 72,
};

// Struct sizes above this are not believed (3.13's largest, PyInterpreterState, is ~190 KB).
constexpr std::uint64_t kMaxStructSize = 16 << 20;
// Structs read whole per object (thread, frame, code) must fit in one small read.
constexpr std::uint32_t kMaxObjectRead = 4096;

class DebugTable {
 public:
  explicit DebugTable(std::span<const std::uint8_t> table) : table_(table) {}

  std::uint64_t Get(DebugField field) const { return LoadU64(table_, 8 + field * 8); }

  // An offset into a struct of size `size_field`, which must leave room for `width` bytes.
  Result<std::uint32_t> Offset(DebugField field, DebugField size_field, std::uint32_t width,
                               const char* name) const {
    const std::uint64_t size = Get(size_field);
    const std::uint64_t offset = Get(field);
    if (size > kMaxStructSize || offset > size || size - offset < width) {
      return BadDebugOffsets(
          Format("{} offset {} does not fit its struct of {} bytes", name, offset, size));
    }
    return static_cast<std::uint32_t>(offset);
  }

 private:
  std::span<const std::uint8_t> table_;
};

}  // namespace

std::uint32_t PythonLayout::ThreadReadSize() const {
  return EndOf({{thread_next, 8},
                {thread_interp, 8},
                {thread_frame, 8},
                {thread_id, 8},
                {thread_native_id, 8}});
}

std::uint32_t PythonLayout::FrameReadSize() const {
  return EndOf({{frame_previous, 8},
                {frame_code, 8},
                {frame_instruction, interpreter_frames ? 8u : 4u},
                {frame_owner, 1}});
}

std::uint32_t PythonLayout::CodeReadSize() const {
  return EndOf({{object_type, 8},
                {code_filename, 8},
                {code_name, 8},
                {code_qualname, 8},
                {code_line_table, 8},
                {code_first_line, 4}});
}

Result<PythonLayout> BuiltInLayout(const PythonVersion& version) {
  if (version.major == 3 && !version.free_threaded) {
    switch (version.minor) {
      case 9:
      case 10:
        return Layout39And310(version.minor);
      case 11:
        return Layout311();
      case 12:
        return Layout312();
      default:
        break;
    }
  }
  return FailedPreconditionError(Format("no built-in layout for Python {}", version.ToString()))
      .WithReason("unsupported_version");
}

std::optional<PythonVersion> DebugOffsetsVersion(std::span<const std::uint8_t> table) {
  if (table.size() < 16 ||
      std::memcmp(table.data(), kDebugOffsetsCookie.data(), kDebugOffsetsCookie.size()) != 0) {
    return std::nullopt;
  }
  return VersionFromHex(LoadU64(table, 8));
}

Result<PythonLayout> LayoutFromDebugOffsets(std::span<const std::uint8_t> table) {
  const std::optional<PythonVersion> version = DebugOffsetsVersion(table);
  if (!version) {
    return BadDebugOffsets("the cookie \"xdebugpy\" is missing");
  }
  if (table.size() < kDebugOffsets313Size) {
    return BadDebugOffsets(Format("table of {} bytes is too short", table.size()));
  }
  const DebugTable fields(table);
  PythonVersion announced = *version;
  announced.free_threaded = fields.Get(kFreeThreaded) != 0;
  if (announced.major != 3 || announced.minor != 13 || announced.free_threaded) {
    return FailedPreconditionError(
               Format("no layout for the debug offsets of Python {}", announced.ToString()))
        .WithReason("unsupported_version");
  }

  PythonLayout layout;
  layout.minor = 13;
  layout.line_table = LineTableKind::kLocationTable;
  EXPANSE_ASSIGN_OR_RETURN(
      layout.runtime_interpreters_head,
      fields.Offset(kRuntimeInterpretersHead, kRuntimeSize, 8, "runtime_state.interpreters_head"));
  EXPANSE_ASSIGN_OR_RETURN(layout.interp_next,
                           fields.Offset(kInterpNext, kInterpSize, 8, "interpreter_state.next"));
  EXPANSE_ASSIGN_OR_RETURN(
      layout.interp_threads_head,
      fields.Offset(kInterpThreadsHead, kInterpSize, 8, "interpreter_state.threads_head"));
  EXPANSE_ASSIGN_OR_RETURN(layout.interp_gil_pointer, fields.Offset(kInterpCevalGil, kInterpSize, 8,
                                                                    "interpreter_state.ceval_gil"));
  // The holder and lock offsets are given from the interpreter's own GIL struct; the walker
  // follows ceval.gil (which may point at the main interpreter's), so it wants them relative
  // to the struct.
  EXPANSE_ASSIGN_OR_RETURN(
      const std::uint32_t gil_base,
      fields.Offset(kInterpGilRuntimeState, kInterpSize, 0, "interpreter_state.gil_runtime_state"));
  EXPANSE_ASSIGN_OR_RETURN(const std::uint32_t gil_locked,
                           fields.Offset(kInterpGilLocked, kInterpSize, 4,
                                         "interpreter_state.gil_runtime_state_locked"));
  EXPANSE_ASSIGN_OR_RETURN(const std::uint32_t gil_holder,
                           fields.Offset(kInterpGilHolder, kInterpSize, 8,
                                         "interpreter_state.gil_runtime_state_holder"));
  if (gil_locked < gil_base || gil_holder < gil_base || gil_locked - gil_base > kMaxObjectRead ||
      gil_holder - gil_base > kMaxObjectRead) {
    return BadDebugOffsets("GIL fields lie outside the GIL struct");
  }
  layout.gil_locked = gil_locked - gil_base;
  layout.gil_holder = gil_holder - gil_base;

  EXPANSE_ASSIGN_OR_RETURN(layout.thread_next,
                           fields.Offset(kThreadNext, kThreadSize, 8, "thread_state.next"));
  EXPANSE_ASSIGN_OR_RETURN(layout.thread_interp,
                           fields.Offset(kThreadInterp, kThreadSize, 8, "thread_state.interp"));
  EXPANSE_ASSIGN_OR_RETURN(layout.thread_frame, fields.Offset(kThreadCurrentFrame, kThreadSize, 8,
                                                              "thread_state.current_frame"));
  EXPANSE_ASSIGN_OR_RETURN(layout.thread_id,
                           fields.Offset(kThreadId, kThreadSize, 8, "thread_state.thread_id"));
  EXPANSE_ASSIGN_OR_RETURN(layout.thread_native_id, fields.Offset(kThreadNativeId, kThreadSize, 8,
                                                                  "thread_state.native_thread_id"));

  EXPANSE_ASSIGN_OR_RETURN(layout.frame_previous, fields.Offset(kFramePrevious, kFrameSize, 8,
                                                                "interpreter_frame.previous"));
  EXPANSE_ASSIGN_OR_RETURN(layout.frame_code, fields.Offset(kFrameExecutable, kFrameSize, 8,
                                                            "interpreter_frame.executable"));
  EXPANSE_ASSIGN_OR_RETURN(layout.frame_instruction, fields.Offset(kFrameInstrPtr, kFrameSize, 8,
                                                                   "interpreter_frame.instr_ptr"));
  EXPANSE_ASSIGN_OR_RETURN(layout.frame_owner,
                           fields.Offset(kFrameOwner, kFrameSize, 1, "interpreter_frame.owner"));
  // FRAME_OWNED_BY_CSTACK in 3.13's pycore_frame.h; the table does not carry enum values.
  layout.frame_owner_c_stack = 3;

  EXPANSE_ASSIGN_OR_RETURN(layout.code_filename,
                           fields.Offset(kCodeFilename, kCodeSize, 8, "code_object.filename"));
  EXPANSE_ASSIGN_OR_RETURN(layout.code_name,
                           fields.Offset(kCodeName, kCodeSize, 8, "code_object.name"));
  EXPANSE_ASSIGN_OR_RETURN(layout.code_qualname,
                           fields.Offset(kCodeQualname, kCodeSize, 8, "code_object.qualname"));
  EXPANSE_ASSIGN_OR_RETURN(layout.code_line_table,
                           fields.Offset(kCodeLinetable, kCodeSize, 8, "code_object.linetable"));
  EXPANSE_ASSIGN_OR_RETURN(layout.code_first_line,
                           fields.Offset(kCodeFirstLine, kCodeSize, 4, "code_object.firstlineno"));
  EXPANSE_ASSIGN_OR_RETURN(layout.code_bytecode, fields.Offset(kCodeAdaptive, kCodeSize, 0,
                                                               "code_object.co_code_adaptive"));

  EXPANSE_ASSIGN_OR_RETURN(layout.object_type,
                           fields.Offset(kObjectType, kObjectSize, 8, "pyobject.ob_type"));
  EXPANSE_ASSIGN_OR_RETURN(layout.bytes_size,
                           fields.Offset(kBytesObSize, kBytesSize, 8, "bytes_object.ob_size"));
  EXPANSE_ASSIGN_OR_RETURN(layout.bytes_data,
                           fields.Offset(kBytesData, kBytesSize, 0, "bytes_object.ob_sval"));
  EXPANSE_ASSIGN_OR_RETURN(layout.unicode_state,
                           fields.Offset(kUnicodeState, kUnicodeSize, 4, "unicode_object.state"));
  EXPANSE_ASSIGN_OR_RETURN(layout.unicode_length,
                           fields.Offset(kUnicodeLength, kUnicodeSize, 8, "unicode_object.length"));
  const std::uint64_t ascii_size = fields.Get(kUnicodeAsciiSize);
  if (ascii_size > kMaxObjectRead || ascii_size < layout.unicode_state + 4) {
    return BadDebugOffsets(Format("PyASCIIObject size {} is implausible", ascii_size));
  }
  layout.unicode_ascii_data = static_cast<std::uint32_t>(ascii_size);
  // PyCompactUnicodeObject adds utf8_length and utf8 (two words) to PyASCIIObject.
  layout.unicode_compact_data = static_cast<std::uint32_t>(ascii_size) + 16;

  if (layout.ThreadReadSize() > kMaxObjectRead || layout.FrameReadSize() > kMaxObjectRead ||
      layout.CodeReadSize() > kMaxObjectRead || layout.bytes_data > kMaxObjectRead ||
      layout.interp_gil_pointer > kMaxStructSize) {
    return BadDebugOffsets("a thread, frame or code field lies past the first 4096 bytes");
  }
  return layout;
}

}  // namespace expanse::pystack
