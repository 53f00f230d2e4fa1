#include "gpu/nvidia_smi_backend.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "core/quote.h"
#include "core/subprocess.h"
#include "gpu/nvidia_smi_minor.h"
#include "gpu/nvidia_smi_pmon.h"
#include "gpu/nvidia_smi_text.h"

namespace expanse::gpu {
namespace {

// `nvidia-smi -q -x` is ~27 KB per GPU; the csv queries are far smaller.
constexpr size_t kMaxOutputBytes = 4 << 20;

template <size_t N>
std::string JoinFields(const std::array<std::string_view, N>& fields) {
  std::string out;
  for (std::string_view field : fields) {
    if (!out.empty())
      out += ',';
    out += field;
  }
  return out;
}

// The first non-blank line of `text`: where nvidia-smi says what went wrong.
std::string_view FirstLine(std::string_view text) {
  for (const nvidia_smi_internal::Line& line : nvidia_smi_internal::SplitLines(text)) {
    if (!line.text.empty())
      return line.text;
  }
  return {};
}

// "nvidia-smi --query-gpu" for messages: the field list after '=' would drown the error.
std::string CommandName(const std::string& program, const std::vector<std::string>& args) {
  if (args.empty())
    return program;
  return program + " " + args.front().substr(0, args.front().find('='));
}

}  // namespace

NvidiaSmiBackend::NvidiaSmiBackend(NvidiaSmiOptions options) : options_(std::move(options)) {}

Result<std::string> NvidiaSmiBackend::Run(const std::vector<std::string>& args) {
  SubprocessOptions run;
  run.argv.reserve(args.size() + 1);
  run.argv.push_back(options_.program);
  run.argv.insert(run.argv.end(), args.begin(), args.end());
  run.search_path = options_.search_path;
  run.timeout = options_.timeout;
  run.max_output_bytes = kMaxOutputBytes;
  EXPANSE_ASSIGN_OR_RETURN(SubprocessResult result, RunSubprocess(run));

  const std::string command = CommandName(options_.program, args);
  if (result.timed_out) {
    return DeadlineExceededError(command + ": no answer within " +
                                 std::to_string(options_.timeout.count()) +
                                 " ms, killed (is the driver hung?)")
        .WithReason("nvidia_smi_timeout");
  }
  if (!result.Succeeded()) {
    const std::string how = result.term_signal.has_value()
                                ? "killed by signal " + std::to_string(*result.term_signal)
                                : "exited with status " + std::to_string(*result.exit_code);
    std::string_view said = FirstLine(result.stdout_text);
    if (said.empty())
      said = FirstLine(result.stderr_text);
    return UnavailableError(command + " " + how +
                            (said.empty() ? "" : ": " + QuoteForMessage(said, 200)))
        .WithReason("nvidia_smi_failed");
  }
  if (result.stdout_truncated) {
    return ResourceExhaustedError(command + ": output over " + std::to_string(kMaxOutputBytes) +
                                  " bytes")
        .WithReason("nvidia_smi_output");
  }
  return std::move(result.stdout_text);
}

Result<std::vector<GpuQueryRow>> NvidiaSmiBackend::QueryGpus() {
  EXPANSE_ASSIGN_OR_RETURN(
      const std::string text,
      Run({"--query-gpu=" + JoinFields(kGpuQueryFields), "--format=csv,noheader,nounits"}));
  EXPANSE_ASSIGN_OR_RETURN(std::vector<GpuQueryRow> rows,
                           ParseGpuQueryCsv(text, kGpuQueryFields, CsvHeader::kAbsent));
  std::lock_guard lock(mu_);
  uuid_by_index_.clear();
  for (const GpuQueryRow& row : rows)
    uuid_by_index_[row.info.index] = row.info.uuid;
  return rows;
}

void NvidiaSmiBackend::FillMinorsFromXml(Inventory& inventory) {
  // Best effort: the inventory is complete without minors, only attribution by minor suffers.
  Result<std::string> xml = Run({"-q", "-x"});
  if (!xml.ok())
    return;
  Result<std::vector<XmlGpuMinor>> minors = ParseXmlMinorNumbers(*xml);
  if (!minors.ok())
    return;
  for (GpuInfo& gpu : inventory.gpus) {
    for (const XmlGpuMinor& minor : *minors) {
      if (!gpu.minor.has_value() && minor.pci_bus_id == gpu.pci_bus_id)
        gpu.minor = minor.minor;
    }
  }
}

Result<Inventory> NvidiaSmiBackend::ReadInventory() {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<GpuQueryRow> rows, QueryGpus());
  Inventory inventory;
  inventory.backend = "nvidia-smi";
  bool minor_missing = false;
  for (GpuQueryRow& row : rows) {
    if (inventory.driver_version.empty())
      inventory.driver_version = row.driver_version;
    row.info.minor = MinorFromProcfs(options_.proc_root, row.info.pci_bus_id);
    minor_missing = minor_missing || !row.info.minor.has_value();
    inventory.gpus.push_back(std::move(row.info));
  }
  if (minor_missing && options_.minor_from_xml)
    FillMinorsFromXml(inventory);
  return inventory;
}

