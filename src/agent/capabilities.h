// What each optional collector is doing on this node, or why not: the `capabilities` section
// of the heartbeat (docs/formats/heartbeat.md) and of `expanse-daemon diagnostics`.
//
// States: ok, degraded (present but failing, with the reason), absent (not installed or not
// found, with where it was looked for), disabled (turned off by a setting, naming it).
#ifndef EXPANSE_AGENT_CAPABILITIES_H_
#define EXPANSE_AGENT_CAPABILITIES_H_

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/runtime_settings.h"
#include "gpu/sampler.h"

namespace expanse::agent {

struct Capability {
  std::string state;  // ok | degraded | absent | disabled
  std::string reason;
};

struct CapabilityInputs {
  RuntimeSettings settings;
  gpu::SamplerHealth gpu;
  std::string shared_prefix;  // "" when none
  std::string hostname;
  std::string path_env;  // PATH to search for dcgmi and py-spy
  // The result of the last profiling-permissions check ("" = fine), when agent injection is on.
  std::string profiling_permissions_problem;
  // What the node's stack collector says of itself (agent/py_stacks.h), when one runs; without
  // it, py_stacks is described from the settings and py-spy's presence alone.
  std::optional<Capability> py_stacks;
  // What the running counter helper reports (agent/counter_helper.h), when counters are
  // collected; without it, cupti is described from the settings and the helper's presence.
  std::optional<Capability> cupti;
  // What the running DCGM enrichment reports (agent/dcgm_enricher.h), when dcgmi is used;
  // without it, dcgm is described from the settings and dcgmi's presence.
  std::optional<Capability> dcgm;
};

// Keys: nvml, nvidia_smi, cupti, dcgm, py_stacks, profiling_permissions.
std::map<std::string, Capability> DescribeCapabilities(const CapabilityInputs& inputs);
nlohmann::json CapabilitiesJson(const std::map<std::string, Capability>& capabilities);

// The first executable called `name` in the colon-separated `path_env`, or "".
std::string FindOnPath(const std::string& name, const std::string& path_env);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_CAPABILITIES_H_
