#include "cupti/helper_records.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

namespace expanse::cupti {
namespace {

constexpr size_t kMaxValues = 64;
constexpr size_t kMaxSeriesName = 64;
constexpr size_t kMaxText = 512;
constexpr uint32_t kMaxSamples = 1'000'000;
constexpr double kRatioSlack = 0.05;

// A series' earlier name, still sent by helpers of earlier releases (a node keeps its build when a
// newer one cannot be staged): read as the series it became. gpu.sm_throughput was renamed
// because Nsight Compute's "SM Throughput" is another measure (sm__throughput).
std::string_view CurrentSeriesName(std::string_view name) {
  return name == "gpu.sm_throughput" ? std::string_view("gpu.sm_inst_executed") : name;
}

const CounterSeries* FindSeries(CounterSet set, std::string_view name) {
  for (const CounterSeries& series : SeriesOf(set)) {
    if (series.series == name)
      return &series;
  }
  return nullptr;
}

bool IsSeriesName(std::string_view name) {
  if (name.size() <= 4 || name.size() > kMaxSeriesName || name.substr(0, 4) != "gpu.")
    return false;
  for (char c : name.substr(4)) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

bool IsPlainText(std::string_view text) {
  if (text.size() > kMaxText)
    return false;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f)
      return false;
  }
  return true;
}

Result<std::string> TextField(const nlohmann::json& doc, const char* key, bool required) {
  if (!doc.contains(key)) {
    if (required)
      return InvalidArgumentError(std::string("missing \"") + key + "\"");
    return std::string();
  }
  const auto& value = doc[key];
  if (!value.is_string() || !IsPlainText(value.get_ref<const std::string&>()))
    return InvalidArgumentError(std::string("\"") + key + "\" is not plain text");
  return value.get<std::string>();
}

Result<unsigned> DeviceField(const nlohmann::json& doc) {
  if (!doc.contains("device") || !doc["device"].is_number_unsigned())
    return InvalidArgumentError("\"device\" is not a device index");
  const auto device = doc["device"].get<uint64_t>();
  if (device >= kMaxDevices)
    return InvalidArgumentError("\"device\" is out of range");
  return static_cast<unsigned>(device);
}

Result<int64_t> TimeField(const nlohmann::json& doc) {
  if (!doc.contains("t_ms") || !doc["t_ms"].is_number_integer())
    return InvalidArgumentError("\"t_ms\" is not a whole number of milliseconds");
  const auto t = doc["t_ms"].get<int64_t>();
  if (t <= 0)
    return InvalidArgumentError("\"t_ms\" is not a time");
  return t;
}

Result<std::string> UuidField(const nlohmann::json& doc) {
  EXPANSE_ASSIGN_OR_RETURN(std::string uuid, TextField(doc, "uuid", true));
  if (!IsGpuUuid(uuid))
    return InvalidArgumentError("\"uuid\" is not a GPU UUID");
  return uuid;
}

Result<HelperRecord> ParseCounters(const nlohmann::json& doc,
                                   std::vector<std::pair<std::string, double>>* dropped) {
  CounterRecord record;
  EXPANSE_ASSIGN_OR_RETURN(record.unix_ms, TimeField(doc));
  EXPANSE_ASSIGN_OR_RETURN(record.device, DeviceField(doc));
  EXPANSE_ASSIGN_OR_RETURN(record.uuid, UuidField(doc));
  EXPANSE_ASSIGN_OR_RETURN(std::string set, TextField(doc, "set", true));
  if (set == "light")
    record.set = CounterSet::kLight;
  else if (set == "rich")
    record.set = CounterSet::kRich;
  else
    return InvalidArgumentError("\"set\" is neither light nor rich");
  if (!doc.contains("samples") || !doc["samples"].is_number_unsigned() ||
      doc["samples"].get<uint64_t>() > kMaxSamples)
    return InvalidArgumentError("\"samples\" is not a sample count");
  record.samples = doc["samples"].get<uint32_t>();
  if (!doc.contains("values") || !doc["values"].is_object())
    return InvalidArgumentError("\"values\" is not an object");
  if (doc["values"].size() > kMaxValues)
    return InvalidArgumentError("too many values");
  for (const auto& [name, value] : doc["values"].items()) {
    if (!IsSeriesName(name))
      return InvalidArgumentError("value name \"" + name.substr(0, kMaxSeriesName) +
                                  "\" is not a gpu.* series");
    // Only the set's own series: the parent stores them under the key NVML's series use
    // ({host, GPU UUID, name}), so a helper naming gpu.sm_util or gpu.ecc_uncorrected would
    // write into what the idle ledger, verdicts and the live detector read.
    const CounterSeries* series = FindSeries(record.set, CurrentSeriesName(name));
    if (series == nullptr)
      return InvalidArgumentError("value name \"" + name + "\" is not a series of the " +
                                  std::string(CounterSetName(record.set)) + " set");
    // Under its old name and its new one: the same series twice.
    if (name != series->series && doc["values"].contains(series->series))
      return InvalidArgumentError("values name " + series->series + " twice (and as " + name + ")");
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      return InvalidArgumentError("value of " + name + " is not a finite number");
    double number = value.get<double>();
    // metrics.md: the percent-of-peak series are ratios 0..1, the others rates, never negative.
    // A PM counter can read a little over its sustained peak; up to kRatioSlack over is kept,
    // as 1, so that no reader sees a ratio above 1. A value further out (a DRAM or L2 burst
    // well above the sustained peak, a negative rate) is left out: that value only, so that
    // the GPU's other series for the period are kept; the parent counts it.
    const bool ratio = series->scale != 1.0;
    if (number < 0 || (ratio && number > 1 + kRatioSlack)) {
      if (dropped != nullptr)
        dropped->emplace_back(series->series, number);
      continue;
    }
    if (ratio)
      number = std::min(number, 1.0);
    record.values.emplace_back(series->series, number);
  }
  return HelperRecord(std::move(record));
}

Result<HelperRecord> ParseStatus(const nlohmann::json& doc) {
  StatusRecord record;
  if (doc.contains("device")) {
    EXPANSE_ASSIGN_OR_RETURN(record.device, DeviceField(doc));
  }
  EXPANSE_ASSIGN_OR_RETURN(record.uuid, UuidField(doc));
  EXPANSE_ASSIGN_OR_RETURN(record.pm_sampling, TextField(doc, "pm_sampling", true));
  if (record.pm_sampling != "ok" && record.pm_sampling != "unavailable" &&
      record.pm_sampling != "yielded")
    return InvalidArgumentError("\"pm_sampling\" is not ok, unavailable or yielded");
  EXPANSE_ASSIGN_OR_RETURN(record.reason, TextField(doc, "reason", false));
  EXPANSE_ASSIGN_OR_RETURN(record.fix, TextField(doc, "fix", false));
  if (doc.contains("series")) {
    if (!doc["series"].is_array() || doc["series"].size() > kMaxValues)
      return InvalidArgumentError("\"series\" is not a list of series");
    for (const auto& name : doc["series"]) {
      if (!name.is_string() || !IsSeriesName(name.get_ref<const std::string&>()))
        return InvalidArgumentError("\"series\" names something that is not a gpu.* series");
      record.series.push_back(name.get<std::string>());
    }
  }
  return HelperRecord(std::move(record));
}

}  // namespace

