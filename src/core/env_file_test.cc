#include "core/env_file.h"

#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// Pairs print readably in GoogleTest failures; EnvEntry would print as bytes.
KeyValues ToKeyValues(const EnvFile& file) {
  KeyValues out;
  for (const EnvEntry& entry : file.entries()) {
    out.emplace_back(entry.key, entry.value);
  }
  return out;
}

// The parsed entries of `text`; on a parse error, the status text, so the failing
// expectation shows it.
KeyValues Parse(std::string_view text) {
  const Result<EnvFile> file = ParseEnvFile(text);
  if (!file.ok()) {
    return {{"<error>", file.status().ToString()}};
  }
  return ToKeyValues(*file);
}

// The error message for text that must not parse.
std::string ParseError(std::string_view text) {
  const Result<EnvFile> file = ParseEnvFile(text);
  if (file.ok()) {
    return "<parsed without error>";
  }
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
  return file.status().message();
}

EnvFile MakeEnvFile(const KeyValues& key_values) {
  EnvFile file;
  for (const auto& [key, value] : key_values) {
    EXPECT_TRUE(file.Set(key, value).ok()) << key;
  }
  return file;
}

std::string Merge(std::string_view existing, const KeyValues& updates) {
  const Result<std::string> merged = MergeEnvFile(existing, MakeEnvFile(updates));
  if (!merged.ok()) {
    return "<error> " + merged.status().ToString();
  }
  return *merged;
}

// --- ParseEnvFile: accepted syntax -------------------------------------------

TEST(ParseEnvFileTest, EmptyAndBlankInputHaveNoEntries) {
  EXPECT_THAT(Parse(""), IsEmpty());
  EXPECT_THAT(Parse("\n\n  \t\n"), IsEmpty());
}

TEST(ParseEnvFileTest, KeepsEntriesInFileOrder) {
  EXPECT_THAT(Parse("B=2\nA=1\nC=3\n"),
              ElementsAre(Pair("B", "2"), Pair("A", "1"), Pair("C", "3")));
}

TEST(ParseEnvFileTest, LastLineNeedsNoNewline) {
  EXPECT_THAT(Parse("A=1\nB=2"), ElementsAre(Pair("A", "1"), Pair("B", "2")));
}

TEST(ParseEnvFileTest, SkipsCommentsAndBlankLines) {
  EXPECT_THAT(Parse("# proxy settings\n; old style comment\n\n   # indented\nA=1\n"),
              ElementsAre(Pair("A", "1")));
}

TEST(ParseEnvFileTest, EmptyValue) {
  EXPECT_THAT(Parse("A=\nB=   \n"), ElementsAre(Pair("A", ""), Pair("B", "")));
}

TEST(ParseEnvFileTest, BlanksAroundKeyAndEqualsAreIgnored) {
  EXPECT_THAT(Parse("  A = value\n\tB\t=\tx\n"), ElementsAre(Pair("A", "value"), Pair("B", "x")));
}

TEST(ParseEnvFileTest, UnquotedValueKeepsInnerBlanksAndDropsTrailingOnes) {
  EXPECT_THAT(Parse("A=a  b \t \n"), ElementsAre(Pair("A", "a  b")));
}

TEST(ParseEnvFileTest, HashInsideUnquotedValueIsLiteralAsInSystemd) {
  EXPECT_THAT(Parse("URL=https://host/#frag\nA=b # not a comment\n"),
              ElementsAre(Pair("URL", "https://host/#frag"), Pair("A", "b # not a comment")));
}

TEST(ParseEnvFileTest, QuotesInsideUnquotedValueAreLiteral) {
  EXPECT_THAT(Parse("A=a\"b\"'c'\n"), ElementsAre(Pair("A", "a\"b\"'c'")));
}

