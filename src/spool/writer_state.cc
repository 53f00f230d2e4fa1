#include "spool/writer_state.h"

#include <charconv>

#include "spool/spool_names.h"

namespace expanse::spool {
namespace {

constexpr std::string_view kHeaderLine = "expanse-spool-writer 1\n";
constexpr std::string_view kBootPrefix = "boot_id ";
constexpr std::string_view kSequencePrefix = "sequence ";

// The value of line `prefix<value>\n` at the start of `text`, which it consumes.
std::optional<std::string_view> TakeLine(std::string_view& text, std::string_view prefix) {
  const size_t eol = text.find('\n');
  if (!text.starts_with(prefix) || eol == std::string_view::npos)
    return std::nullopt;
  const std::string_view value = text.substr(prefix.size(), eol - prefix.size());
  text.remove_prefix(eol + 1);
  return value;
}

}  // namespace

std::string FormatWriterState(const WriterState& state) {
  std::string out(kHeaderLine);
  out += kBootPrefix;
  out += state.boot_id;
  out += '\n';
  out += kSequencePrefix;
  out += std::to_string(state.sequence);
  out += '\n';
  return out;
}

std::optional<WriterState> ParseWriterState(std::string_view text) {
  if (!text.starts_with(kHeaderLine))
    return std::nullopt;
  text.remove_prefix(kHeaderLine.size());
  const std::optional<std::string_view> boot_id = TakeLine(text, kBootPrefix);
  const std::optional<std::string_view> sequence = TakeLine(text, kSequencePrefix);
  if (!boot_id || !sequence || !text.empty() || !IsValidBootId(*boot_id))
    return std::nullopt;
  WriterState state{std::string(*boot_id), 0};
  const char* end = sequence->data() + sequence->size();
  const auto [ptr, error] = std::from_chars(sequence->data(), end, state.sequence);
  if (error != std::errc() || ptr != end || sequence->empty())
    return std::nullopt;
  return state;
}

}  // namespace expanse::spool
