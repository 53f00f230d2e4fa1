// Line numbers from a code object's line table, in each of the three formats CPython 3.9 to
// 3.13 use. Pure; every loop is bounded by the table's length, so a garbage table costs at
// most one pass over its bytes.
#ifndef EXPANSE_PYSTACK_LINE_TABLE_H_
#define EXPANSE_PYSTACK_LINE_TABLE_H_

#include <cstdint>
#include <span>

#include "pystack/python_layout.h"

namespace expanse::pystack {

// The source line of the instruction `byte_offset` bytes into the code's bytecode (what the
// interpreter's PyCode_Addr2Line answers). A negative offset (a frame that has not started)
// gives `first_line`; an instruction the table marks as having no line, or one past the end
// of the table, gives 0 (unknown, never a guess).
int LineForOffset(LineTableKind kind, std::span<const std::uint8_t> table, int first_line,
                  std::int64_t byte_offset);

}  // namespace expanse::pystack

#endif  // EXPANSE_PYSTACK_LINE_TABLE_H_
