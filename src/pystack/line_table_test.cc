#include "pystack/line_table.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::pystack {
namespace line_table_test {
namespace {

// Line tables of four functions (see the script below) as CPython 3.9.18, 3.10.13, 3.11.7,
// 3.12.1 and 3.13.0 compiled them, with the line of every instruction as the interpreter
// itself reports it: dis.findlinestarts() on 3.9, code.co_lines() on 3.10+ (0 where it says
// None). Generated with, per interpreter:
//
//   src = "def simple(a): ...", "def jumps(n): ..." (a loop with if/else),
//         "def nolines(f): ..." (with and try/finally), 300 blank lines,
//         "def far(x): ..." with a 200-line gap inside it
//   for each function: table = co_lnotab (3.9) or co_linetable, and per 2-byte unit its line
//
// Ranges are [start, end) byte offsets with one line.
struct Range {
  int start;
  int end;
  int line;
};
struct Fixture {
  int minor;
  const char* function;
  int first_line;
  const char* table_hex;
  std::vector<Range> ranges;
};

const std::vector<Fixture>& Fixtures() {
  static const std::vector<Fixture> fixtures = {
      {9, "simple", 2, "000108010801", {{0, 8, 3}, {8, 16, 4}, {16, 20, 5}}},
      {9,
       "jumps",
       7,
       "000104010c0108010a020a01",
       {{0, 4, 8}, {4, 16, 9}, {16, 24, 10}, {24, 34, 11}, {34, 44, 13}, {44, 48, 14}}},
      {9,
       "nolines",
       16,
       "000106011e010201020208fe0402",
       {{0, 6, 17},
        {6, 36, 18},
        {36, 38, 19},
        {38, 40, 20},
        {40, 48, 22},
        {48, 52, 20},
        {52, 66, 22}}},
      {9,
       "far",
       324,
       "0001047f004b020102ff",
       {{0, 4, 325}, {4, 6, 527}, {6, 8, 528}, {8, 12, 527}}},
      {10, "simple", 2, "080108010401", {{0, 8, 3}, {8, 16, 4}, {16, 20, 5}}},
      {10,
       "jumps",
       7,
       "04010c0108010a010a020401",
       {{0, 4, 8}, {4, 16, 9}, {16, 24, 10}, {24, 34, 11}, {34, 44, 13}, {44, 48, 14}}},
      {10,
       "nolines",
       16,
       "060102011cff020202011602",
       {{0, 6, 17}, {6, 8, 18}, {8, 36, 17}, {36, 38, 19}, {38, 40, 20}, {40, 62, 22}}},
      {10,
       "far",
       324,
       "0401007f024b020104ff",
       {{0, 4, 325}, {4, 6, 527}, {6, 8, 528}, {8, 12, 527}}},
      {11,
       "simple",
       2,
       "8000d80809884189058041d80809884189058041d80b0c8048",
       {{0, 2, 2}, {2, 12, 3}, {12, 22, 4}, {22, 26, 5}}},
      {11,
       "jumps",
       7,
       "8000d80c0d8045dd0d12903189588c58f000040517f0000405178801d80b0c88718935f000030917d80c1190518"
       "94a88458845e00c119051894a88458845d80b10804c",
       {{0, 2, 7}, {2, 6, 8}, {6, 40, 9}, {40, 50, 10}, {50, 62, 11}, {62, 74, 13}, {74, 78, 14}}},
      {11,
       "nolines",
       16,
       "8000d8090af00001050df00001050dd8080cf00301050df00001050df00001050df10001050df40001050df0000"
       "1050df00001050df00001050df00001050df00001050df00001050df8f8f8f00001050df00001050df00001050d"
       "f00001050df004030512d80f10e008098f078a0789098c09880988098809f888018f078a0789098c0988098809f"
       "8f8f8",
       {{0, 2, 16},
        {2, 8, 17},
        {8, 10, 18},
        {10, 42, 17},
        {42, 48, 0},
        {48, 56, 17},
        {56, 58, 19},
        {58, 60, 20},
        {60, 104, 22},
        {104, 106, 0},
        {106, 148, 22},
        {148, 154, 0}}},
      {11,
       "far",
       324,
       "8000d808098041f05406000d0ed80c0df103010d0ef00001050f",
       {{0, 2, 324}, {2, 6, 325}, {6, 8, 527}, {8, 10, 528}, {10, 16, 527}}},
      {12,
       "simple",
       2,
       "8000d80809884189058041d80809884189058041d80b0c8048",
       {{0, 2, 2}, {2, 12, 3}, {12, 22, 4}, {22, 26, 5}}},
      {12,
       "jumps",
       7,
       "8000d80c0d8045dc0d1290318b58f2000405178801d80b0c88718a35d80c119051894a8945e00c119051894a894"
       "5f009040517f00a000c11804c",
       {{0, 2, 7},
        {2, 6, 8},
        {6, 34, 9},
        {34, 44, 10},
        {44, 56, 11},
        {56, 68, 13},
        {68, 70, 9},
        {70, 74, 14}}},
      {12,
       "nolines",
       16,
       "8000d8090af10001050dd8080cf70301050df004030512d80f10e008098f0789078d09f70b01050df00001050df"
       "bf00a00090a8f0789078d09fa",
       {{0, 2, 16},
        {2, 8, 17},
        {8, 10, 18},
        {10, 26, 17},
        {26, 28, 19},
        {28, 30, 20},
        {30, 64, 22},
        {64, 82, 17},
        {82, 90, 0},
        {90, 124, 22},
        {124, 130, 0}}},
      {12,
       "far",
       324,
       "8000d808098041f05406000d0ed80c0df103010d0ef00001050f",
       {{0, 2, 324}, {2, 6, 325}, {6, 8, 527}, {8, 10, 528}, {10, 16, 527}}},
      {13,
       "simple",
       2,
       "8000d80809884189058041d80809884189058041d80b0c8048",
       {{0, 2, 2}, {2, 12, 3}, {12, 22, 4}, {22, 26, 5}}},
      {13,
       "jumps",
       7,
       "8000d80c0d8045dc0d1290318e588801d80b0c88718f35d80c11894a8a45e00c119051894a8a45f109000e16f00"
       "a000c11804c",
       {{0, 2, 7},
        {2, 6, 8},
        {6, 34, 9},
        {34, 54, 10},
        {54, 66, 11},
        {66, 80, 13},
        {80, 84, 9},
        {84, 88, 14}}},
      {13,
       "nolines",
       16,
       "8000da090ad8080cf703000a0bf004030512d80f10e008098f0789078d09f70b000a0b8d11fbf00a00090a8f078"
       "9078d09fa",
       {{0, 2, 16},
        {2, 8, 17},
        {8, 10, 18},
        {10, 26, 17},
        {26, 28, 19},
        {28, 30, 20},
        {30, 64, 22},
        {64, 92, 17},
        {92, 100, 0},
        {100, 134, 22},
        {134, 140, 0}}},
      {13,
       "far",
       324,
       "8000d808098041f05406000d0ed80c0df103010d0ef00001050f",
       {{0, 2, 324}, {2, 6, 325}, {6, 8, 527}, {8, 10, 528}, {10, 16, 527}}},
  };
  return fixtures;
}

std::vector<std::uint8_t> FromHex(std::string_view hex) {
  std::vector<std::uint8_t> bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(
        static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return bytes;
}

LineTableKind KindFor(int minor) {
  return minor == 9    ? LineTableKind::kLnotab
         : minor == 10 ? LineTableKind::kLineTable310
                       : LineTableKind::kLocationTable;
}

TEST(LineTableTest, MatchesWhatEachInterpreterReports) {
  int checked = 0;
  for (const Fixture& fixture : Fixtures()) {
    const std::vector<std::uint8_t> table = FromHex(fixture.table_hex);
    for (const Range& range : fixture.ranges) {
      for (int offset = range.start; offset < range.end; offset += 2) {
        EXPECT_EQ(LineForOffset(KindFor(fixture.minor), table, fixture.first_line, offset),
                  range.line)
            << "3." << fixture.minor << " " << fixture.function << " at byte " << offset;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 400);
}

TEST(LineTableTest, FixturesCoverLongJumpsAndMissingLines) {
  // The fixtures would not test much if they lacked these.
  bool far_line = false;
  bool no_line = false;
  for (const Fixture& fixture : Fixtures()) {
    for (const Range& range : fixture.ranges) {
      far_line = far_line || range.line > fixture.first_line + 200;
      no_line = no_line || range.line == 0;
    }
  }
  EXPECT_TRUE(far_line);
  EXPECT_TRUE(no_line);
}

TEST(LineTableTest, NegativeOffsetIsTheFirstLine) {
  for (const Fixture& fixture : Fixtures()) {
    EXPECT_EQ(
        LineForOffset(KindFor(fixture.minor), FromHex(fixture.table_hex), fixture.first_line, -1),
        fixture.first_line);
  }
}

TEST(LineTableTest, PastTheEndIsUnknownExceptForLnotab) {
  for (const Fixture& fixture : Fixtures()) {
    const int line = LineForOffset(KindFor(fixture.minor), FromHex(fixture.table_hex),
                                   fixture.first_line, 1 << 20);
    if (fixture.minor == 9) {
      // 3.9's lnotab has no end: the last line goes on, as PyCode_Addr2Line says.
      EXPECT_EQ(line, fixture.ranges.back().line);
    } else {
      EXPECT_EQ(line, 0) << "3." << fixture.minor << " " << fixture.function;
    }
  }
}

TEST(LineTableTest, ANonPositiveFirstLineIsUnknown) {
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, {}, -5, -1), 0);
  EXPECT_EQ(LineForOffset(LineTableKind::kLnotab, {}, -5, 3), 0);
}

TEST(LineTableTest, EmptyTables) {
  EXPECT_EQ(LineForOffset(LineTableKind::kLnotab, {}, 7, 10), 7);
  EXPECT_EQ(LineForOffset(LineTableKind::kLineTable310, {}, 7, 10), 0);
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, {}, 7, 10), 0);
}

TEST(LineTableTest, LocationTableLongFormAndNoLocation) {
  // Code 14 (long form): line delta +300, end line, columns; then code 15 (no location).
  const std::vector<std::uint8_t> table = {
      0x80 | (14 << 3) | 1, 0x58, 0x09, 0x00, 0x05, 0x09,  // 2 units, line +300
      0x80 | (15 << 3) | 0,                                // 1 unit, no line
      0x80 | (11 << 3) | 0, 0x01, 0x02,                    // 1 unit, line +1
  };
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, table, 10, 0), 310);
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, table, 10, 2), 310);
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, table, 10, 4), 0);
  // The entry without location does not move the line: +1 from 310.
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, table, 10, 6), 311);
}

TEST(LineTableTest, GarbageNeverCrashesAndGivesPlausibleLines) {
  std::mt19937 random(7);
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::uint8_t> table(random() % 64);
    for (std::uint8_t& byte : table) {
      byte = static_cast<std::uint8_t>(random());
    }
    for (const LineTableKind kind :
         {LineTableKind::kLnotab, LineTableKind::kLineTable310, LineTableKind::kLocationTable}) {
      const int line = LineForOffset(kind, table, static_cast<int>(random() % 1000),
                                     static_cast<std::int64_t>(random() % 512));
      EXPECT_GE(line, 0);
    }
  }
}

TEST(LineTableTest, HugeVarintsDoNotOverflow) {
  std::vector<std::uint8_t> table;
  for (int entry = 0; entry < 100; ++entry) {
    table.push_back(0x80 | (13 << 3));
    for (int i = 0; i < 12; ++i) {
      table.push_back(0x7e);  // continuation bit and large groups
    }
    table.push_back(0x3e);
  }
  EXPECT_EQ(LineForOffset(LineTableKind::kLocationTable, table, 1, 150), 0);
}

}  // namespace
}  // namespace line_table_test
}  // namespace expanse::pystack