bool IsGpuUuid(std::string_view text) {
  if (text.size() < 8 || text.size() > 96)
    return false;
  if (text.substr(0, 4) != "GPU-" && text.substr(0, 4) != "MIG-")
    return false;
  for (char c : text.substr(4)) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex && c != '-' && c != '/')
      return false;
  }
  return true;
}

std::string RenderRecord(const HelperRecord& record) {
  nlohmann::json doc;
  if (const auto* counters = std::get_if<CounterRecord>(&record)) {
    doc["kind"] = "counters";
    doc["t_ms"] = counters->unix_ms;
    doc["device"] = counters->device;
    doc["uuid"] = counters->uuid;
    doc["set"] = CounterSetName(counters->set);
    doc["samples"] = counters->samples;
    doc["values"] = nlohmann::json::object();
    for (const auto& [name, value] : counters->values)
      doc["values"][name] = value;
  } else if (const auto* status = std::get_if<StatusRecord>(&record)) {
    doc["kind"] = "status";
    if (status->device)
      doc["device"] = *status->device;
    doc["uuid"] = status->uuid;
    doc["pm_sampling"] = status->pm_sampling;
    if (!status->reason.empty())
      doc["reason"] = status->reason;
    if (!status->fix.empty())
      doc["fix"] = status->fix;
    if (!status->series.empty())
      doc["series"] = status->series;
  } else if (const auto* alive = std::get_if<AliveRecord>(&record)) {
    doc["kind"] = "alive";
    doc["t_ms"] = alive->unix_ms;
  } else {
    doc["kind"] = "fatal";
    doc["reason"] = std::get<FatalRecord>(record).reason;
  }
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<HelperRecord> ParseRecord(std::string_view line,
                                 std::vector<std::pair<std::string, double>>* dropped) {
  if (dropped != nullptr)
    dropped->clear();
  if (line.size() > kMaxRecordBytes)
    return InvalidArgumentError("record longer than " + std::to_string(kMaxRecordBytes) + " bytes");
  const auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object())
    return InvalidArgumentError("record is not a JSON object");
  EXPANSE_ASSIGN_OR_RETURN(std::string kind, TextField(doc, "kind", true));
  if (kind == "counters")
    return ParseCounters(doc, dropped);
  if (kind == "status")
    return ParseStatus(doc);
  if (kind == "fatal") {
    EXPANSE_ASSIGN_OR_RETURN(std::string reason, TextField(doc, "reason", true));
    return HelperRecord(FatalRecord{std::move(reason)});
  }
  if (kind == "alive") {
    EXPANSE_ASSIGN_OR_RETURN(int64_t t, TimeField(doc));
    return HelperRecord(AliveRecord{t});
  }
  return InvalidArgumentError("unknown record kind \"" + kind.substr(0, 32) + "\"");
}