TEST(ParseEnvFileTest, UnquotedBackslashEscapesNextCharacter) {
  // Ordinary string literal: GCC warns about "\ " before a newline even in raw strings.
  EXPECT_THAT(Parse("A=a\\ b\nB=C:\\path\nC=trailing\\ \nD=a\\\\b\n"),
              ElementsAre(Pair("A", "a b"), Pair("B", "C:path"), Pair("C", "trailing "),
                          Pair("D", "a\\b")));
}

TEST(ParseEnvFileTest, UnquotedBackslashNewlineJoinsLines) {
  EXPECT_THAT(Parse("A=abc\\\ndef\nB=2\n"), ElementsAre(Pair("A", "abcdef"), Pair("B", "2")));
}

TEST(ParseEnvFileTest, BlanksBeforeABackslashAreKept) {
  EXPECT_THAT(Parse("A=a  \\\nb\n"), ElementsAre(Pair("A", "a  b")));
}

TEST(ParseEnvFileTest, SingleQuotesAreLiteral) {
  EXPECT_THAT(Parse(R"(A='a\nb $HOME "x"'
B='  padded  '
)"),
              ElementsAre(Pair("A", R"(a\nb $HOME "x")"), Pair("B", "  padded  ")));
}

TEST(ParseEnvFileTest, DoubleQuotesUnescapeShellSpecialCharacters) {
  EXPECT_THAT(Parse(R"(A="q\" b\\ t\` d\$"
)"),
              ElementsAre(Pair("A", R"(q" b\ t` d$)")));
}

TEST(ParseEnvFileTest, DoubleQuotesKeepOtherBackslashes) {
  EXPECT_THAT(Parse(R"(A="a\qb\n"
)"),
              ElementsAre(Pair("A", R"(a\qb\n)")));
}

TEST(ParseEnvFileTest, QuotedValuesMaySpanLines) {
  EXPECT_THAT(Parse("A=\"line1\nline2\"\nB='x\ny'\nC=3\n"),
              ElementsAre(Pair("A", "line1\nline2"), Pair("B", "x\ny"), Pair("C", "3")));
}

TEST(ParseEnvFileTest, DoubleQuotedBackslashNewlineJoinsLines) {
  EXPECT_THAT(Parse("A=\"one \\\ntwo\"\n"), ElementsAre(Pair("A", "one two")));
}

TEST(ParseEnvFileTest, BlanksAfterClosingQuoteAreAllowed) {
  EXPECT_THAT(Parse("A=\"x\"   \nB='y'\t\n"), ElementsAre(Pair("A", "x"), Pair("B", "y")));
}

TEST(ParseEnvFileTest, CrLfLineEndings) {
  EXPECT_THAT(Parse("# c\r\nA=1\r\nB=\"two\"\r\n"), ElementsAre(Pair("A", "1"), Pair("B", "two")));
}

TEST(ParseEnvFileTest, LoneCarriageReturnEndsALineAsInSystemd) {
  EXPECT_THAT(Parse("A=1\rB=2"), ElementsAre(Pair("A", "1"), Pair("B", "2")));
}

TEST(ParseEnvFileTest, DuplicateKeyKeepsFirstPositionAndLastValue) {
  EXPECT_THAT(Parse("A=1\nB=2\nA=3\n"), ElementsAre(Pair("A", "3"), Pair("B", "2")));
}

TEST(ParseEnvFileTest, Utf8Values) {
  EXPECT_THAT(Parse("A=caf\xC3\xA9\n"), ElementsAre(Pair("A", "caf\xC3\xA9")));
}

TEST(ParseEnvFileTest, KeyNamedExportIsAnOrdinaryKey) {
  EXPECT_THAT(Parse("export=1\n"), ElementsAre(Pair("export", "1")));
}

TEST(ParseEnvFileTest, RealisticDaemonEnv) {
  constexpr std::string_view kText =
      "# Written by expanse compute install; operator lines below are kept on upgrade.\n"
      "HTTPS_PROXY=http://proxy.internal:3128\n"
      "NO_PROXY=localhost,127.0.0.1,.cluster.internal\n"
      "SSL_CERT_FILE=/etc/ssl/certs/site-ca.pem\n"
      "\n"
      "# DCGM host engine run by the site\n"
      "EXPANSE_DCGM_HOST=127.0.0.1:5555\n"
      "EXPANSE_DCGMI=/usr/bin/dcgmi\n"
      "EXPANSE_CUPTI_ENABLE=0\n";
  EXPECT_THAT(Parse(kText), ElementsAre(Pair("HTTPS_PROXY", "http://proxy.internal:3128"),
                                        Pair("NO_PROXY", "localhost,127.0.0.1,.cluster.internal"),
                                        Pair("SSL_CERT_FILE", "/etc/ssl/certs/site-ca.pem"),
                                        Pair("EXPANSE_DCGM_HOST", "127.0.0.1:5555"),
                                        Pair("EXPANSE_DCGMI", "/usr/bin/dcgmi"),
                                        Pair("EXPANSE_CUPTI_ENABLE", "0")));
}

// --- ParseEnvFile: rejected input --------------------------------------------

TEST(ParseEnvFileErrorTest, MissingEquals) {
  EXPECT_EQ(ParseError("A=1\n# c\nFOO\n"), R"(line 3: missing '=' after key "FOO")");
  EXPECT_EQ(ParseError("FOO   "), R"(line 1: missing '=' after key "FOO")");
}

TEST(ParseEnvFileErrorTest, ExportPrefix) {
  EXPECT_EQ(ParseError("export HTTPS_PROXY=http://p:3128\n"),
            "line 1: 'export' is not allowed: systemd environment files take plain KEY=VALUE "
            "lines");
}

TEST(ParseEnvFileErrorTest, InvalidKeys) {
  EXPECT_EQ(ParseError("1FOO=x\n"),
            R"(line 1: invalid key "1FOO": keys must match [A-Za-z_][A-Za-z0-9_]*)");
  EXPECT_EQ(ParseError("A=1\nFOO-BAR=x\n"),
            R"(line 2: invalid key "FOO-BAR": keys must match [A-Za-z_][A-Za-z0-9_]*)");
  EXPECT_EQ(ParseError("FOO.BAR=x\n"),
            R"(line 1: invalid key "FOO.BAR": keys must match [A-Za-z_][A-Za-z0-9_]*)");
}

TEST(ParseEnvFileErrorTest, MissingKey) {
  EXPECT_EQ(ParseError("=value\n"), "line 1: missing key before '='");
}

TEST(ParseEnvFileErrorTest, TextBetweenKeyAndEquals) {
  EXPECT_EQ(ParseError("FOO BAR=1\n"), R"(line 1: unexpected text after key "FOO"; expected '=')");
}

TEST(ParseEnvFileErrorTest, UnterminatedQuotesNameTheOpeningLine) {
  EXPECT_EQ(ParseError("A=1\nB=\"open\nC=3\n"),
            R"(line 2: unterminated double quote in value of "B")");
  EXPECT_EQ(ParseError("A='open\n"), R"(line 1: unterminated single quote in value of "A")");
  EXPECT_EQ(ParseError("A=\"ends in escape\\"),
            R"(line 1: unterminated double quote in value of "A")");
}

TEST(ParseEnvFileErrorTest, TextAfterClosingQuote) {
  const std::string expected =
      R"(line 1: unexpected text after the closing quote of "A"; a comment must be on its own line)";
  EXPECT_EQ(ParseError("A=\"x\" # note\n"), expected);
  EXPECT_EQ(ParseError("A=\"x\"y\n"), expected);
  EXPECT_EQ(ParseError("A='x'\"y\"\n"), expected);
}

TEST(ParseEnvFileErrorTest, ErrorLineCountsLinesInsideQuotedValues) {
  EXPECT_EQ(ParseError("A=\"1\n2\n3\"\nBAD\n"), R"(line 4: missing '=' after key "BAD")");
}

TEST(ParseEnvFileErrorTest, CommentEndingInBackslash) {
  const std::string expected =
      "line 2: comment ends with a backslash, which systemd before v254 reads as continuing onto "
      "the next line; remove the backslash";
  EXPECT_EQ(ParseError("A=1\n# note \\\nB=2\n"), expected);
  EXPECT_EQ(ParseError("A=1\n# note \\"), expected);
  // An escaped backslash does not escape the newline.
  EXPECT_THAT(Parse("# C:\\\\\nB=2\n"), ElementsAre(Pair("B", "2")));
}

TEST(ParseEnvFileErrorTest, BackslashAtEndOfFile) {
  EXPECT_EQ(ParseError("A=x\\"),
            R"(line 1: value of "A" ends with a backslash at the end of the file)");
  EXPECT_EQ(ParseError("A=x\\\n"),
            "line 1: value of \"A\" ends with a line continuation at the end of the file; remove "
            "the trailing backslash");
}

TEST(ParseEnvFileErrorTest, NulByteNamesItsLine) {
  EXPECT_EQ(ParseError(std::string_view("A=1\nB=x\0y\n", 10)), "line 2: NUL byte is not allowed");
}

TEST(ParseEnvFileErrorTest, InvalidUtf8Value) {
  EXPECT_EQ(ParseError("A=ok\nB=\xC3\x28\n"), R"(line 2: value of "B" is not valid UTF-8)");
}

TEST(ParseEnvFileErrorTest, HostileBytesInMessagesAreEscaped) {
  EXPECT_EQ(ParseError("\x1B[31mKEY\x01=1\n"),
            R"(line 1: invalid key "\x1B[31mKEY\x01": keys must match [A-Za-z_][A-Za-z0-9_]*)");
}

TEST(ParseEnvFileErrorTest, LongKeysAreCutInMessages) {
  const std::string key(200, 'K');
  EXPECT_EQ(ParseError(key + "\n"),
            "line 1: missing '=' after key \"" + std::string(64, 'K') + "...\"");
}

TEST(ParseEnvFileErrorTest, SizeCap) {
  std::string at_limit = "A=1\n#";
  at_limit.resize(kMaxEnvFileBytes, 'x');
  EXPECT_THAT(Parse(at_limit), ElementsAre(Pair("A", "1")));

  const std::string over_limit = at_limit + "x";
  EXPECT_EQ(ParseError(over_limit),
            "env file is 1048577 bytes; the limit is 1048576 bytes (1 MiB)");
}

// --- EnvFile -----------------------------------------------------------------

TEST(EnvFileTest, SetAppendsNewKeysAndReplacesExistingOnesInPlace) {
  EnvFile file;
  ASSERT_TRUE(file.Set("A", "1").ok());
  ASSERT_TRUE(file.Set("B", "2").ok());
  ASSERT_TRUE(file.Set("A", "3").ok());
  EXPECT_THAT(ToKeyValues(file), ElementsAre(Pair("A", "3"), Pair("B", "2")));
  EXPECT_EQ(file.size(), 2u);
  EXPECT_EQ(file.Get("A"), "3");
  EXPECT_EQ(file.Get("missing"), std::nullopt);
}

TEST(EnvFileTest, SetRejectsWhatCannotBeWritten) {
  EnvFile file;
  EXPECT_EQ(
      file.Set("BAD KEY", "x"),
      InvalidArgumentError(R"(invalid key "BAD KEY": keys must match [A-Za-z_][A-Za-z0-9_]*)"));
  EXPECT_EQ(file.Set("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file.Set("A", std::string_view("a\0b", 3)),
            InvalidArgumentError(R"(value of "A" contains a NUL byte)"));
  EXPECT_EQ(file.Set("A", "\xFF"), InvalidArgumentError(R"(value of "A" is not valid UTF-8)"));
  EXPECT_TRUE(file.empty());
}

TEST(EnvFileTest, ValidKeys) {
  EXPECT_TRUE(IsValidEnvKey("A"));
  EXPECT_TRUE(IsValidEnvKey("_"));
  EXPECT_TRUE(IsValidEnvKey("https_proxy"));
  EXPECT_TRUE(IsValidEnvKey("EXPANSE_CUPTI_ENABLE2"));
  EXPECT_FALSE(IsValidEnvKey(""));
  EXPECT_FALSE(IsValidEnvKey("2A"));
  EXPECT_FALSE(IsValidEnvKey("A-B"));
  EXPECT_FALSE(IsValidEnvKey("A B"));
  EXPECT_FALSE(IsValidEnvKey("caf\xC3\xA9"));
}

// --- RenderEnvFile -------------------------------------------------------------

TEST(RenderEnvFileTest, PlainValuesStayBare) {
  EXPECT_EQ(RenderEnvFile(MakeEnvFile({{"A", "http://proxy:3128"},
                                       {"B", "localhost,.internal"},
                                       {"C", ""},
                                       {"D", "/etc/ssl/ca.pem"}})),
            "A=http://proxy:3128\nB=localhost,.internal\nC=\nD=/etc/ssl/ca.pem\n");
}

TEST(RenderEnvFileTest, QuotesAndEscapesOtherValues) {
  EXPECT_EQ(
      RenderEnvFile(MakeEnvFile(
          {{"A", "two words"}, {"B", R"(q" b\ t` d$)"}, {"C", "# hash"}, {"D", "multi\nline"}})),
      "A=\"two words\"\nB=\"q\\\" b\\\\ t\\` d\\$\"\nC=\"# hash\"\nD=\"multi\nline\"\n");
}

TEST(RenderEnvFileTest, EmptyFileRendersEmpty) { EXPECT_EQ(RenderEnvFile(EnvFile()), ""); }

TEST(RenderEnvFileTest, RoundTripsAwkwardValues) {
  const KeyValues awkward = {
      {"SPACES", "  leading and trailing  "},
      {"QUOTES", R"(both ' and ")"},
      {"BACKSLASHES", R"(\ \\ \n \" \$)"},
      {"SHELL", "$(rm -rf /) `id` ${HOME}"},
      {"NEWLINES", "\n\r\nx\r"},
      {"TABS", "\tx\t"},
      {"COMMENTISH", "; not a comment"},
      {"UTF8", "caf\xC3\xA9 \xF0\x9F\x9A\x80"},
      {"EQUALS", "=a=b="},
      {"CONTROL", "\x01\x1B[0m"},
  };
  const Result<EnvFile> parsed = ParseEnvFile(RenderEnvFile(MakeEnvFile(awkward)));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ToKeyValues(*parsed), awkward);
}

