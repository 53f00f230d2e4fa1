// `expanse-daemon gpus`: what the GPU backend sees on this node, and how long each call takes.
// Operators use it to check a node; scripts/gpu-check uses its JSON on a real GPU machine.
#ifndef EXPANSE_AGENT_GPU_REPORT_H_
#define EXPANSE_AGENT_GPU_REPORT_H_

#include <nlohmann/json.hpp>

#include "gpu/backend_select.h"

namespace expanse::agent {

// Selects a backend as the daemon would and reads everything once, then times each call
// `repeat` more times. The report always says which backend was chosen or why none was.
nlohmann::json GpuReport(const gpu::BackendChoice& choice, int repeat);

// The report as text for a terminal.
std::string FormatGpuReport(const nlohmann::json& report);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_GPU_REPORT_H_
