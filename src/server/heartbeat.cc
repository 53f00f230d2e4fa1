#include "server/heartbeat.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "server/route_util.h"
#include "server/validate.h"
#include "wire/field_reader.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxNodes = 10000;
constexpr size_t kMaxGpusPerNode = 64;
constexpr size_t kMaxDiagnosticsBytes = 64 * 1024;
constexpr size_t kMaxUseJobs = 16;
constexpr size_t kMaxUseProcesses = 64;
constexpr size_t kMaxOutboxCounters = 64;
constexpr size_t kMaxOutboxNameBytes = 64;
// Unknown fields (a newer daemon's, within version 1) are stored with every heartbeat, and
// every heartbeat is a history row: they are kept only while small. Sizes are of the
// member's key plus its compact JSON text.
constexpr size_t kMaxUnknownFieldBytes = 1024;
constexpr size_t kMaxRequestResults = 64;
constexpr size_t kMaxUnknownBytes = 16 * 1024;  // all unknown fields of one document

const std::set<std::string>& KnownCapabilities() {
  static const std::set<std::string> names = {"nvml", "nvidia_smi", "cupti",
                                              "dcgm", "py_stacks",  "profiling_permissions"};
  return names;
}

Status BadHeartbeatField(const std::string& path, std::string_view what) {
  return wire::BadField("heartbeat." + path, what, "invalid_heartbeat");
}

// A reader of `obj` at `path` ("" for the document, else "nodes[0]." with its trailing dot),
// so the checks below read members with wire's one reader and name them the same way.
Result<wire::FieldReader> ReaderAt(const json& obj, const std::string& path) {
  std::string at = "heartbeat";
  if (!path.empty())
    at += "." + path.substr(0, path.size() - 1);
  return wire::FieldReader::Object(obj, std::move(at), "invalid_heartbeat");
}

Status CheckString(const json& obj, const std::string& path, const char* key, size_t max,
                   bool required) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader r, ReaderAt(obj, path));
  return r.Text(key, max, required ? wire::Need::kRequired : wire::Need::kOptional).status();
}

Status CheckCount(const json& obj, const std::string& path, const char* key) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader r, ReaderAt(obj, path));
  return r.Int(key, 0, std::numeric_limits<int64_t>::max(), wire::Need::kOptional).status();
}

Status CheckBool(const json& obj, const std::string& path, const char* key) {
  EXPANSE_ASSIGN_OR_RETURN(const wire::FieldReader r, ReaderAt(obj, path));
  return r.Bool(key, false).status();
}

// nodes[].gpus[].use: the daemon's per-GPU use view (docs/formats/heartbeat.md).
Status CheckGpuUse(const json& use, const std::string& path) {
  if (!use.is_object())
    return BadHeartbeatField(path, "must be an object");
  auto state = use.find("state");
  if (state == use.end() || !state->is_string())
    return BadHeartbeatField(path + ".state", "is required");
  const std::string& st = state->get_ref<const std::string&>();
  if (st != "free" && st != "busy" && st != "allocated_idle" && st != "unallocated_in_use") {
    return BadHeartbeatField(path + ".state",
                             "must be free, busy, allocated_idle or unallocated_in_use");
  }
  if (auto jobs = use.find("jobs"); jobs != use.end()) {
    if (!jobs->is_array() || jobs->size() > kMaxUseJobs)
      return BadHeartbeatField(path + ".jobs", "must be an array of at most 16 job ids");
    for (size_t j = 0; j < jobs->size(); ++j) {
      const std::string jp = path + ".jobs[" + std::to_string(j) + "]";
      if (!(*jobs)[j].is_string())
        return BadHeartbeatField(jp, "must be a string");
      if (!ValidateText(jp, (*jobs)[j].get<std::string>(), 64).ok())
        return BadHeartbeatField(jp, "must be a job id of at most 64 bytes");
    }
  }
  if (auto procs = use.find("processes"); procs != use.end()) {
    if (!procs->is_array() || procs->size() > kMaxUseProcesses)
      return BadHeartbeatField(path + ".processes", "must be an array of at most 64 processes");
    for (size_t i = 0; i < procs->size(); ++i) {
      const json& proc = (*procs)[i];
      const std::string pp = path + ".processes[" + std::to_string(i) + "]";
      if (!proc.is_object())
        return BadHeartbeatField(pp, "must be an object");
      if (!proc.contains("pid"))
        return BadHeartbeatField(pp + ".pid", "is required");
      EXPANSE_RETURN_IF_ERROR(CheckCount(proc, pp + ".", "pid"));
      EXPANSE_RETURN_IF_ERROR(CheckCount(proc, pp + ".", "used_memory_mib"));
      EXPANSE_RETURN_IF_ERROR(CheckString(proc, pp + ".", "job_id", 64, false));
      EXPANSE_RETURN_IF_ERROR(CheckBool(proc, pp + ".", "of_allocated_job"));
      EXPANSE_RETURN_IF_ERROR(CheckBool(proc, pp + ".", "outside_cgroup"));
    }
  }
  return OkStatus();
}