// --- MergeEnvFile --------------------------------------------------------------

constexpr std::string_view kOperatorFile =
    "# Site settings, managed by the HPC team.\n"
    "EXPANSE_DCGM_HOST = 127.0.0.1:5555\n"
    "\n"
    "; keep CUPTI off on the A100 partition\n"
    "EXPANSE_CUPTI_ENABLE='0'\n"
    "HTTPS_PROXY=http://old-proxy:3128\n";

TEST(MergeEnvFileTest, ReplacesInPlaceAppendsNewKeysAndKeepsEverythingElse) {
  EXPECT_EQ(Merge(kOperatorFile, {{"HTTPS_PROXY", "http://proxy.internal:3128"},
                                  {"NO_PROXY", "localhost,.cluster"},
                                  {"SSL_CERT_FILE", "/etc/ssl/certs/site ca.pem"}}),
            "# Site settings, managed by the HPC team.\n"
            "EXPANSE_DCGM_HOST = 127.0.0.1:5555\n"
            "\n"
            "; keep CUPTI off on the A100 partition\n"
            "EXPANSE_CUPTI_ENABLE='0'\n"
            "HTTPS_PROXY=http://proxy.internal:3128\n"
            "NO_PROXY=localhost,.cluster\n"
            "SSL_CERT_FILE=\"/etc/ssl/certs/site ca.pem\"\n");
}

