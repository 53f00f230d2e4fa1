#include "gpu/backend_select.h"

#include "gpu/nvidia_smi_backend.h"
#include "gpu/nvml_backend.h"

namespace expanse::gpu {

std::string SelectedBackend::NoBackendReason() const {
  std::string reason;
  for (const std::string& refusal : refusals) {
    if (!reason.empty())
      reason += "; ";
    reason += refusal;
  }
  return reason.empty() ? "no GPU backend configured" : reason;
}

SelectedBackend SelectBackend(const BackendChoice& choice) {
  SelectedBackend selected;
  if (choice.kind == "auto" || choice.kind == "nvml") {
    Result<std::unique_ptr<NvmlBackend>> nvml = NvmlBackend::Create(choice.nvml_library);
    if (nvml.ok()) {
      selected.backend = std::move(*nvml);
      return selected;
    }
    selected.refusals.push_back("nvml: " + nvml.status().message());
  }
  if (choice.kind == "auto" || choice.kind == "nvidia-smi") {
    NvidiaSmiOptions options;
    options.program = choice.nvidia_smi;
    auto smi = std::make_unique<NvidiaSmiBackend>(options);
    // One query proves the program exists and can talk to the driver.
    Result<Inventory> inventory = smi->ReadInventory();
    if (inventory.ok()) {
      selected.backend = std::move(smi);
      return selected;
    }
    // The backend's messages already start with the program's name.
    selected.refusals.push_back(inventory.status().message());
  }
  if (choice.kind != "auto" && choice.kind != "nvml" && choice.kind != "nvidia-smi") {
    selected.refusals.push_back("unknown GPU backend '" + choice.kind +
                                "' (expected auto, nvml or nvidia-smi)");
  }
  return selected;
}

}  // namespace expanse::gpu