Status CheckCapabilities(const json& caps, const std::string& path) {
  if (!caps.is_object())
    return BadHeartbeatField(path, "must be an object");
  for (const auto& [name, cap] : caps.items()) {
    std::string p = path + "." + name;
    if (!KnownCapabilities().count(name))
      return BadHeartbeatField(p, "is not a known capability");
    if (!cap.is_object())
      return BadHeartbeatField(p, "must be an object");
    auto state = cap.find("state");
    if (state == cap.end() || !state->is_string())
      return BadHeartbeatField(p + ".state", "is required");
    const std::string& st = state->get_ref<const std::string&>();
    if (st != "ok" && st != "degraded" && st != "absent" && st != "disabled") {
      return BadHeartbeatField(p + ".state", "must be ok, degraded, absent or disabled");
    }
    EXPANSE_RETURN_IF_ERROR(CheckString(cap, p + ".", "reason", 1024, false));
  }
  return OkStatus();
}

Status CheckNodes(const json& nodes, int* node_count, int* gpu_count) {
  if (!nodes.is_array())
    return BadHeartbeatField("nodes", "must be an array");
  if (nodes.size() > kMaxNodes)
    return BadHeartbeatField("nodes", "has more than 10000 entries");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& n = nodes[i];
    std::string p = "nodes[" + std::to_string(i) + "]";
    if (!n.is_object())
      return BadHeartbeatField(p, "must be an object");
    auto name = n.find("name");
    if (name == n.end() || !name->is_string())
      return BadHeartbeatField(p + ".name", "is required");
    if (Status s = ValidateHostname("name", name->get<std::string>()); !s.ok()) {
      return BadHeartbeatField(p + ".name", "is not a valid host name");
    }
    ++*node_count;
    auto gpus = n.find("gpus");
    if (gpus == n.end())
      continue;
    if (!gpus->is_array() || gpus->size() > kMaxGpusPerNode) {
      return BadHeartbeatField(p + ".gpus", "must be an array of at most 64 GPUs");
    }
    for (size_t g = 0; g < gpus->size(); ++g) {
      const json& gpu = (*gpus)[g];
      std::string gp = p + ".gpus[" + std::to_string(g) + "]";
      if (!gpu.is_object())
        return BadHeartbeatField(gp, "must be an object");
      EXPANSE_RETURN_IF_ERROR(CheckString(gpu, gp + ".", "uuid", 96, true));
      EXPANSE_RETURN_IF_ERROR(CheckString(gpu, gp + ".", "model", 128, false));
      EXPANSE_RETURN_IF_ERROR(CheckString(gpu, gp + ".", "driver", 64, false));
      for (const char* k : {"index", "minor", "memory_total_mib"}) {
        EXPANSE_RETURN_IF_ERROR(CheckCount(gpu, gp + ".", k));
      }
      if (auto use = gpu.find("use"); use != gpu.end())
        EXPANSE_RETURN_IF_ERROR(CheckGpuUse(*use, gp + ".use"));
      ++*gpu_count;
    }
  }
  return OkStatus();
}

