#include "slurm/gres.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

#include "core/quote.h"

namespace expanse::slurm {
namespace {

Status GresError(std::string_view text, std::string_view what) {
  return InvalidArgumentError("GRES " + QuoteForMessage(text) + ": " + std::string(what));
}

std::optional<int> ParseIndex(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end || value < 0 || value > kMaxGpuIndex)
    return std::nullopt;
  return value;
}

void SortUnique(std::vector<int>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

}  // namespace

Result<std::vector<int>> ParseGresIndexList(std::string_view text) {
  std::vector<int> indices;
  if (text.empty() || text == "N/A")
    return indices;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos)
      end = text.size();
    const std::string_view range = text.substr(start, end - start);
    const size_t dash = range.find('-');
    const std::optional<int> first = ParseIndex(range.substr(0, dash));
    const std::optional<int> last =
        dash == std::string_view::npos ? first : ParseIndex(range.substr(dash + 1));
    if (!first.has_value() || !last.has_value() || *first > *last) {
      return InvalidArgumentError("GPU index list " + QuoteForMessage(text) + ": bad range " +
                                  QuoteForMessage(range));
    }
    for (int index = *first; index <= *last; ++index)
      indices.push_back(index);
    start = end + 1;
  }
  SortUnique(indices);
  return indices;
}

Result<std::vector<int>> GpuIndicesFromGres(std::string_view text) {
  std::vector<int> indices;
  if (text.empty() || text == "(null)")
    return indices;
  // Items are separated by commas outside parentheses: the IDX list has commas of its own.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size()) {
      if (text[i] == '(')
        ++depth;
      else if (text[i] == ')')
        --depth;
      if (depth < 0 || depth > 1)
        return GresError(text, "unbalanced parentheses");
      if (text[i] != ',' || depth != 0)
        continue;
    }
    if (depth != 0)
      return GresError(text, "'(' without ')'");
    const std::string_view item = text.substr(start, i - start);
    start = i + 1;
    const size_t name_end = item.find_first_of(":(");
    if (item.substr(0, name_end) != "gpu")
      continue;
    const size_t open = item.find('(');
    if (open == std::string_view::npos)
      continue;  // allocated GPUs without an index list
    std::string_view detail = item.substr(open + 1);
    if (detail.empty() || detail.back() != ')')
      return GresError(text, "text after ')'");
    detail.remove_suffix(1);
    if (!detail.starts_with("IDX:"))
      return GresError(text, "expected \"(IDX:...)\"");
    EXPANSE_ASSIGN_OR_RETURN(const std::vector<int> listed, ParseGresIndexList(detail.substr(4)));
    indices.insert(indices.end(), listed.begin(), listed.end());
  }
  SortUnique(indices);
  return indices;
}

}  // namespace expanse::slurm