Result<std::vector<GpuReading>> NvidiaSmiBackend::ReadFast() {
  EXPANSE_ASSIGN_OR_RETURN(std::vector<GpuQueryRow> rows, QueryGpus());
  std::vector<GpuReading> readings;
  readings.reserve(rows.size());
  for (GpuQueryRow& row : rows)
    readings.push_back(std::move(row.reading));
  return readings;
}

Result<std::vector<GpuProcess>> NvidiaSmiBackend::ReadProcesses() {
  EXPANSE_ASSIGN_OR_RETURN(const std::string text,
                           Run({"--query-compute-apps=" + JoinFields(kComputeAppsFields),
                                "--format=csv,noheader,nounits"}));
  return ParseComputeAppsCsv(text, kComputeAppsFields, CsvHeader::kAbsent);
}

Result<std::vector<SlowReading>> NvidiaSmiBackend::ReadEnergy() {
  return FailedPreconditionError(
             "nvidia-smi cannot report GPU energy: --query-gpu has no energy field "
             "(checked on driver 580.159.04); energy needs the NVML backend")
      .WithReason("unsupported");
}

Result<std::vector<ProcessUtilization>> NvidiaSmiBackend::ReadProcessUtilization(
    uint64_t /*since_us*/) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string text, Run({"pmon", "-c", "1", "-s", "u"}));
  EXPANSE_ASSIGN_OR_RETURN(const std::vector<PmonRow> rows, ParsePmon(text));
  std::map<uint32_t, std::string> uuids;
  {
    std::lock_guard lock(mu_);
    uuids = uuid_by_index_;
  }
  bool unknown_index = false;
  for (const PmonRow& row : rows)
    unknown_index = unknown_index || !uuids.contains(row.gpu_index);
  if (unknown_index) {
    EXPANSE_RETURN_IF_ERROR(QueryGpus());
    std::lock_guard lock(mu_);
    uuids = uuid_by_index_;
  }

  std::vector<ProcessUtilization> out;
  for (const PmonRow& row : rows) {
    const auto uuid = uuids.find(row.gpu_index);
    // A GPU gone since pmon ran (hot reset) cannot be attributed; the next inventory says so.
    if (uuid == uuids.end() || (!row.sm_util.has_value() && !row.mem_util.has_value()))
      continue;
    ProcessUtilization util{.pid = row.pid,
                            .gpu_uuid = uuid->second,
                            .sm_util = row.sm_util.value_or(0),
                            .mem_util = row.mem_util.value_or(0),
                            .timestamp_us = 0};
    auto same = [&](const ProcessUtilization& u) {
      return u.pid == util.pid && u.gpu_uuid == util.gpu_uuid;
    };
    if (auto it = std::find_if(out.begin(), out.end(), same); it != out.end()) {
      *it = std::move(util);
    } else {
      out.push_back(std::move(util));
    }
  }
  return out;
}

}  // namespace expanse::gpu
