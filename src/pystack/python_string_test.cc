#include "pystack/python_string.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pystack/memory_image.h"

namespace expanse::pystack {
namespace python_string_test {
namespace {

constexpr std::uint64_t kAddress = 0x10000;
constexpr std::uint64_t kStrType = 0x7f0000002000;

PythonLayout Layout(int minor) { return *BuiltInLayout(MajorMinor(3, minor)); }

// A str object as CPython lays it out: header, then `kind`-byte code points.
std::string StrObject(const PythonLayout& layout, const std::vector<std::uint32_t>& points,
                      std::uint32_t kind, bool ascii, bool compact = true,
                      std::uint64_t type = kStrType) {
  const std::uint32_t data = ascii ? layout.unicode_ascii_data : layout.unicode_compact_data;
  std::string object(data + (points.size() + 1) * kind, '\0');
  std::memcpy(object.data() + layout.object_type, &type, 8);
  const std::uint64_t length = points.size();
  std::memcpy(object.data() + layout.unicode_length, &length, 8);
  const std::uint32_t state = (kind << 2) | (compact ? 1u << 5 : 0) | (ascii ? 1u << 6 : 0);
  std::memcpy(object.data() + layout.unicode_state, &state, 4);
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::memcpy(object.data() + data + i * kind, &points[i], kind);
  }
  return object;
}

Result<std::string> Decode(const PythonLayout& layout, const std::string& object,
                           std::size_t max_bytes = 1024) {
  MemoryImage image;
  image.Map(kAddress, object);
  return ReadPythonString(image, layout, kAddress, kStrType, max_bytes);
}

class PythonStringTest : public ::testing::TestWithParam<int> {};

TEST_P(PythonStringTest, DecodesEveryCompactKind) {
  const PythonLayout layout = Layout(GetParam());
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'r', 'u', 'n'}, 1, true)), "run");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'c', 0xe9}, 1, false)), "c\xc3\xa9");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {0x3b1, '/', 0x4e2d}, 2, false)),
            "\xce\xb1/\xe4\xb8\xad");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'x', 0x1f600}, 4, false)), "x\xf0\x9f\x98\x80");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {}, 1, true)), "");
}

TEST_P(PythonStringTest, ReplacesWhatUtf8CannotHold) {
  const PythonLayout layout = Layout(GetParam());
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'a', 0xd800, 'b'}, 2, false)), "a?b");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {0x110000}, 4, false)), "?");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'a', 0xff}, 1, true)), "a?");  // "ASCII" lies
}

TEST_P(PythonStringTest, CutsLongStringsAtACharacterBoundary) {
  const PythonLayout layout = Layout(GetParam());
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'a', 'b', 'c', 'd', 'e'}, 1, true), 3), "abc...");
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'a', 'b', 'c'}, 1, true), 3), "abc");
  // Two-byte characters: the third would pass the limit of 5 bytes.
  EXPECT_EQ(*Decode(layout, StrObject(layout, {0x3b1, 0x3b2, 0x3b3}, 2, false), 5),
            "\xce\xb1\xce\xb2...");
}

TEST_P(PythonStringTest, ReadsNoMoreThanTheLimitNeeds) {
  const PythonLayout layout = Layout(GetParam());
  // A length of 2^40 with only a few bytes mapped: only max_bytes + 1 are read.
  std::string object = StrObject(layout, std::vector<std::uint32_t>(40, 'q'), 1, true);
  const std::uint64_t huge = std::uint64_t{1} << 40;
  std::memcpy(object.data() + layout.unicode_length, &huge, 8);
  EXPECT_EQ(*Decode(layout, object, 8), "qqqqqqqq...");
}

TEST_P(PythonStringTest, RefusesWhatIsNotAStr) {
  const PythonLayout layout = Layout(GetParam());
  const Result<std::string> wrong_type =
      Decode(layout, StrObject(layout, {'x'}, 1, true, true, 0x1234));
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().reason(), "inconsistent_read");
  EXPECT_EQ(Decode(layout, StrObject(layout, {'x'}, 3, false)).status().reason(),
            "inconsistent_read");
  EXPECT_EQ(Decode(layout, StrObject(layout, {'x'}, 2, true)).status().reason(),
            "inconsistent_read");
  std::string negative = StrObject(layout, {'x'}, 1, true);
  const std::int64_t minus_one = -1;
  std::memcpy(negative.data() + layout.unicode_length, &minus_one, 8);
  EXPECT_EQ(Decode(layout, negative).status().reason(), "inconsistent_read");
  MemoryImage empty;
  EXPECT_EQ(ReadPythonString(empty, layout, 0, kStrType, 10).status().reason(),
            "inconsistent_read");
  EXPECT_EQ(ReadPythonString(empty, layout, kAddress, kStrType, 10).status().reason(),
            "unreadable_address");
}

TEST_P(PythonStringTest, NonCompactStringsReadAsEmpty) {
  const PythonLayout layout = Layout(GetParam());
  EXPECT_EQ(*Decode(layout, StrObject(layout, {'x'}, 1, false, /*compact=*/false)), "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, PythonStringTest, ::testing::Values(9, 10, 11, 12),
                         [](const auto& param_info) {
                           return "Py3_" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace python_string_test
}  // namespace expanse::pystack