TEST(MergeEnvFileTest, SameValueLeavesTheOperatorsSpellingAlone) {
  EXPECT_EQ(Merge(kOperatorFile,
                  {{"EXPANSE_CUPTI_ENABLE", "0"}, {"EXPANSE_DCGM_HOST", "127.0.0.1:5555"}}),
            kOperatorFile);
}

TEST(MergeEnvFileTest, MergingTwiceChangesNothingMore) {
  const KeyValues updates = {{"HTTPS_PROXY", "http://p:1"}, {"NEW", "value with spaces"}};
  const std::string once = Merge(kOperatorFile, updates);
  EXPECT_EQ(Merge(once, updates), once);
}

TEST(MergeEnvFileTest, RewritesOnlyTheEffectiveDuplicate) {
  EXPECT_EQ(Merge("A=1\nB=2\nA=3\n", {{"A", "9"}}), "A=1\nB=2\nA=9\n");
}

TEST(MergeEnvFileTest, ReplacesAMultiLineValueWhole) {
  EXPECT_EQ(Merge("A=\"x\ny\"\nB=2\n", {{"A", "z"}}), "A=z\nB=2\n");
  EXPECT_EQ(Merge("A=one\\\ntwo\nB=2\n", {{"A", "z"}}), "A=z\nB=2\n");
}