// Drops the unknown members of the known objects of a validated document that are over
// kMaxUnknownFieldBytes, or over what is left of kMaxUnknownBytes (taken in key order).
class UnknownFieldTrimmer {
 public:
  void Trim(json& doc) {
    Keep(doc, {"version", "daemon_version", "controller_host", "nodes", "capabilities", "workers",
               "outbox", "diagnostics"});
    if (auto nodes = doc.find("nodes"); nodes != doc.end()) {
      for (json& node : *nodes) {
        Keep(node, {"name", "gpus"});
        if (auto gpus = node.find("gpus"); gpus != node.end()) {
          for (json& gpu : *gpus)
            TrimGpu(gpu);
        }
      }
    }
    if (auto caps = doc.find("capabilities"); caps != doc.end())
      TrimCapabilities(*caps);
    if (auto workers = doc.find("workers"); workers != doc.end()) {
      Keep(*workers, {"sampled", "expected", "reports"});
      if (auto reports = workers->find("reports"); reports != workers->end()) {
        for (json& report : *reports) {
          Keep(report, {"host", "last_sample_ms", "capabilities"});
          if (auto caps = report.find("capabilities"); caps != report.end())
            TrimCapabilities(*caps);
        }
      }
    }
  }

 private:
  void TrimGpu(json& gpu) {
    Keep(gpu, {"index", "minor", "uuid", "model", "memory_total_mib", "driver", "use"});
    auto use = gpu.find("use");
    if (use == gpu.end())
      return;
    Keep(*use, {"state", "jobs", "processes"});
    if (auto procs = use->find("processes"); procs != use->end()) {
      for (json& proc : *procs)
        Keep(proc, {"pid", "job_id", "used_memory_mib", "of_allocated_job", "outside_cgroup"});
    }
  }
  void TrimCapabilities(json& caps) {
    for (json& cap : caps)  // the values of the object
      Keep(cap, {"state", "reason"});
  }
  void Keep(json& obj, std::initializer_list<std::string_view> known) {
    if (!obj.is_object())
      return;
    for (auto it = obj.begin(); it != obj.end();) {
      if (std::find(known.begin(), known.end(), it.key()) != known.end()) {
        ++it;
        continue;
      }
      // Depth is bounded by the parse (kHeartbeatJson), so dump() cannot recurse far; the
      // text is valid UTF-8 for the same reason, and `replace` keeps dump() from throwing.
      const size_t size =
          it.key().size() + it->dump(-1, ' ', false, json::error_handler_t::replace).size();
      if (size > kMaxUnknownFieldBytes || size > unknown_left_) {
        it = obj.erase(it);
      } else {
        unknown_left_ -= size;
        ++it;
      }
    }
  }

  size_t unknown_left_ = kMaxUnknownBytes;
};

}  // namespace

