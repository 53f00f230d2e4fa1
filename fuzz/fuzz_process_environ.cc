// libFuzzer target for what attribution takes from a process's environment and a hook's
// variables: /proc/<pid>/environ (src/attribution/process_environ.h), CUDA_VISIBLE_DEVICES
// (cuda_visible_devices.h) and SLURM_JOB_GPUS, resolved against a small node (allocation.h).
//
// Beyond "no crash, no sanitizer report" it checks, aborting when one fails:
//  1. A parsed job has a non-zero id, and its display id is the id, "<a>_<b>" or "<a>+<b>".
//  2. Every GPU set that resolves names only inventory GPUs, each once, in inventory order.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "attribution/allocation.h"
#include "attribution/process_environ.h"

namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_process_environ: property violated: %s\n", what);
    std::abort();
  }
}

const expanse::attribution::NodeGpus& Node() {
  static const expanse::attribution::NodeGpus node = [] {
    expanse::attribution::NodeGpus built;
    for (uint32_t index = 0; index < 4; ++index) {
      expanse::gpu::GpuInfo info;
      info.index = index;
      info.minor = 3 - index;
      info.uuid = "GPU-" + std::to_string(index) + "aaaaaaa-0000-0000-0000-000000000000";
      info.pci_bus_id = "00000000:0" + std::to_string(index) + ":00.0";
      built.inventory.push_back(info);
    }
    built.gres = *expanse::attribution::ParseGresConf("Name=gpu File=/dev/nvidia[0-3]\n", "n");
    built.mig_parents["MIG-aaaa"] = built.inventory[1].uuid;
    return built;
  }();
  return node;
}

void CheckGpuSet(const expanse::Result<expanse::attribution::GpuSet>& set) {
  if (!set.ok()) {
    return;
  }
  size_t next = 0;  // inventory position the next UUID may start from
  for (const std::string& uuid : set->gpu_uuids) {
    while (next < Node().inventory.size() && Node().inventory[next].uuid != uuid) {
      ++next;
    }
    Require(next < Node().inventory.size(), "GPU set out of inventory order or unknown");
    ++next;
  }
}

bool IsDisplayId(const expanse::attribution::SlurmJob& job) {
  const std::string plain = std::to_string(job.job_id);
  if (job.display_id == plain) {
    return true;
  }
  const size_t separator = job.display_id.find_first_of("_+");
  return separator != std::string::npos && separator > 0 && separator + 1 < job.display_id.size() &&
         job.display_id.find_first_not_of("0123456789", separator + 1) == std::string::npos &&
         job.display_id.find_first_not_of("0123456789") == separator;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (const bool truncated : {false, true}) {
    const expanse::Result<expanse::attribution::SlurmEnviron> parsed =
        expanse::attribution::ParseProcessEnviron(bytes, truncated);
    if (!parsed.ok()) {
      continue;
    }
    if (parsed->job) {
      Require(parsed->job->job_id != 0, "job 0");
      Require(IsDisplayId(*parsed->job), "odd display id");
    }
    if (parsed->cuda_visible_devices) {
      std::optional<std::string_view> gres;
      if (parsed->slurm_job_gpus) {
        gres = *parsed->slurm_job_gpus;
      }
      CheckGpuSet(expanse::attribution::GpusFromCudaVisibleDevices(*parsed->cuda_visible_devices,
                                                                   gres, Node()));
    }
    if (parsed->slurm_job_gpus) {
      CheckGpuSet(expanse::attribution::GpusFromJobGpus(*parsed->slurm_job_gpus, Node()));
    }
  }
  // The raw bytes as a variable's value, too: most inputs never spell SLURM_JOB_GPUS=.
  CheckGpuSet(expanse::attribution::GpusFromCudaVisibleDevices(bytes, "0,2,3", Node()));
  CheckGpuSet(expanse::attribution::GpusFromJobGpus(bytes, Node()));
  return 0;
}