TEST(MergeEnvFileTest, KeepsTheLineEndingOfARewrittenLine) {
  EXPECT_EQ(Merge("A=1\r\nB=2\r\n", {{"A", "9"}}), "A=9\r\nB=2\r\n");
  EXPECT_EQ(Merge("A=1", {{"A", "9"}}), "A=9");
}

TEST(MergeEnvFileTest, AddsANewlineBeforeAppendingToAnUnterminatedLastLine) {
  EXPECT_EQ(Merge("A=1", {{"B", "2"}}), "A=1\nB=2\n");
  EXPECT_EQ(Merge("# only a comment", {{"B", "2"}}), "# only a comment\nB=2\n");
}

TEST(MergeEnvFileTest, EmptyExistingFileGetsTheRenderedUpdates) {
  EXPECT_EQ(Merge("", {{"B", "2"}, {"A", "1"}}), "B=2\nA=1\n");
}

TEST(MergeEnvFileTest, NoUpdatesReturnsTheFileUnchanged) {
  EXPECT_EQ(Merge(kOperatorFile, {}), kOperatorFile);
}

TEST(MergeEnvFileTest, RefusesAFileItCannotParse) {
  const Result<std::string> merged =
      MergeEnvFile("A=1\nexport B=2\n", MakeEnvFile({{"HTTPS_PROXY", "http://p:1"}}));
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(merged.status().message(), ::testing::StartsWith("line 2: 'export' is not allowed"));
}

TEST(MergeEnvFileTest, RefusesToGrowPastTheSizeCap) {
  std::string existing = "A=1\n#";
  existing.resize(kMaxEnvFileBytes - 1, 'x');
  existing += '\n';
  const Result<std::string> merged = MergeEnvFile(existing, MakeEnvFile({{"B", "2"}}));
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().message(),
            "merged env file would be 1048580 bytes; the limit is 1048576 bytes (1 MiB)");
}

TEST(MergeEnvFileTest, ResultParsesToExistingEntriesWithUpdatesApplied) {
  const std::string merged =
      Merge(kOperatorFile, {{"HTTPS_PROXY", "http://new:1"}, {"EXTRA", "a \"b\""}});
  EXPECT_THAT(
      Parse(merged),
      ElementsAre(Pair("EXPANSE_DCGM_HOST", "127.0.0.1:5555"), Pair("EXPANSE_CUPTI_ENABLE", "0"),
                  Pair("HTTPS_PROXY", "http://new:1"), Pair("EXTRA", "a \"b\"")));
}

}  // namespace
}  // namespace expanse
