#include "slurm/slurm_conf_syntax.h"

namespace expanse::slurm::conf_syntax {
namespace {

bool IsConfAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsKeyChar(char c) { return IsConfAlnum(c) || c == '_' || c == '.'; }

// _strip_comments: everything from the first '#' preceded by an even number of backslashes.
void StripComment(std::string& line) {
  int backslashes = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' && backslashes % 2 == 0) {
      line.resize(i);
      return;
    }
    backslashes = line[i] == '\\' ? backslashes + 1 : 0;
  }
}

// _strip_continuation: an odd run of backslashes followed only by whitespace continues the line.
// Returns true and cuts the line at the last backslash of the run when it does.
bool StripContinuation(std::string& line) {
  std::size_t backslashes = 0;
  std::size_t stop = line.size();  // index one past the character that ended the scan
  while (stop > 0) {
    const char c = line[stop - 1];
    if (c == '\\') {
      ++backslashes;
    } else if (!(IsConfSpace(c) && backslashes == 0)) {
      break;
    }
    --stop;
  }
  if (backslashes % 2 == 0)
    return false;
  // SLURM's pointer ends on the character before the run; adding the run's length lands on its
  // last backslash.
  line.resize(stop + backslashes - 1);
  return true;
}

// _strip_escapes: "\x" becomes "x"; a lone trailing backslash disappears.
std::string StripEscapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && ++i == text.size())
      break;
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace

bool IsConfSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool IsBlank(std::string_view text) {
  for (const char c : text) {
    if (!IsConfSpace(c))
      return false;
  }
  return true;
}

std::vector<LogicalLine> SplitLogicalLines(std::string_view contents) {
  std::vector<LogicalLine> lines;
  std::size_t pos = 0;
  int line_number = 1;
  while (pos < contents.size()) {
    LogicalLine logical;
    logical.begin = pos;
    logical.first_line = line_number;
    std::string joined;
    while (pos < contents.size()) {
      const std::size_t newline = contents.find('\n', pos);
      const std::size_t physical_end =
          newline == std::string_view::npos ? contents.size() : newline + 1;
      std::string physical(contents.substr(pos, physical_end - pos));
      pos = physical_end;
      ++line_number;
      StripComment(physical);
      const bool continues = StripContinuation(physical);
      joined += physical;
      if (!continues)
        break;
    }
    logical.end = pos;
    logical.last_line = line_number - 1;
    logical.text = StripEscapes(joined);
    lines.push_back(std::move(logical));
  }
  return lines;
}

std::optional<KeyValue> MatchKeyValue(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && IsConfSpace(text[i]))
    ++i;
  const std::size_t key_begin = i;
  while (i < text.size() && IsKeyChar(text[i]))
    ++i;
  if (i == key_begin)
    return std::nullopt;
  KeyValue match;
  match.key = std::string(text.substr(key_begin, i - key_begin));
  while (i < text.size() && IsConfSpace(text[i]))
    ++i;
  if (i < text.size() && (text[i] == '-' || text[i] == '*' || text[i] == '+' || text[i] == '/') &&
      i + 1 < text.size() && text[i + 1] == '=') {
    ++i;
  }
  if (i == text.size() || text[i] != '=')
    return std::nullopt;
  ++i;
  while (i < text.size() && IsConfSpace(text[i]))
    ++i;
  if (i == text.size())
    return std::nullopt;
  // A quoted value needs its closing quote to be followed by whitespace or the end; when it is,
  // it is at least as long as the unquoted reading and POSIX picks it.
  if (text[i] == '"') {
    const std::size_t close = text.find('"', i + 1);
    if (close != std::string_view::npos &&
        (close + 1 == text.size() || IsConfSpace(text[close + 1]))) {
      match.value = std::string(text.substr(i + 1, close - i - 1));
      match.rest = std::string(text.substr(close + 1));
      return match;
    }
  }
  std::size_t value_end = i;
  while (value_end < text.size() && !IsConfSpace(text[value_end]))
    ++value_end;
  match.value = std::string(text.substr(i, value_end - i));
  match.rest = std::string(text.substr(value_end));
  return match;
}

std::optional<IncludeDirective> MatchInclude(std::string_view text) {
  constexpr std::string_view kWord = "include";
  if (text.size() <= kWord.size() || !IsConfSpace(text[kWord.size()]))
    return std::nullopt;
  for (std::size_t i = 0; i < kWord.size(); ++i) {
    const char c = text[i];
    const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != kWord[i])
      return std::nullopt;
  }
  std::size_t i = kWord.size();
  while (i < text.size() && IsConfSpace(text[i]))
    ++i;
  std::size_t file_end = i;
  while (file_end < text.size() && !IsConfSpace(text[file_end]))
    ++file_end;
  IncludeDirective include;
  include.file = std::string(text.substr(i, file_end - i));
  include.rest = std::string(text.substr(file_end));
  return include;
}

}  // namespace expanse::slurm::conf_syntax
