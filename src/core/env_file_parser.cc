// A cursor-based reading of systemd's environment-file state machine
// (parse_env_file_internal() in systemd's src/basic/env-file.c). Where systemd
// silently ignores or reinterprets a line, this parser fails with the line number
// instead; docs/formats/env-file.md lists each such case.

#include "core/env_file_parser.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

#include "core/env_file.h"
#include "core/utf8.h"

namespace expanse::env_file_internal {
namespace {

bool IsLineBreak(char c) { return c == '\n' || c == '\r'; }  // systemd's NEWLINE
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Characters a double-quoted value must escape; systemd's SHELL_NEED_ESCAPE.
bool IsDoubleQuoteEscapable(char c) { return c == '"' || c == '\\' || c == '`' || c == '$'; }

std::string LinePrefix(int line) { return "line " + std::to_string(line) + ": "; }

Status LineError(int line, const std::string& what) {
  return InvalidArgumentError(LinePrefix(line) + what);
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::vector<Assignment>> Run() {
    std::vector<Assignment> assignments;
    while (true) {
      SkipBlanksAndLineBreaks();
      if (AtEnd()) {
        return assignments;
      }
      if (Peek() == '#' || Peek() == ';') {
        EXPANSE_RETURN_IF_ERROR(SkipComment());
        continue;
      }
      EXPANSE_ASSIGN_OR_RETURN(Assignment assignment, ParseAssignment());
      assignments.push_back(std::move(assignment));
    }
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }
  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
    }
    ++pos_;
  }

  void SkipBlanks() {
    while (!AtEnd() && IsBlank(Peek())) {
      Advance();
    }
  }
  void SkipBlanksAndLineBreaks() {
    while (!AtEnd() && (IsBlank(Peek()) || IsLineBreak(Peek()))) {
      Advance();
    }
  }

  // Consumes one "\n", "\r\n" or "\r" if the cursor is at one.
  void ConsumeLineTerminator() {
    if (!AtEnd() && Peek() == '\r') {
      Advance();
    }
    if (!AtEnd() && Peek() == '\n') {
      Advance();
    }
  }

  // A comment ending in a backslash means different things to different systemd
  // versions: before v254 it swallows the next line, from v254 on it does not. It
  // would also swallow the first line MergeEnvFile appends. So it is refused.
  Status SkipComment() {
    Advance();  // '#' or ';'
    while (!AtEnd() && !IsLineBreak(Peek())) {
      if (Peek() == '\\') {
        const int line = line_;
        Advance();
        if (AtEnd() || IsLineBreak(Peek())) {
          return LineError(line,
                           "comment ends with a backslash, which systemd before v254 reads as "
                           "continuing onto the next line; remove the backslash");
        }
      }
      Advance();
    }
    return OkStatus();
  }

  Result<Assignment> ParseAssignment() {
    Assignment assignment;
    assignment.line = line_;
    assignment.begin = pos_;
    while (!AtEnd() && Peek() != '=' && !IsBlank(Peek()) && !IsLineBreak(Peek())) {
      Advance();
    }
    const std::string_view key = text_.substr(assignment.begin, pos_ - assignment.begin);
    SkipBlanks();
    if (AtEnd() || IsLineBreak(Peek())) {
      return LineError(assignment.line, "missing '=' after key " + QuoteForMessage(key));
    }
    if (Peek() != '=') {
      if (key == "export") {
        return LineError(assignment.line,
                         "'export' is not allowed: systemd environment files take plain "
                         "KEY=VALUE lines");
      }
      return LineError(assignment.line,
                       "unexpected text after key " + QuoteForMessage(key) + "; expected '='");
    }
    if (key.empty()) {
      return LineError(assignment.line, "missing key before '='");
    }
    if (!IsValidEnvKey(key)) {
      return LineError(assignment.line, "invalid key " + QuoteForMessage(key) +
                                            ": keys must match [A-Za-z_][A-Za-z0-9_]*");
    }
    Advance();  // '='
    assignment.key = std::string(key);
    EXPANSE_RETURN_IF_ERROR(ParseValue(assignment.key, &assignment.value));
    if (!IsValidUtf8(assignment.value)) {
      // systemd refuses to load the whole file over this; name the line instead.
      return LineError(assignment.line, "value of " + QuoteForMessage(key) + " is not valid UTF-8");
    }
    assignment.line_end = pos_;
    ConsumeLineTerminator();
    assignment.end = pos_;
    return assignment;
  }

