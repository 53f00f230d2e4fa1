#include "dcgm/discovery_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/quote.h"
#include "dcgm/dcgmi_errors.h"
#include "wire/field_reader.h"

namespace expanse::dcgm {
namespace {

// HelperPopulateGpuDeviceOutput in dcgmi/Query.cpp adds this to the name and bus id of a GPU
// that is not active (listed with -a only).
constexpr std::string_view kLastKnown = " (last known)";

Status Malformed(size_t line_number, std::string_view what) {
  return InvalidArgumentError("dcgmi discovery line " + std::to_string(line_number) + ": " +
                              std::string(what))
      .WithReason("dcgmi_discovery_output");
}

std::string_view TrimBlanks(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos)
    return {};
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

template <typename T>
std::optional<T> Number(std::string_view word) {
  T value = 0;
  const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (word.empty() || error != std::errc() || end != word.data() + word.size())
    return std::nullopt;
  return value;
}

// "2 GPUs found (Active)." / "1 GPU found." -> 2 / 1.
std::optional<size_t> GpuCount(std::string_view line) {
  const size_t blank = line.find(' ');
  if (blank == std::string_view::npos)
    return std::nullopt;
  const std::string_view rest = line.substr(blank);
  if (!rest.starts_with(" GPUs found") && !rest.starts_with(" GPU found"))
    return std::nullopt;
  return Number<size_t>(line.substr(0, blank));
}

bool IsGpuUuid(std::string_view text) {
  if (!text.starts_with("GPU-") || text.size() > 64)
    return false;
  for (const char c : text.substr(4)) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex && c != '-')
      return false;
  }
  return text.size() > 4;
}

std::string_view WithoutLastKnown(std::string_view text) {
  if (text.ends_with(kLastKnown))
    text.remove_suffix(kLastKnown.size());
  return text;
}

// One "Device Information" line of a GPU. Lines this build does not read ("Status: ...", the
// "Error: ..." and "Return: ..." of a GPU whose attributes failed) are left alone.
Status ReadInfo(size_t line_number, std::string_view info, DiscoveredGpu& gpu) {
  if (!wire::IsCleanText(info) || info.size() > 256)
    return Malformed(line_number, "device information is not printable text");
  if (info.starts_with("Name: ")) {
    gpu.name = std::string(WithoutLastKnown(info.substr(6)));
  } else if (info.starts_with("PCI Bus ID: ")) {
    gpu.pci_bus_id = std::string(WithoutLastKnown(info.substr(12)));
  } else if (info.starts_with("Device UUID: ")) {
    const std::string_view uuid = info.substr(13);
    if (!IsGpuUuid(uuid))
      return Malformed(line_number, "not a GPU UUID: " + QuoteForMessage(uuid));
    gpu.uuid = std::string(uuid);
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<DiscoveredGpu>> ParseDiscoveryList(std::string_view output) {
  if (output.size() > kMaxDiscoveryOutputBytes)
    return Malformed(0, "output of " + std::to_string(output.size()) + " bytes is longer than " +
                            std::to_string(kMaxDiscoveryOutputBytes));
  enum class State { kBeforeCount, kLabels, kRows, kDone } state = State::kBeforeCount;
  size_t expected = 0;
  std::vector<DiscoveredGpu> gpus;
  size_t line_number = 0;
  while (!output.empty() && state != State::kDone) {
    const size_t end = output.find('\n');
    const std::string_view line = TrimBlanks(output.substr(0, end));
    output.remove_prefix(end == std::string_view::npos ? output.size() : end + 1);
    ++line_number;
    if (line.empty())
      continue;

    if (state == State::kBeforeCount) {
      if (std::optional<size_t> count = GpuCount(line)) {
        if (*count > kMaxDiscoveredGpus)
          return Malformed(line_number,
                           "more than " + std::to_string(kMaxDiscoveredGpus) + " GPUs");
        expected = *count;
        state = State::kLabels;
      } else if (std::optional<DcgmiError> error = RecognizeDcgmiError(line)) {
        Status status = UnavailableError("dcgmi discovery: " + error->message);
        return std::move(status).WithReason(std::string(FailureReason(error->failure)));
      }
      continue;  // notes dcgmi prints before the table ("Note: Use -a flag ...")
    }
    if (line.starts_with('+'))
      continue;
    if (!line.starts_with('|') || !line.ends_with('|')) {
      // Before the labels: "Note: Use -a flag ..." (4.x, when some GPUs are not active).
      // After the rows: "0 NvSwitches found.", the GPU table is over.
      if (state == State::kRows)
        state = State::kDone;
      continue;
    }
    // "| <id> | <info> |": two cells.
    const std::string_view inner = line.substr(1, line.size() - 2);
    const size_t bar = inner.find('|');
    if (bar == std::string_view::npos || inner.find('|', bar + 1) != std::string_view::npos)
      return Malformed(line_number, "expected two columns, got " + QuoteForMessage(line));
    const std::string_view id_cell = TrimBlanks(inner.substr(0, bar));
    const std::string_view info_cell = TrimBlanks(inner.substr(bar + 1));
    if (state == State::kLabels) {
      if (id_cell != "GPU ID")
        return Malformed(line_number,
                         "expected the \"GPU ID\" column, got " + QuoteForMessage(id_cell));
      state = State::kRows;
      continue;
    }
    if (!id_cell.empty()) {
      const std::optional<uint32_t> gpu_id = Number<uint32_t>(id_cell);
      if (!gpu_id)
        return Malformed(line_number, "not a GPU ID: " + QuoteForMessage(id_cell));
      if (gpus.size() == expected)
        return Malformed(line_number,
                         "more GPUs listed than the " + std::to_string(expected) + " found");
      gpus.push_back(DiscoveredGpu{.gpu_id = *gpu_id, .name = {}, .pci_bus_id = {}, .uuid = {}});
    } else if (gpus.empty()) {
      return Malformed(line_number, "device information before any GPU ID");
    }
    EXPANSE_RETURN_IF_ERROR(ReadInfo(line_number, info_cell, gpus.back()));
  }
  if (state == State::kBeforeCount)
    return Malformed(line_number, "no \"GPUs found\" line");
  if (gpus.size() != expected)
    return Malformed(line_number, std::to_string(expected) + " GPUs found but " +
                                      std::to_string(gpus.size()) + " listed");
  // A repeated id would map two GPUs' rows onto one UUID, a repeated UUID one GPU's values onto
  // two ids: neither is a listing the host engine gives, and neither can be mapped. UUIDs are
  // hex, compared without case.
  std::set<uint32_t> ids;
  std::set<std::string> uuids;
  for (const DiscoveredGpu& gpu : gpus) {
    if (!ids.insert(gpu.gpu_id).second)
      return Malformed(line_number, "GPU ID " + std::to_string(gpu.gpu_id) + " is listed twice");
    std::string uuid = gpu.uuid;
    std::transform(uuid.begin(), uuid.end(), uuid.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!uuid.empty() && !uuids.insert(uuid).second)
      return Malformed(line_number, "GPU UUID " + QuoteForMessage(gpu.uuid) + " is listed twice");
  }
  return gpus;
}

}  // namespace expanse::dcgm
