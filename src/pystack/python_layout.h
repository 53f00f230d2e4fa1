// Where CPython keeps what the stack walker reads, per version, on x86-64 builds with the GIL
// (no Py_DEBUG, no Py_TRACE_REFS: the layouts every distribution ships).
//
// 3.9 to 3.12 come from tables here, written from each version's headers
// (Include/internal/pycore_runtime.h, pycore_interp.h, cpython/pystate.h, pycore_frame.h or
// frameobject.h, cpython/code.h, cpython/unicodeobject.h). 3.13 publishes its own offsets in
// _Py_DebugOffsets at the start of _PyRuntime; that table is read from the target and checked.
#ifndef EXPANSE_PYSTACK_PYTHON_LAYOUT_H_
#define EXPANSE_PYSTACK_PYTHON_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/result.h"
#include "pystack/python_version.h"

namespace expanse::pystack {

// An offset the version does not have.
inline constexpr std::uint32_t kNoField = 0xffffffff;

enum class LineTableKind {
  kLnotab,         // 3.9 co_lnotab: (byte delta, signed line delta) pairs
  kLineTable310,   // 3.10 co_linetable: (byte delta, line delta or -128) pairs
  kLocationTable,  // 3.11+ co_linetable: the varint "location table"
};

struct PythonLayout {
  int minor = 0;
  LineTableKind line_table = LineTableKind::kLocationTable;

  // _PyRuntimeState.
  std::uint32_t runtime_interpreters_head = kNoField;
  // 3.9 to 3.11: the GIL lives in _PyRuntime.ceval.gil.
  std::uint32_t runtime_gil_holder = kNoField;  // last_holder (PyThreadState*)
  std::uint32_t runtime_gil_locked = kNoField;  // locked (int)

  // PyInterpreterState.
  std::uint32_t interp_next = kNoField;
  std::uint32_t interp_threads_head = kNoField;
  // 3.12+: interp->ceval.gil points at a struct _gil_runtime_state, with these fields.
  std::uint32_t interp_gil_pointer = kNoField;
  std::uint32_t gil_holder = kNoField;
  std::uint32_t gil_locked = kNoField;

  // PyThreadState.
  std::uint32_t thread_next = kNoField;
  std::uint32_t thread_interp = kNoField;
  // 3.9/3.10: `frame` (PyFrameObject*); 3.11/3.12: `cframe` (_PyCFrame*), whose
  // `current_frame` is at cframe_current_frame; 3.13: `current_frame`.
  std::uint32_t thread_frame = kNoField;
  std::uint32_t cframe_current_frame = kNoField;
  std::uint32_t thread_id = kNoField;         // pthread_t
  std::uint32_t thread_native_id = kNoField;  // 3.11+: the kernel's thread id

  // Frames: PyFrameObject before 3.11, _PyInterpreterFrame after.
  bool interpreter_frames = true;
  std::uint32_t frame_previous = kNoField;  // f_back / previous
  std::uint32_t frame_code = kNoField;      // f_code / f_executable
  // 3.9/3.10: f_lasti (int; bytes in 3.9, code units in 3.10). 3.11/3.12: prev_instr,
  // 3.13: instr_ptr (pointers into the code object's bytecode).
  std::uint32_t frame_instruction = kNoField;
  std::uint32_t frame_owner = kNoField;  // 3.11+ (char)
  // 3.12+: the owner of the shim frames the interpreter pushes when C calls into Python.
  int frame_owner_c_stack = -1;

  // PyCodeObject.
  std::uint32_t code_filename = kNoField;
  std::uint32_t code_name = kNoField;
  std::uint32_t code_qualname = kNoField;  // 3.11+
  std::uint32_t code_first_line = kNoField;
  std::uint32_t code_line_table = kNoField;  // co_lnotab (3.9) or co_linetable
  std::uint32_t code_bytecode = kNoField;    // 3.11+: co_code_adaptive, inline in the object

  // Objects.
  std::uint32_t object_type = 8;  // ob_type
  std::uint32_t bytes_size = 16;  // PyBytesObject ob_size
  std::uint32_t bytes_data = 32;  // ob_sval
  std::uint32_t unicode_length = 16;
  std::uint32_t unicode_state = 32;
  std::uint32_t unicode_ascii_data = kNoField;    // sizeof(PyASCIIObject)
  std::uint32_t unicode_compact_data = kNoField;  // sizeof(PyCompactUnicodeObject)

  // How many leading bytes of each struct hold every field above; what one read fetches.
  std::uint32_t ThreadReadSize() const;
  std::uint32_t FrameReadSize() const;
  std::uint32_t CodeReadSize() const;
};

// The built-in layout for 3.9 to 3.12. kFailedPrecondition, reason "unsupported_version",
// for any other version (3.13 must come from its debug offsets).
Result<PythonLayout> BuiltInLayout(const PythonVersion& version);

// The cookie at the start of _PyRuntime on 3.13+.
inline constexpr std::string_view kDebugOffsetsCookie = "xdebugpy";
// How many bytes of _PyRuntime the 3.13 _Py_DebugOffsets table takes.
inline constexpr std::size_t kDebugOffsets313Size = 8 + 72 * 8;

// The version the table announces (its PY_VERSION_HEX), after checking the cookie; nullopt
// when `table` does not start with the cookie or is shorter than 16 bytes.
std::optional<PythonVersion> DebugOffsetsVersion(std::span<const std::uint8_t> table);

// Reads a 3.13 _Py_DebugOffsets table (`table` holds kDebugOffsets313Size bytes from the start
// of _PyRuntime). Every offset is checked against the struct size the table gives and against
// a sanity bound, so a hostile table cannot make the walker read far. Errors: reason
// "unsupported_version" for a table of another version or a free-threaded build,
// "bad_debug_offsets" (kDataLoss) for a bad cookie or inconsistent offsets.
Result<PythonLayout> LayoutFromDebugOffsets(std::span<const std::uint8_t> table);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PYTHON_LAYOUT_H_
