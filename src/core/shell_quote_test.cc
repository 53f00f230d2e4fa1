#include "core/shell_quote.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/subprocess.h"

namespace expanse {
namespace {

TEST(ShellQuoteTest, QuotesEverythingAsOneWord) {
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), R"('it'\''s')");
  EXPECT_EQ(ShellQuote("a'b"), "'a'\\''b'");
  EXPECT_EQ(ShellQuote("''"), R"(''\'''\''')");
  EXPECT_EQ(ShellQuote(""), "''");
}

// The real check: bash reads each quoted text back as one word holding exactly the original
// bytes, with nothing expanded or run.
TEST(ShellQuoteTest, BashReadsBackTheSameBytes) {
  const std::vector<std::string> texts = {
      "",
      "plain",
      "it's",
      "'",
      "two words",
      "$HOME ${PATH} $(echo pwned) `echo pwned` \"q\" \\ * ? [a] ~ ; | & > <",
      "line one\nline two\ttab\r",
      "\xF0\x9F\x9A\x80 \xE2\x80\xAE",
  };
  for (const std::string& text : texts) {
    SubprocessOptions options;
    // printf %s receives one argument only if the quoted text stays a single word; the
    // brackets show where it starts and ends.
    options.argv = {"/bin/bash", "-c", "printf '[%s]' " + ShellQuote(text)};
    Result<SubprocessResult> result = RunSubprocess(options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit_code, 0) << result->stderr_text;
    EXPECT_EQ(result->stdout_text, "[" + text + "]") << ShellQuote(text);
  }
}

}  // namespace
}  // namespace expanse