  Status ParseValue(std::string_view key, std::string* value) {
    SkipBlanks();
    if (AtEnd() || IsLineBreak(Peek())) {
      return OkStatus();  // KEY= sets the empty string
    }
    if (Peek() == '\'') {
      EXPANSE_RETURN_IF_ERROR(ParseSingleQuoted(key, value));
      return ExpectLineEndAfterQuote(key);
    }
    if (Peek() == '"') {
      EXPANSE_RETURN_IF_ERROR(ParseDoubleQuoted(key, value));
      return ExpectLineEndAfterQuote(key);
    }
    return ParseUnquoted(key, value);
  }

  // Runs to the end of the line. "\x" stands for x; a backslash before a line break
  // joins the next line. Trailing blanks are dropped unless escaped.
  Status ParseUnquoted(std::string_view key, std::string* value) {
    std::size_t kept = 0;  // value->size() without trailing unescaped blanks
    while (!AtEnd() && !IsLineBreak(Peek())) {
      const char c = Peek();
      Advance();
      if (c != '\\') {
        value->push_back(c);
        if (!IsBlank(c)) {
          kept = value->size();
        }
        continue;
      }
      // Like systemd, blanks before a backslash are part of the value.
      kept = value->size();
      const int backslash_line = line_;
      if (AtEnd()) {
        return LineError(backslash_line, "value of " + QuoteForMessage(key) +
                                             " ends with a backslash at the end of the file");
      }
      const char escaped = Peek();
      Advance();
      if (!IsLineBreak(escaped)) {
        value->push_back(escaped);
        kept = value->size();
      } else if (AtEnd()) {
        // Harmless to systemd on its own, but the first line anyone appends to the
        // file (MergeEnvFile does) would silently join this value.
        return LineError(backslash_line,
                         "value of " + QuoteForMessage(key) +
                             " ends with a line continuation at the end of the file; "
                             "remove the trailing backslash");
      }
    }
    value->resize(kept);
    return OkStatus();
  }

  // Everything up to the next ' is literal, line breaks included.
  Status ParseSingleQuoted(std::string_view key, std::string* value) {
    const int open_line = line_;
    Advance();  // opening '
    while (!AtEnd() && Peek() != '\'') {
      value->push_back(Peek());
      Advance();
    }
    if (AtEnd()) {
      return LineError(open_line, "unterminated single quote in value of " + QuoteForMessage(key));
    }
    Advance();  // closing '
    return OkStatus();
  }

  // \" \\ \` \$ stand for the character; a backslash before "\n" joins the lines;
  // any other backslash is kept, as in the shell and in systemd.
  Status ParseDoubleQuoted(std::string_view key, std::string* value) {
    const int open_line = line_;
    Advance();  // opening "
    while (!AtEnd() && Peek() != '"') {
      const char c = Peek();
      Advance();
      if (c != '\\') {
        value->push_back(c);
        continue;
      }
      if (AtEnd()) {
        break;
      }
      const char escaped = Peek();
      Advance();
      if (IsDoubleQuoteEscapable(escaped)) {
        value->push_back(escaped);
      } else if (escaped != '\n') {
        value->push_back('\\');
        value->push_back(escaped);
      }
    }
    if (AtEnd()) {
      return LineError(open_line, "unterminated double quote in value of " + QuoteForMessage(key));
    }
    Advance();  // closing "
    return OkStatus();
  }

  // systemd would glue anything after the closing quote onto the value, so
  // FOO="a" # note sets "a# note". Rejecting it keeps values what they look like.
  Status ExpectLineEndAfterQuote(std::string_view key) {
    SkipBlanks();
    if (!AtEnd() && !IsLineBreak(Peek())) {
      return LineError(line_, "unexpected text after the closing quote of " + QuoteForMessage(key) +
                                  "; a comment must be on its own line");
    }
    return OkStatus();
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int line_ = 1;  // 1-based line of text_[pos_]
};

}  // namespace

Result<std::vector<Assignment>> ParseAssignments(std::string_view text) {
  if (text.size() > kMaxEnvFileBytes) {
    return InvalidArgumentError("env file is " + std::to_string(text.size()) +
                                " bytes; the limit is " + std::to_string(kMaxEnvFileBytes) +
                                " bytes (1 MiB)");
  }
  // Checked up front: a NUL means a binary file (or worse), not a typo on one line.
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    const std::string_view before = text.substr(0, nul);
    const auto line = 1 + std::count(before.begin(), before.end(), '\n');
    return InvalidArgumentError(LinePrefix(static_cast<int>(line)) + "NUL byte is not allowed");
  }
  return Parser(text).Run();
}

}  // namespace expanse::env_file_internal
