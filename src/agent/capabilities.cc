#include "agent/capabilities.h"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "agent/counter_helper.h"
#include "agent/dcgm_enricher.h"
#include "pystack/pyspy_source.h"
#include "release/cupti_node.h"

namespace expanse::agent {
namespace {

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// At most `bytes` of `text`, never ending inside a UTF-8 sequence (a cut one would make the
// health file's JSON invalid; reasons quote what dcgmi and the driver said).
std::string Utf8Prefix(const std::string& text, size_t bytes) {
  if (text.size() <= bytes)
    return text;
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
    --end;
  return text.substr(0, end);
}

Capability GpuCapability(const gpu::SamplerHealth& gpu, const std::string& backend) {
  if (gpu.backend != backend) {
    if (gpu.backend.empty())
      return {"absent", gpu.detail};
    return {"absent", "not used: the " + gpu.backend + " backend is active"};
  }
  if (gpu.state == "ok")
    return {"ok", std::to_string(gpu.gpus) + " GPUs"};
  return {"degraded", gpu.detail};
}

}  // namespace

std::string FindOnPath(const std::string& name, const std::string& path_env) {
  std::istringstream dirs(path_env);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty())
      continue;
    const std::string candidate = dir + "/" + name;
    if (IsExecutable(candidate))
      return candidate;
  }
  return "";
}

std::map<std::string, Capability> DescribeCapabilities(const CapabilityInputs& in) {
  std::map<std::string, Capability> out;
  out["nvml"] = GpuCapability(in.gpu, "nvml");
  out["nvidia_smi"] = GpuCapability(in.gpu, "nvidia-smi");

  const RuntimeSettings& s = in.settings;
  if (!s.cupti_enable) {
    out["cupti"] = {"disabled", "EXPANSE_CUPTI_ENABLE=0"};
  } else if (in.cupti) {
    out["cupti"] = *in.cupti;  // the running helper knows best
  } else {
    const std::string helper = FindCuptiHelper(s, in.shared_prefix, in.hostname);
    struct stat st {};
    if (!helper.empty() && helper.front() != '/') {
      out["cupti"] = {"absent",
                      "EXPANSE_CUPTI_HELPER=" + helper + " is not an absolute path; not run"};
    } else if (!helper.empty() && stat(helper.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      out["cupti"] = {"absent", "expanse-cupti-helper at " + helper + " is not a regular file"};
    } else if (helper.empty() || !IsExecutable(helper)) {
      // Why the node has no build, as its install or last Prolog found (no driver, no variant
      // for it, archives that did not verify).
      const std::string note = release::NodeCuptiNoteFor(helper);
      out["cupti"] = {"absent",
                      "expanse-cupti-helper not found" +
                          (helper.empty() ? std::string(" (no shared prefix)") : " at " + helper) +
                          (note.empty() ? "" : "; " + note)};
    } else {
      // Found, but no helper runs in this process: whether PM sampling works is for the
      // running service (its capabilities) or the helper's probe to say.
      out["cupti"] = {"degraded", "expanse-cupti-helper at " + helper +
                                      " is not running in this process; `" + helper +
                                      " probe --json` checks PM sampling"};
    }
  }

  std::string dcgmi_refused;
  const std::string dcgmi = FindDcgmi(s.dcgmi, in.path_env, &dcgmi_refused);
  if (in.dcgm) {
    out["dcgm"] = *in.dcgm;  // the running enrichment knows best
  } else if (!dcgmi_refused.empty()) {
    out["dcgm"] = {"degraded", "dcgmi refused, not run: " + dcgmi_refused};
  } else if (dcgmi.empty() || !IsExecutable(dcgmi)) {
    out["dcgm"] = {"absent", s.dcgmi.empty() ? "dcgmi not found on PATH (EXPANSE_DCGMI unset)"
                                             : "EXPANSE_DCGMI=" + s.dcgmi + " is not executable"};
  } else {
    // Found, but no enrichment runs in this process (a hook, `diagnostics`): whether the host
    // engine answers is for the running service to say.
    out["dcgm"] = {"degraded", "dcgmi at " + dcgmi + " (engine " + s.dcgm_host +
                                   ") is not running in this process; the service reports "
                                   "whether the host engine answers"};
  }

  // The same lookup the stack collector makes (EXPANSE_PYSPY, the install's bin, PATH), so the
  // report cannot disagree with what runs: a bare EXPANSE_PYSPY=py-spy is found on PATH.
  const std::string prefix_bin = in.shared_prefix.empty() ? "" : in.shared_prefix + "/bin";
  const Result<std::string> pyspy = pystack::FindPyspy(s.pyspy, prefix_bin, in.path_env.c_str());
  const bool have_pyspy = pyspy.ok() && !pyspy->empty();
  if (in.py_stacks) {
    out["py_stacks"] = *in.py_stacks;  // the running collector knows best
  } else if (!s.pystacks_enable) {
    out["py_stacks"] = {"disabled", "EXPANSE_PYSTACKS_ENABLE=0"};
  } else if (s.pystacks_backend != "py-spy") {
    out["py_stacks"] = {
        "ok", have_pyspy ? "native CPython reader, py-spy at " + *pyspy : "native CPython reader"};
  } else if (!pyspy.ok()) {
    out["py_stacks"] = {"absent", pyspy.status().message()};
  } else if (!have_pyspy) {
    out["py_stacks"] = {"absent", "py-spy not found (bundled copy or PATH; EXPANSE_PYSPY unset)"};
  } else {
    out["py_stacks"] = {"ok", "py-spy at " + *pyspy};
  }

  if (!s.profiling_agent_enable) {
    out["profiling_permissions"] = {"disabled", "EXPANSE_PROFILING_AGENT_ENABLE=0"};
  } else if (!in.profiling_permissions_problem.empty()) {
    out["profiling_permissions"] = {"degraded", in.profiling_permissions_problem};
  } else {
    out["profiling_permissions"] = {"ok", ""};
  }
  return out;
}

nlohmann::json CapabilitiesJson(const std::map<std::string, Capability>& capabilities) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, c] : capabilities) {
    nlohmann::json item = {{"state", c.state}};
    if (!c.reason.empty())
      item["reason"] = Utf8Prefix(c.reason, 1024);
    out[name] = std::move(item);
  }
  return out;
}

}  // namespace expanse::agent
