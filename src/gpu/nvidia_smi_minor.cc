#include "gpu/nvidia_smi_minor.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <limits>

#include "core/quote.h"
#include "gpu/nvidia_smi_text.h"

namespace expanse::gpu {
namespace {

using nvidia_smi_internal::Line;
using nvidia_smi_internal::OutputError;
using nvidia_smi_internal::ParseUint;
using nvidia_smi_internal::SplitLines;
using nvidia_smi_internal::Trim;

// The information file is a dozen short lines; anything much larger is not it.
constexpr std::streamsize kMaxInformationBytes = std::streamsize{64} * 1024;

std::optional<uint32_t> ParseUint32(std::string_view text) {
  const std::optional<uint64_t> value = ParseUint(text);
  if (!value.has_value() || *value > std::numeric_limits<uint32_t>::max())
    return std::nullopt;
  return static_cast<uint32_t>(*value);
}

bool IsBusIdChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

char ToLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

Result<uint32_t> ParseProcfsDeviceMinor(std::string_view information) {
  constexpr std::string_view kKey = "Device Minor:";
  for (const Line& line : SplitLines(information)) {
    if (!line.text.starts_with(kKey))
      continue;
    const std::string_view value = Trim(line.text.substr(kKey.size()));
    const std::optional<uint32_t> minor = ParseUint32(value);
    if (!minor.has_value()) {
      return OutputError("nvidia procfs information line " + std::to_string(line.number) +
                         ": expected a minor number after \"Device Minor:\", got " +
                         QuoteForMessage(value));
    }
    return *minor;
  }
  return OutputError("nvidia procfs information: no \"Device Minor:\" line");
}

std::vector<std::string> ProcfsBusIdCandidates(std::string_view pci_bus_id) {
  if (pci_bus_id.empty() || !std::all_of(pci_bus_id.begin(), pci_bus_id.end(), IsBusIdChar))
    return {};
  std::vector<std::string> candidates = {std::string(pci_bus_id)};
  std::string lower(pci_bus_id);
  std::transform(lower.begin(), lower.end(), lower.begin(), ToLower);
  const size_t colon = lower.find(':');
  if (colon != std::string::npos && colon > 0) {
    const std::optional<uint64_t> domain = ParseUint(std::string_view(lower).substr(0, colon), 16);
    if (domain.has_value() && *domain <= std::numeric_limits<uint32_t>::max()) {
      std::array<char, 16> text{};
      std::snprintf(text.data(), text.size(), "%04x", static_cast<unsigned>(*domain));
      lower = text.data() + lower.substr(colon);
    }
  }
  if (lower != candidates.front())
    candidates.push_back(lower);
  return candidates;
}

std::optional<uint32_t> MinorFromProcfs(std::string_view proc_root, std::string_view pci_bus_id) {
  for (const std::string& bus_id : ProcfsBusIdCandidates(pci_bus_id)) {
    std::ifstream file(std::string(proc_root) + "/driver/nvidia/gpus/" + bus_id + "/information");
    if (!file)
      continue;
    std::string information(kMaxInformationBytes, '\0');
    file.read(information.data(), kMaxInformationBytes);
    information.resize(static_cast<size_t>(file.gcount()));
    const Result<uint32_t> minor = ParseProcfsDeviceMinor(information);
    if (minor.ok())
      return *minor;
  }
  return std::nullopt;
}

Result<std::vector<XmlGpuMinor>> ParseXmlMinorNumbers(std::string_view xml) {
  constexpr std::string_view kGpuOpen = "<gpu id=\"";
  constexpr std::string_view kMinorOpen = "<minor_number>";
  constexpr std::string_view kMinorClose = "</minor_number>";
  std::vector<XmlGpuMinor> out;
  size_t at = xml.find(kGpuOpen);
  while (at != std::string_view::npos) {
    const size_t id_start = at + kGpuOpen.size();
    const size_t id_end = xml.find('"', id_start);
    if (id_end == std::string_view::npos)
      return OutputError("nvidia-smi -q -x: unterminated <gpu id=\"...\">");
    const std::string_view bus_id = xml.substr(id_start, id_end - id_start);
    at = xml.find(kGpuOpen, id_end);
    const std::string_view element = xml.substr(id_end, at - id_end);
    const size_t open = element.find(kMinorOpen);
    if (open == std::string_view::npos)
      continue;
    const size_t value_start = open + kMinorOpen.size();
    const size_t close = element.find(kMinorClose, value_start);
    if (close == std::string_view::npos)
      return OutputError("nvidia-smi -q -x: unterminated <minor_number> of GPU " +
                         QuoteForMessage(bus_id));
    const std::string_view value = Trim(element.substr(value_start, close - value_start));
    if (value == "N/A")
      continue;
    const std::optional<uint32_t> minor = ParseUint32(value);
    if (!minor.has_value()) {
      return OutputError("nvidia-smi -q -x: <minor_number> of GPU " + QuoteForMessage(bus_id) +
                         ": expected a number, got " + QuoteForMessage(value));
    }
    out.push_back({std::string(bus_id), *minor});
  }
  return out;
}

}  // namespace expanse::gpu
