// Decoding a CPython str object in another process's memory to UTF-8.
#ifndef EXPANSE_PYSTACK_PYTHON_STRING_H_
#define EXPANSE_PYSTACK_PYTHON_STRING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/result.h"
#include "pystack/python_layout.h"
#include "pystack/remote_memory.h"

namespace expanse::pystack {

// Reads the str at `address`. Compact strings are decoded (the interpreter makes every name
// and file name compact): ASCII, Latin-1, UCS-2 and UCS-4, with lone surrogates and values
// past U+10FFFF turned into '?'. A non-compact string (a str subclass) reads as "". At most
// `max_bytes` bytes of UTF-8 are produced; a longer string is cut at a character boundary and
// "..." appended, and no more of it is read than that needs.
//
// `str_type` is the address of PyUnicode_Type in the target; unless it is 0 the object's type
// must be it. Errors: "inconsistent_read" for an object that is not a plausible str, and the
// memory's own errors.
Result<std::string> ReadPythonString(RemoteMemory& memory, const PythonLayout& layout,
                                     std::uint64_t address, std::uint64_t str_type,
                                     std::size_t max_bytes);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_PYTHON_STRING_H_
