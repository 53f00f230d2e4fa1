#include "slurm/slurm_conf_syntax.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::slurm::conf_syntax {
namespace slurm_conf_syntax_test {
namespace {

std::vector<std::string> Texts(std::string_view contents) {
  std::vector<std::string> texts;
  for (const LogicalLine& line : SplitLogicalLines(contents))
    texts.push_back(line.text);
  return texts;
}

TEST(SplitLogicalLinesTest, CutsCommentsUnlessEscaped) {
  EXPECT_EQ(Texts("A=1 # note\n# whole line\nB=x\\#y\nC=x\\\\#y\n"),
            (std::vector<std::string>{"A=1 ", "", "B=x#y\n", "C=x\\"}));
}

TEST(SplitLogicalLinesTest, JoinsOddBackslashContinuations) {
  const std::vector<LogicalLine> lines =
      SplitLogicalLines("NodeName=a \\\n  CPUs=4\nB=c:\\\\\nD=e \\  \r\nF=g");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].text, "NodeName=a   CPUs=4\n");
  EXPECT_EQ(lines[0].first_line, 1);
  EXPECT_EQ(lines[0].last_line, 2);
  EXPECT_EQ(lines[0].begin, 0u);
  EXPECT_EQ(lines[0].end, 22u);
  // An even run of backslashes is two escaped backslashes, not a continuation.
  EXPECT_EQ(lines[1].text, "B=c:\\\n");
  EXPECT_EQ(lines[1].first_line, 3);
  // Whitespace (CRLF too) after the backslash still continues; the last line has no newline.
  EXPECT_EQ(lines[2].text, "D=e F=g");
  EXPECT_EQ(lines[2].first_line, 4);
  EXPECT_EQ(lines[2].last_line, 5);
  EXPECT_EQ(lines[2].end, 41u);
}

TEST(SplitLogicalLinesTest, CommentIsCutBeforeTheContinuationCheck) {
  // "\ # c" continues: the comment goes first, leaving a trailing backslash.
  EXPECT_EQ(Texts("A=1 \\ # c\nB=2\n"), (std::vector<std::string>{"A=1 B=2\n"}));
  // A backslash inside the comment does not.
  EXPECT_EQ(Texts("A=1 # c \\\nB=2\n"), (std::vector<std::string>{"A=1 ", "B=2\n"}));
}

TEST(SplitLogicalLinesTest, ContinuationOnTheLastLineEndsTheFile) {
  EXPECT_EQ(Texts("A=1\\\n"), (std::vector<std::string>{"A=1"}));
  EXPECT_TRUE(SplitLogicalLines("").empty());
}

// Expected values are glibc regexec(3)'s answers for SLURM's keyvalue_pattern.
TEST(MatchKeyValueTest, FollowsSlurmsPattern) {
  struct Case {
    std::string_view text;
    std::string_view key, value, rest;
  };
  const Case cases[] = {
      {"Prolog=\"abc\"", "Prolog", "abc", ""},
      {"Prolog=\"a b\"", "Prolog", "a b", ""},
      {"Prolog=\"abc\"def", "Prolog", "\"abc\"def", ""},
      {"Prolog=\"\"", "Prolog", "", ""},
      {"Prolog=\"a b\"x", "Prolog", "\"a", " b\"x"},
      {"Prolog= x", "Prolog", "x", ""},
      {" Prolog = /x y", "Prolog", "/x", " y"},
      {"Prolog+=/x", "Prolog", "/x", ""},
      {"a.b_c=1", "a.b_c", "1", ""},
      {"Prolog=\"a", "Prolog", "\"a", ""},
      {"Prolog=a\"b c\"", "Prolog", "a\"b", " c\""},
      {"prolog=/etc/slurm/prolog.d/*\r\n", "prolog", "/etc/slurm/prolog.d/*", "\r\n"},
  };
  for (const Case& c : cases) {
    const std::optional<KeyValue> match = MatchKeyValue(c.text);
    ASSERT_TRUE(match.has_value()) << c.text;
    EXPECT_EQ(match->key, c.key) << c.text;
    EXPECT_EQ(match->value, c.value) << c.text;
    EXPECT_EQ(match->rest, c.rest) << c.text;
  }
}

TEST(MatchKeyValueTest, RejectsWhatThePatternDoesNotMatch) {
  for (const std::string_view text : {"Prolog=", "Prolog=  \n", "=x", "Pro log=x", "Prolog + =x",
                                      "just words", "Prolog:x", "\n"}) {
    EXPECT_FALSE(MatchKeyValue(text).has_value()) << text;
  }
}

TEST(MatchIncludeTest, NeedsTheWordAtTheStartAndWhitespace) {
  const std::optional<IncludeDirective> include = MatchInclude("INCLUDE\t nodes.conf  \n");
  ASSERT_TRUE(include.has_value());
  EXPECT_EQ(include->file, "nodes.conf");
  EXPECT_EQ(include->rest, "  \n");
  EXPECT_EQ(MatchInclude("include a b\n")->rest, " b\n");
  EXPECT_EQ(MatchInclude("include \n")->file, "");
  EXPECT_FALSE(MatchInclude(" include a\n").has_value());
  EXPECT_FALSE(MatchInclude("include=a\n").has_value());
  EXPECT_FALSE(MatchInclude("includes a\n").has_value());
  EXPECT_FALSE(MatchInclude("include").has_value());
}

}  // namespace
}  // namespace slurm_conf_syntax_test
}  // namespace expanse::slurm::conf_syntax
