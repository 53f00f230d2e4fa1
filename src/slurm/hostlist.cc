#include "slurm/hostlist.h"

#include <charconv>
#include <cstdint>

#include "core/quote.h"

namespace expanse::slurm {
namespace {

// Longer numbers would not fit an int64 once expanded; no host is numbered like that.
constexpr size_t kMaxDigits = 18;

Status HostListError(std::string_view text, std::string_view what) {
  return InvalidArgumentError("host list " + QuoteForMessage(text) + ": " + std::string(what));
}

bool AllDigits(std::string_view text) {
  if (text.empty() || text.size() > kMaxDigits)
    return false;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
  }
  return true;
}

int64_t ToNumber(std::string_view digits) {
  int64_t value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

std::string Padded(int64_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width)
    digits.insert(0, width - digits.size(), '0');
  return digits;
}

// The strings one bracket group stands for: "1-3,7" -> 1 2 3 7.
Result<std::vector<std::string>> ExpandGroup(std::string_view list, std::string_view text,
                                             size_t max_hosts) {
  std::vector<std::string> values;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos)
      end = list.size();
    const std::string_view range = list.substr(start, end - start);
    const size_t dash = range.find('-');
    const std::string_view low = range.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : range.substr(dash + 1);
    if (!AllDigits(low) || !AllDigits(high))
      return HostListError(text, "bad range " + QuoteForMessage(range));
    const int64_t first = ToNumber(low);
    const int64_t last = ToNumber(high);
    if (first > last)
      return HostListError(text, "range " + QuoteForMessage(range) + " runs backwards");
    if (static_cast<uint64_t>(last - first) >= max_hosts - values.size())
      return HostListError(text, "more than " + std::to_string(max_hosts) + " hosts");
    for (int64_t n = first; n <= last; ++n)
      values.push_back(Padded(n, low.size()));
    start = end + 1;
  }
  return values;
}

// Appends the hosts of one item ("rack[1-2]-n[1-3]") to `hosts`.
Status ExpandItem(std::string_view item, std::string_view text, size_t max_hosts,
                  std::vector<std::string>& hosts) {
  std::vector<std::string> prefixes = {""};
  size_t pos = 0;
  while (pos < item.size()) {
    const size_t open = item.find('[', pos);
    const std::string_view literal = item.substr(pos, open - pos);
    if (literal.find(']') != std::string_view::npos)
      return HostListError(text, "']' without '['");
    for (std::string& prefix : prefixes)
      prefix += literal;
    if (open == std::string_view::npos)
      break;
    const size_t close = item.find(']', open);
    if (close == std::string_view::npos)
      return HostListError(text, "'[' without ']'");
    const std::string_view group = item.substr(open + 1, close - open - 1);
    if (group.find('[') != std::string_view::npos)
      return HostListError(text, "nested '['");
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<std::string> values,
                             ExpandGroup(group, text, max_hosts));
    if (prefixes.size() * values.size() > max_hosts - hosts.size())
      return HostListError(text, "more than " + std::to_string(max_hosts) + " hosts");
    std::vector<std::string> product;
    product.reserve(prefixes.size() * values.size());
    for (const std::string& prefix : prefixes) {
      for (const std::string& value : values)
        product.push_back(prefix + value);
    }
    prefixes = std::move(product);
    pos = close + 1;
  }
  if (prefixes.size() > max_hosts - hosts.size())
    return HostListError(text, "more than " + std::to_string(max_hosts) + " hosts");
  for (std::string& host : prefixes) {
    if (host.empty())
      return HostListError(text, "empty host name");
    hosts.push_back(std::move(host));
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostList(std::string_view text, size_t max_hosts) {
  std::vector<std::string> hosts;
  if (text.empty())
    return hosts;
  // Items are separated by commas outside brackets.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size()) {
      if (text[i] == '[')
        ++depth;
      else if (text[i] == ']')
        --depth;
      if (depth < 0 || depth > 1)
        return HostListError(text, "unbalanced brackets");
      if (text[i] != ',' || depth != 0)
        continue;
    }
    if (depth != 0)
      return HostListError(text, "'[' without ']'");
    EXPANSE_RETURN_IF_ERROR(ExpandItem(text.substr(start, i - start), text, max_hosts, hosts));
    start = i + 1;
  }
  return hosts;
}

}  // namespace expanse::slurm