Result<HeartbeatSummary> ValidateHeartbeat(std::string_view body_json) {
  EXPANSE_ASSIGN_OR_RETURN(json doc, ParseVersionOneDocument(body_json, "heartbeat",
                                                             "invalid_heartbeat", kHeartbeatJson));
  HeartbeatSummary out;
  EXPANSE_RETURN_IF_ERROR(CheckString(doc, "", "daemon_version", 64, true));
  auto host = doc.find("controller_host");
  if (host == doc.end() || !host->is_string() ||
      !ValidateHostname("controller_host", host->get<std::string>()).ok()) {
    return BadHeartbeatField("controller_host", "must be the controller's host name");
  }
  out.daemon_version = doc["daemon_version"].get<std::string>();
  out.controller_host = host->get<std::string>();
  if (auto nodes = doc.find("nodes"); nodes != doc.end()) {
    EXPANSE_RETURN_IF_ERROR(CheckNodes(*nodes, &out.nodes, &out.gpus));
  }
  if (auto caps = doc.find("capabilities"); caps != doc.end()) {
    EXPANSE_RETURN_IF_ERROR(CheckCapabilities(*caps, "capabilities"));
  }
  if (auto workers = doc.find("workers"); workers != doc.end()) {
    if (!workers->is_object())
      return BadHeartbeatField("workers", "must be an object");
    EXPANSE_RETURN_IF_ERROR(CheckCount(*workers, "workers.", "sampled"));
    EXPANSE_RETURN_IF_ERROR(CheckCount(*workers, "workers.", "expected"));
    if (auto reports = workers->find("reports"); reports != workers->end()) {
      if (!reports->is_array() || reports->size() > kMaxNodes) {
        return BadHeartbeatField("workers.reports", "must be an array of at most 10000 reports");
      }
      for (size_t i = 0; i < reports->size(); ++i) {
        const json& r = (*reports)[i];
        std::string p = "workers.reports[" + std::to_string(i) + "]";
        if (!r.is_object())
          return BadHeartbeatField(p, "must be an object");
        EXPANSE_RETURN_IF_ERROR(CheckString(r, p + ".", "host", 253, true));
        EXPANSE_RETURN_IF_ERROR(CheckCount(r, p + ".", "last_sample_ms"));
        if (auto caps = r.find("capabilities"); caps != r.end()) {
          EXPANSE_RETURN_IF_ERROR(CheckCapabilities(*caps, p + ".capabilities"));
        }
      }
    }
  }
  if (auto outbox = doc.find("outbox"); outbox != doc.end()) {
    if (!outbox->is_object())
      return BadHeartbeatField("outbox", "must be an object");
    if (outbox->size() > kMaxOutboxCounters)
      return BadHeartbeatField("outbox", "has more than 64 counters");
    for (const auto& [k, v] : outbox->items()) {
      if (k.size() > kMaxOutboxNameBytes)
        return BadHeartbeatField("outbox", "has a counter name longer than 64 bytes");
      EXPANSE_RETURN_IF_ERROR(CheckCount(*outbox, "outbox.", k.c_str()));
    }
  }
  if (auto diag = doc.find("diagnostics"); diag != doc.end()) {
    if (!diag->is_object())
      return BadHeartbeatField("diagnostics", "must be an object");
    if (diag->dump().size() > kMaxDiagnosticsBytes)
      return BadHeartbeatField("diagnostics", "exceeds 64 KiB");
  }
  if (auto results = doc.find("request_results"); results != doc.end()) {
    if (!results->is_array() || results->size() > kMaxRequestResults)
      return BadHeartbeatField("request_results", "must be an array of at most 64 results");
    for (size_t i = 0; i < results->size(); ++i) {
      const json& r = (*results)[i];
      const std::string p = "request_results[" + std::to_string(i) + "]";
      if (!r.is_object())
        return BadHeartbeatField(p, "must be an object");
      auto id = r.find("id");
      if (id == r.end() || !id->is_number_integer() || id->get<int64_t>() <= 0)
        return BadHeartbeatField(p + ".id", "must be a positive integer");
      if (auto ok = r.find("ok"); ok == r.end() || !ok->is_boolean())
        return BadHeartbeatField(p + ".ok", "must be true or false");
      EXPANSE_RETURN_IF_ERROR(CheckString(r, p + ".", "message", 512, false));
      out.request_results.push_back(
          {id->get<int64_t>(), r.value("ok", false), r.value("message", std::string())});
    }
    doc.erase("request_results");
  }
  UnknownFieldTrimmer().Trim(doc);
  out.normalized_json = doc.dump();
  return out;
}

}  // namespace expanse::server
