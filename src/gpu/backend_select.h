// Chooses the node's GPU backend: NVML when libnvidia-ml.so.1 loads and initialises, else
// nvidia-smi when it is on PATH and answers, else none, with the reasons for each refusal so
// health can say "no GPUs" and why.
#ifndef EXPANSE_GPU_BACKEND_SELECT_H_
#define EXPANSE_GPU_BACKEND_SELECT_H_

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace expanse::gpu {

struct BackendChoice {
  std::string kind = "auto";  // "auto", "nvml", "nvidia-smi"
  std::string nvml_library;   // "" = the loader's libnvidia-ml.so.1
  std::string nvidia_smi = "nvidia-smi";
};

struct SelectedBackend {
  std::unique_ptr<Backend> backend;  // null when none could be used
  // Why each backend tried before (or instead of) the chosen one was refused, e.g.
  // "nvml: cannot load libnvidia-ml.so.1: ...". Empty when the first choice worked.
  std::vector<std::string> refusals;
  // One line for health when `backend` is null.
  std::string NoBackendReason() const;
};

SelectedBackend SelectBackend(const BackendChoice& choice);

}  // namespace expanse::gpu

#endif  // EXPANSE_GPU_BACKEND_SELECT_H_
