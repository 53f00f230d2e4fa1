#include "cupti/pm_reasons.h"

namespace expanse::cupti {

std::string FixFor(std::string_view reason) {
  if (reason == "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" ||
      reason == "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES")
    return "the driver keeps profiling counters for privileged processes "
           "(RmProfilingAdminOnly=1) and this process has neither CAP_PERFMON nor "
           "CAP_SYS_ADMIN: install with --cupti-mode=perfmon (Linux 5.8+, NVIDIA R565+) or "
           "--cupti-mode=sysadmin so the service unit grants it, restart the service and probe "
           "through it (a root shell has rights the service lacks)";
  if (IsCounterContention(reason))
    return "another profiler holds this GPU's counters (Nsight Compute or Systems, DCGM "
           "profiling, a job's own CUPTI profiler, or Expanse's own sampler while it runs: probe "
           "with the service stopped, or read the cupti capability it reports); the helper lets "
           "it have them and retries with backoff";
  if (reason == kReasonDriverTooOld)
    return "this node's driver serves an older CUDA than this CUPTI variant: install the "
           "variant for the node's driver (--cupti-variant) or upgrade the driver";
  if (reason == kReasonLibcudaNotFound)
    return "libcuda.so.1 is not on this node: install the NVIDIA driver, or set "
           "EXPANSE_CUPTI_ENABLE=0 on nodes without GPUs";
  if (reason == kReasonLibcuptiNotFound || reason == kReasonSymbolMissing)
    return "the CUPTI libraries beside the helper are missing or from another release: reinstall "
           "a signed CUPTI archive for this node (a CUDA toolkit alone does not install them)";
  if (reason == kReasonUnsupportedDevice || reason == "CUPTI_ERROR_NOT_SUPPORTED" ||
      reason == "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED" ||
      reason == "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED")
    return "CUPTI cannot sample this GPU's counters in its present configuration (architecture, "
           "vGPU, confidential computing or MIG); NVML metrics continue";
  if (reason == "CUDA_ERROR_NO_DEVICE")
    return "the driver lists no GPU to this process (check nvidia-smi, and that the service "
           "does not set CUDA_VISIBLE_DEVICES); NVML metrics continue where NVML sees GPUs";
  if (reason == "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" ||
      reason == "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE")
    return "the NVIDIA kernel module and libcuda.so.1 do not match or are too old for this "
           "CUPTI variant: reboot after a driver upgrade, or install the variant for this driver";
  if (reason == "CUDA_ERROR_STUB_LIBRARY")
    return "the loader found the CUDA toolkit's stub libcuda (for linking only) instead of the "
           "driver's: take the toolkit's stubs directory out of LD_LIBRARY_PATH or ld.so.conf";
  if (reason == kReasonNoMetrics)
    return "CUPTI accepts none of the Light set's metrics on this chip; NVML metrics continue";
  if (reason == kReasonNotVisible)
    return "the sampler named a GPU the CUDA driver does not list (CUDA_VISIBLE_DEVICES in the "
           "service's environment, or a MIG instance)";
  if (reason == kReasonHungCall)
    return "a CUDA or CUPTI call did not return within the deadline; the sampler restarts the "
           "helper with backoff. Check the driver's health (dmesg, nvidia-smi)";
  if (reason == kReasonAvailabilityRefused)
    return "CUPTI refused every counter when given the driver's counter availability image, and "
           "accepted them without it, so this GPU is sampled without the image (CUPTI needs it "
           "only for chips newer than the library). If its SM and tensor activity stay at zero "
           "under load, compare `expanse-cupti-helper probe --json` (metric_checks) with a CUPTI "
           "archive built for this driver";
  return "";
}

bool IsCounterContention(std::string_view reason) {
  return reason == "CUPTI_ERROR_HARDWARE_BUSY" ||
         reason == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" ||
         reason == "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED" || reason == kReasonYielded;
}

}  // namespace expanse::cupti
