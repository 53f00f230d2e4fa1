#include "pystack/python_layout.h"

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "pystack/synthetic_image.h"

namespace expanse::pystack {
namespace python_layout_test {
namespace {

std::span<const std::uint8_t> Bytes(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

void SetField(std::string& table, std::size_t index, std::uint64_t value) {
  std::memcpy(table.data() + 8 + index * 8, &value, 8);
}

TEST(PythonLayoutTest, BuiltInLayoutsForThreeNineToThreeTwelve) {
  for (int minor = 9; minor <= 12; ++minor) {
    const Result<PythonLayout> layout = BuiltInLayout(MajorMinor(3, minor));
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->minor, minor);
    EXPECT_EQ(layout->interpreter_frames, minor >= 11);
    EXPECT_EQ(layout->code_qualname != kNoField, minor >= 11);
    EXPECT_EQ(layout->thread_native_id != kNoField, minor >= 11);
    EXPECT_EQ(layout->interp_gil_pointer != kNoField, minor >= 12);
    EXPECT_LE(layout->ThreadReadSize(), 4096u);
    EXPECT_LE(layout->CodeReadSize(), 4096u);
  }
  EXPECT_EQ(BuiltInLayout(MajorMinor(3, 9))->line_table, LineTableKind::kLnotab);
  EXPECT_EQ(BuiltInLayout(MajorMinor(3, 10))->line_table, LineTableKind::kLineTable310);
  EXPECT_EQ(BuiltInLayout(MajorMinor(3, 11))->line_table, LineTableKind::kLocationTable);
}

TEST(PythonLayoutTest, NoBuiltInLayoutElsewhere) {
  for (const PythonVersion& version :
       {MajorMinor(3, 8), MajorMinor(3, 13), MajorMinor(3, 14), MajorMinor(2, 7)}) {
    const Result<PythonLayout> layout = BuiltInLayout(version);
    ASSERT_FALSE(layout.ok());
    EXPECT_EQ(layout.status().reason(), "unsupported_version");
  }
}

TEST(PythonLayoutTest, ReadsTheThreeThirteenDebugOffsets) {
  const std::string table = DebugOffsetsTable3130();
  ASSERT_EQ(table.size(), kDebugOffsets313Size);
  EXPECT_EQ(DebugOffsetsVersion(Bytes(table))->ToString(), "3.13.0");
  const Result<PythonLayout> layout = LayoutFromDebugOffsets(Bytes(table));
  ASSERT_TRUE(layout.ok()) << layout.status();
  // The numbers offsetof() gives with 3.13.0's headers.
  EXPECT_EQ(layout->runtime_interpreters_head, 632u);
  EXPECT_EQ(layout->interp_next, 7264u);
  EXPECT_EQ(layout->interp_threads_head, 7344u);
  EXPECT_EQ(layout->interp_gil_pointer, 16u);
  EXPECT_EQ(layout->gil_holder, 8u);
  EXPECT_EQ(layout->gil_locked, 16u);
  EXPECT_EQ(layout->thread_next, 8u);
  EXPECT_EQ(layout->thread_interp, 16u);
  EXPECT_EQ(layout->thread_frame, 72u);
  EXPECT_EQ(layout->cframe_current_frame, kNoField);
  EXPECT_EQ(layout->thread_native_id, 160u);
  EXPECT_EQ(layout->frame_previous, 8u);
  EXPECT_EQ(layout->frame_code, 0u);
  EXPECT_EQ(layout->frame_instruction, 56u);
  EXPECT_EQ(layout->frame_owner, 70u);
  EXPECT_EQ(layout->frame_owner_c_stack, 3);
  EXPECT_EQ(layout->code_filename, 112u);
  EXPECT_EQ(layout->code_name, 120u);
  EXPECT_EQ(layout->code_qualname, 128u);
  EXPECT_EQ(layout->code_line_table, 136u);
  EXPECT_EQ(layout->code_first_line, 68u);
  EXPECT_EQ(layout->code_bytecode, 200u);
  EXPECT_EQ(layout->unicode_ascii_data, 40u);
  EXPECT_EQ(layout->unicode_compact_data, 56u);
  EXPECT_EQ(layout->line_table, LineTableKind::kLocationTable);
}

TEST(PythonLayoutTest, RefusesABadCookieOrShortTable) {
  std::string table = DebugOffsetsTable3130();
  table[0] = 'X';
  EXPECT_FALSE(DebugOffsetsVersion(Bytes(table)).has_value());
  const Result<PythonLayout> bad_cookie = LayoutFromDebugOffsets(Bytes(table));
  ASSERT_FALSE(bad_cookie.ok());
  EXPECT_EQ(bad_cookie.status().reason(), "bad_debug_offsets");

  const std::string short_table = DebugOffsetsTable3130().substr(0, 100);
  const Result<PythonLayout> truncated = LayoutFromDebugOffsets(Bytes(short_table));
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().reason(), "bad_debug_offsets");
}

TEST(PythonLayoutTest, RefusesOtherVersionsAndFreeThreadedBuilds) {
  std::string newer = DebugOffsetsTable3130();
  SetField(newer, 0, 0x030E00F0);
  const Result<PythonLayout> too_new = LayoutFromDebugOffsets(Bytes(newer));
  ASSERT_FALSE(too_new.ok());
  EXPECT_EQ(too_new.status().reason(), "unsupported_version");
  EXPECT_NE(too_new.status().message().find("3.14.0"), std::string::npos);

  std::string free_threaded = DebugOffsetsTable3130();
  SetField(free_threaded, 1, 1);
  const Result<PythonLayout> no_gil = LayoutFromDebugOffsets(Bytes(free_threaded));
  ASSERT_FALSE(no_gil.ok());
  EXPECT_EQ(no_gil.status().reason(), "unsupported_version");
}

TEST(PythonLayoutTest, RefusesOffsetsOutsideTheirStructs) {
  // threads_head past the interpreter struct's size; a frame field past 4096 bytes; a size
  // too large to believe; GIL fields before the GIL struct.
  struct Mutation {
    std::size_t index;
    std::uint64_t value;
  };
  for (const Mutation& mutation :
       {Mutation{8, 194968}, Mutation{8, ~std::uint64_t{0}}, Mutation{27, 1 << 20},
        Mutation{28, 8192}, Mutation{5, std::uint64_t{1} << 40}, Mutation{16, 8},
        Mutation{69, 1 << 20}}) {
    std::string table = DebugOffsetsTable3130();
    SetField(table, mutation.index, mutation.value);
    if (mutation.index == 27) {
      SetField(table, 28, 5000);  // a frame field inside a huge frame struct
    }
    const Result<PythonLayout> layout = LayoutFromDebugOffsets(Bytes(table));
    ASSERT_FALSE(layout.ok()) << "field " << mutation.index;
    EXPECT_EQ(layout.status().reason(), "bad_debug_offsets") << layout.status();
  }
}

}  // namespace
}  // namespace python_layout_test
}  // namespace expanse::pystack
