// NvidiaSmiBackend: reads GPUs by running the nvidia-smi command, the fallback where NVML
// cannot be loaded. Each call starts one nvidia-smi process (about 30 ms and 22 MB on an H200),
// bounded by a timeout after which its process group is killed.
//
//   ReadInventory, ReadFast   --query-gpu=<kGpuQueryFields> --format=csv,noheader,nounits
//   ReadProcesses             --query-compute-apps=pid,gpu_uuid,used_memory (same format)
//   ReadProcessUtilization    pmon -c 1 -s u (takes about a second: one sampling window)
//   ReadEnergy                unsupported: --query-gpu has no energy field (driver 580)
//
// Minor numbers come from /proc/driver/nvidia/gpus/<bus id>/information, and for GPUs missing
// there from one `nvidia-smi -q -x` (see nvidia_smi_minor.h).
//
// Thread safety: calls may run concurrently (GuardedBackend's two lanes); the index-to-UUID map
// they share is guarded by a mutex.
#ifndef EXPANSE_GPU_NVIDIA_SMI_BACKEND_H_
#define EXPANSE_GPU_NVIDIA_SMI_BACKEND_H_

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/nvidia_smi_parse.h"

namespace expanse::gpu {

struct NvidiaSmiOptions {
  // A name looked up in `search_path` (unset: this process's PATH), or a path.
  std::string program = "nvidia-smi";
  std::optional<std::string> search_path;
  // Per command. A healthy query takes ~30 ms and pmon ~1 s; a driver in trouble can hang
  // nvidia-smi for minutes.
  std::chrono::milliseconds timeout{5000};
  std::string proc_root = "/proc";
  // Ask `nvidia-smi -q -x` for minor numbers procfs did not give (one slow call per inventory).
  bool minor_from_xml = true;
};

class NvidiaSmiBackend final : public Backend {
 public:
  explicit NvidiaSmiBackend(NvidiaSmiOptions options = {});

  std::string_view Name() const override { return "nvidia-smi"; }
  // Errors: kNotFound ("nvidia-smi: not found", reason "not_found") when the program is
  // missing; kDeadlineExceeded ("nvidia_smi_timeout") when it did not answer in time;
  // kUnavailable ("nvidia_smi_failed") when it failed, with its first line of output (e.g.
  // "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver");
  // kInvalidArgument ("nvidia_smi_output") when its output did not parse.
  Result<Inventory> ReadInventory() override;
  Result<std::vector<GpuReading>> ReadFast() override;
  Result<std::vector<GpuProcess>> ReadProcesses() override;
  // Always kFailedPrecondition, reason "unsupported": retrying will not help.
  Result<std::vector<SlowReading>> ReadEnergy() override;
  // pmon reports only its latest window and no sample time, so `since_us` is ignored and
  // timestamp_us is 0. The newest line per (GPU, pid) is kept; a "-" reads as 0, and a process
  // with neither sm nor mem value is left out. pmon numbers GPUs by index, mapped to UUIDs
  // through the last inventory (read again once if an index is unknown).
  Result<std::vector<ProcessUtilization>> ReadProcessUtilization(uint64_t since_us) override;

 private:
  // Runs nvidia-smi with `args`; its stdout when it exits 0.
  Result<std::string> Run(const std::vector<std::string>& args);
  // Runs and parses --query-gpu; remembers each index's UUID for pmon.
  Result<std::vector<GpuQueryRow>> QueryGpus();
  void FillMinorsFromXml(Inventory& inventory);

  NvidiaSmiOptions options_;
  std::mutex mu_;
  std::map<uint32_t, std::string> uuid_by_index_;  // from the last --query-gpu; guarded by mu_
};

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_NVIDIA_SMI_BACKEND_H_
