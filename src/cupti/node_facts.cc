#include "cupti/node_facts.h"

#include <cctype>
#include <charconv>

namespace expanse::cupti {
namespace {

// The value after "key:" on the line that starts with `key`, trimmed; nullopt when no line does.
std::optional<std::string_view> LineValue(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      std::string_view value = line.substr(key.size() + 1);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())))
        value.remove_prefix(1);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back())))
        value.remove_suffix(1);
      return value;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

bool IsVersion(std::string_view word) {
  if (word.empty() || !std::isdigit(static_cast<unsigned char>(word.front())))
    return false;
  bool dot = false;
  for (char c : word) {
    if (c == '.')
      dot = true;
    else if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  return dot;
}

}  // namespace

std::optional<uint64_t> ParseEffectiveCapabilities(std::string_view proc_status) {
  const auto value = LineValue(proc_status, "CapEff");
  if (!value || value->empty() || value->size() > 16)
    return std::nullopt;
  uint64_t mask = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), mask, 16);
  if (ec != std::errc() || end != value->data() + value->size())
    return std::nullopt;
  return mask;
}

std::optional<int> ParseRmProfilingAdminOnly(std::string_view params) {
  const auto value = LineValue(params, "RmProfilingAdminOnly");
  if (!value || (*value != "0" && *value != "1"))
    return std::nullopt;
  return *value == "1" ? 1 : 0;
}

std::string ParseNvidiaDriverVersion(std::string_view version_file) {
  const size_t nvrm = version_file.find("NVRM version:");
  if (nvrm == std::string_view::npos)
    return "";
  std::string_view line = version_file.substr(nvrm);
  line = line.substr(0, line.find('\n'));
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ..." (or "Open Kernel
  // Module for x86_64  580.95.05"): the first dotted number after "Module".
  const size_t module = line.find("Module");
  if (module == std::string_view::npos)
    return "";
  size_t pos = module;
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ')
      ++pos;
    size_t end = line.find(' ', pos);
    if (end == std::string_view::npos)
      end = line.size();
    const std::string_view word = line.substr(pos, end - pos);
    if (IsVersion(word))
      return std::string(word);
    pos = end;
  }
  return "";
}

}  // namespace expanse::cupti
