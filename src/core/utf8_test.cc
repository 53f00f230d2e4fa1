#include "core/utf8.h"

#include <string>

#include <gtest/gtest.h>

namespace expanse {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));           // U+00E9
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));          // U+20AC
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x9A\x80"));      // U+1F680
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));      // U+10FFFF, the last code point
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));  // NUL is valid UTF-8
}

TEST(Utf8Test, RejectsMalformedSequences) {
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // continuation without lead
  EXPECT_FALSE(IsValidUtf8("\xC3"));                  // truncated 2-byte sequence
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));              // truncated 3-byte sequence
  EXPECT_FALSE(IsValidUtf8("\xC3\x28"));              // bad continuation byte
  EXPECT_FALSE(IsValidUtf8("\xF8\x88\x80\x80\x80"));  // 5-byte form
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(Utf8Test, RejectsOverlongForms) {
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // '/' in two bytes
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // '/' in three bytes
  EXPECT_FALSE(IsValidUtf8("\xF0\x80\x80\xAF"));  // '/' in four bytes
}

TEST(Utf8Test, RejectsSurrogatesAndCodePointsAboveUnicode) {
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800
  EXPECT_FALSE(IsValidUtf8("\xED\xBF\xBF"));      // U+DFFF
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000
}

TEST(Utf8Test, CleanTextReplacesControlsAndCutsAtACharactersStart) {
  EXPECT_EQ(CleanText("train\tjob\n\x7f", 64), "train?job??");
  EXPECT_EQ(CleanText("short", 64), "short");
  // "é" is two bytes: a cut through it backs off to its start, and the result stays UTF-8.
  EXPECT_EQ(CleanText("ab\xC3\xA9", 3), "ab");
  EXPECT_EQ(CleanText("ab\xC3\xA9", 4), "ab\xC3\xA9");
  EXPECT_EQ(CleanText("\xE2\x82\xAC\xE2\x82\xAC", 5), "\xE2\x82\xAC");  // two euro signs, 5 bytes
  // Not UTF-8 at all: every non-ASCII byte goes, the ASCII stays.
  EXPECT_EQ(CleanText("a\xFF\xFE"
                      "b",
                      64),
            "a??b");
  for (const char* text : {"x\xC3", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80", "\xFF\xFF\xFF"}) {
    for (size_t max = 0; max < 9; ++max) {
      const std::string cleaned = CleanText(text, max);
      EXPECT_LE(cleaned.size(), max) << text;
      EXPECT_TRUE(IsValidUtf8(cleaned)) << text << " cut to " << max;
    }
  }
  EXPECT_EQ(CleanText(std::string(300, 'n'), 256), std::string(256, 'n'));
  // A bad byte past the cut costs nothing before it.
  EXPECT_EQ(CleanText("\xC3\xA9" + std::string(300, 'n') + "\xFF", 10),
            "\xC3\xA9" + std::string(8, 'n'));
}

}  // namespace
}  // namespace expanse
