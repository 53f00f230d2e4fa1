// What the stack walker needs to know about the interpreter in one process: found by the
// interpreter locator, or made up by the synthetic images of the tests and the fuzzer.
#ifndef EXPANSE_PYSTACK_INTERPRETER_INFO_H_
#define EXPANSE_PYSTACK_INTERPRETER_INFO_H_

#include <cstdint>

#include "pystack/python_layout.h"
#include "pystack/python_version.h"

namespace expanse::pystack {

struct InterpreterInfo {
  PythonVersion version;
  PythonLayout layout;
  std::uint64_t runtime_address = 0;  // _PyRuntime
  // Addresses of objects in the target, for checking what pointers point at; 0 skips a check.
  std::uint64_t code_type = 0;    // PyCode_Type
  std::uint64_t str_type = 0;     // PyUnicode_Type
  std::uint64_t bytes_type = 0;   // PyBytes_Type
  std::uint64_t none_object = 0;  // _Py_NoneStruct (3.13 frames may hold None as code)
};

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_INTERPRETER_INFO_H_