std::string RenderCommand(const HelperCommand& command) {
  switch (command.kind) {
    case HelperCommand::Kind::kLight:
      return "light " + command.uuid;
    case HelperCommand::Kind::kRelease:
      return "release " + command.uuid;
    case HelperCommand::Kind::kResume:
      return "resume " + command.uuid;
    case HelperCommand::Kind::kEscalate:
      break;
  }
  return "escalate " + command.uuid + " " + std::to_string(command.window.count());
}

Result<HelperCommand> ParseCommand(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < line.size() && words.size() <= 3) {
    const size_t space = line.find(' ', pos);
    const size_t end = space == std::string_view::npos ? line.size() : space;
    if (end > pos)
      words.push_back(line.substr(pos, end - pos));
    pos = end + 1;
  }
  HelperCommand command;
  if (words.size() == 2 && words[0] == "light") {
    command.kind = HelperCommand::Kind::kLight;
  } else if (words.size() == 2 && words[0] == "release") {
    command.kind = HelperCommand::Kind::kRelease;
  } else if (words.size() == 2 && words[0] == "resume") {
    command.kind = HelperCommand::Kind::kResume;
  } else if (words.size() == 3 && words[0] == "escalate") {
    int64_t seconds = 0;
    const auto [end, ec] =
        std::from_chars(words[2].data(), words[2].data() + words[2].size(), seconds);
    if (ec != std::errc() || end != words[2].data() + words[2].size() || seconds <= 0)
      return InvalidArgumentError("escalation window is not a positive number of seconds");
    command.window = std::min(std::chrono::seconds(seconds), kMaxEscalation);
  } else {
    return InvalidArgumentError(
        "expected \"escalate <uuid> <seconds>\", or \"light\", \"release\" or \"resume\" "
        "and a GPU UUID");
  }
  if (!IsGpuUuid(words[1]))
    return InvalidArgumentError("not a GPU UUID");
  command.uuid = std::string(words[1]);
  return command;
}

}  // namespace expanse::cupti
