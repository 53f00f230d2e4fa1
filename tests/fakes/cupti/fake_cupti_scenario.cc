// Scenario file, lock, hang and trace for the fake libcuda.so.1 and libcupti.so.13
// (see fake_cupti_scenario.h). Compiled into each library, so each has its own state.

#include "fake_cupti_scenario.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace expanse_fake_cupti {
namespace {

std::mutex g_mu;
Scenario g_scenario;  // under g_mu
timespec g_mtime{};
bool g_loaded = false;
std::chrono::steady_clock::time_point g_checked{};

Support ParseSupport(const nlohmann::json& support, const char* key) {
  const std::string value = support.value(key, std::string("supported"));
  if (value == "unsupported")
    return Support::kUnsupported;
  if (value == "disabled")
    return Support::kDisabled;
  return Support::kSupported;
}

Device ParseDevice(const nlohmann::json& d, unsigned index) {
  Device device;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-00000000-0000-0000-0000-%012u", index);
  device.uuid = d.value("uuid", std::string(uuid));
  char bus[32];
  std::snprintf(bus, sizeof bus, "0000:%02X:00.0", (0x18 + index) & 0xFF);
  device.pci_bus_id = d.value("pci_bus_id", std::string(bus));
  device.name = d.value("name", device.name);
  device.cc_major = d.value("cc_major", device.cc_major);
  device.cc_minor = d.value("cc_minor", device.cc_minor);
  device.chip = d.value("chip", device.chip);
  if (d.contains("support") && d["support"].is_object()) {
    const nlohmann::json& s = d["support"];
    device.architecture = ParseSupport(s, "architecture");
    device.vgpu = ParseSupport(s, "vgpu");
    device.confidential_compute = ParseSupport(s, "confidential_compute");
    device.cmp = ParseSupport(s, "cmp");
    device.sli = ParseSupport(s, "sli");
    device.wsl = ParseSupport(s, "wsl");
  }
  device.availability_error = d.value("availability_error", 0);
  device.enable_error = d.value("enable_error", 0);
  device.set_config_error = d.value("set_config_error", 0);
  device.reconfigure_error = d.value("reconfigure_error", 0);
  device.start_error = d.value("start_error", 0);
  device.decode_error = d.value("decode_error", 0);
  // A GPU gone from the bus (Xid 79) or reset: every PM sampling call on it fails with
  // CUPTI's catch-all, CUPTI_ERROR_UNKNOWN, unless the scenario names another code.
  if (d.value("lost", false)) {
    constexpr int kUnknown = 999;
    for (int* error : {&device.availability_error, &device.enable_error, &device.set_config_error,
                       &device.start_error, &device.decode_error}) {
      if (*error == 0)
        *error = kUnknown;
    }
  }
  device.max_metrics_per_pass = d.value("max_metrics_per_pass", device.max_metrics_per_pass);
  device.samples_per_decode = d.value("samples_per_decode", device.samples_per_decode);
  if (d.contains("metrics") && d["metrics"].is_object()) {
    for (const auto& [metric, value] : d["metrics"].items())
      device.metrics[metric] = value.get<double>();
  }
  if (d.contains("metric_passes") && d["metric_passes"].is_object()) {
    for (const auto& [metric, passes] : d["metric_passes"].items())
      device.metric_passes[metric] = std::max(1, passes.get<int>());
  }
  if (d.contains("refused_metrics") && d["refused_metrics"].is_object()) {
    for (const auto& [metric, code] : d["refused_metrics"].items())
      device.refused_metrics[metric] = code.get<int>();
  }
  device.refused_without_image = d.value("refused_without_image", false);
  device.primary_context_active = d.value("primary_context_active", true);
  device.memory_free_mib = d.value("memory_free_mib", device.memory_free_mib);
  device.memory_total_mib = d.value("memory_total_mib", device.memory_total_mib);
  return device;
}

PcSamplingScenario ParsePcSampling(const nlohmann::json& p) {
  PcSamplingScenario pc;
  pc.enable_error = p.value("enable_error", 0);
  pc.stall_reasons_error = p.value("stall_reasons_error", 0);
  pc.set_config_error = p.value("set_config_error", 0);
  pc.get_data_error = p.value("get_data_error", 0);
  pc.pcs_per_get_data = p.value("pcs_per_get_data", size_t{0});
  pc.held_for_disable = p.value("held_for_disable", size_t{0});
  pc.dropped_samples = p.value("dropped_samples", uint64_t{0});
  if (p.contains("stall_reasons") && p["stall_reasons"].is_object()) {
    for (const auto& [index, name] : p["stall_reasons"].items())
      pc.stall_reasons.emplace_back(static_cast<uint32_t>(std::stoul(index)),
                                    name.get<std::string>());
  }
  if (p.contains("pcs") && p["pcs"].is_array()) {
    for (const auto& r : p["pcs"]) {
      PcRecord record;
      record.function = r.value("function", std::string());
      record.function_index = r.value("function_index", 0u);
      record.pc_offset = r.value("pc_offset", uint64_t{0});
      record.cubin_crc = r.value("cubin_crc", uint64_t{0});
      if (r.contains("stalls") && r["stalls"].is_object()) {
        for (const auto& [index, samples] : r["stalls"].items())
          record.stalls[static_cast<uint32_t>(std::stoul(index))] = samples.get<uint32_t>();
      }
      pc.pcs.push_back(record);
    }
  }
  return pc;
}

ActivityScenario ParseActivity(const nlohmann::json& a) {
  ActivityScenario activity;
  activity.register_error = a.value("register_error", 0);
  if (a.contains("enable_errors") && a["enable_errors"].is_object()) {
    for (const auto& [kind, code] : a["enable_errors"].items())
      activity.enable_errors[std::stoi(kind)] = code.get<int>();
  }
  activity.loop_ns = a.value("loop_ms", uint64_t{100}) * 1000000;
  if (activity.loop_ns == 0)
    activity.loop_ns = 1000000;
  activity.dropped_per_flush = a.value("dropped_per_flush", uint64_t{0});
  if (a.contains("loop") && a["loop"].is_array()) {
    for (const auto& i : a["loop"]) {
      ActivityItem item;
      item.kind = i.value("kind", std::string("kernel"));
      item.name = i.value("name", std::string());
      item.detail = i.value("copy", i.value("type", std::string()));
      item.device = i.value("device", 0u);
      item.stream = i.value("stream", 7u);
      item.duration_ns = i.value("duration_us", uint64_t{0}) * 1000;
      item.bytes = i.value("bytes", uint64_t{0});
      for (int d = 0; d < 3; ++d) {
        if (i.contains("grid") && i["grid"].is_array() && i["grid"].size() == 3)
          item.grid[d] = i["grid"][d].get<int>();
        if (i.contains("block") && i["block"].is_array() && i["block"].size() == 3)
          item.block[d] = i["block"][d].get<int>();
      }
      activity.loop.push_back(item);
    }
  }
  return activity;
}

Scenario ParseDocument(const nlohmann::json& doc) {
  Scenario s;
  if (!doc.is_object())
    return s;
  s.driver_version = doc.value("driver_version", s.driver_version);
  s.cupti_version = doc.value("cupti_version", s.cupti_version);
  s.init_error = doc.value("init_error", 0);
  if (doc.contains("hang_ms") && doc["hang_ms"].is_object()) {
    for (const auto& [call, ms] : doc["hang_ms"].items())
      s.hang_ms[call] = ms.get<unsigned>();
  }
  if (doc.contains("known_metrics") && doc["known_metrics"].is_array()) {
    for (const auto& metric : doc["known_metrics"])
      s.known_metrics.push_back(metric.get<std::string>());
  }
  if (doc.contains("activity") && doc["activity"].is_object())
    s.activity = ParseActivity(doc["activity"]);
  if (doc.contains("pc_sampling") && doc["pc_sampling"].is_object())
    s.pc_sampling = ParsePcSampling(doc["pc_sampling"]);
  if (doc.contains("devices") && doc["devices"].is_array()) {
    unsigned index = 0;
    for (const auto& d : doc["devices"])
      s.devices.push_back(ParseDevice(d, index++));
  }
  return s;
}

// Reloads the scenario if its file changed; checks at most every 20 ms so a benchmark of the
// caller measures the caller, not stat(2). A missing file means the defaults (no devices).
void Refresh(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && g_loaded && now - g_checked < std::chrono::milliseconds(20))
    return;
  g_checked = now;
  g_loaded = true;
  // Processes started by slurmd do not inherit a test's environment, so the node's own
  // /etc/expanse (private per host in the test cluster) is the fallback, as for the fake NVML.
  const char* path = std::getenv("EXPANSE_FAKE_CUPTI_SCENARIO");
  if (path == nullptr)
    path = "/etc/expanse/fake-cupti.json";
  struct stat st {};
  if (stat(path, &st) != 0) {
    g_scenario = Scenario{};
    g_mtime = timespec{};
    return;
  }
  if (!force && st.st_mtim.tv_sec == g_mtime.tv_sec && st.st_mtim.tv_nsec == g_mtime.tv_nsec) {
    return;
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  g_scenario = Parse(text.str());
  g_mtime = st.st_mtim;
}

// Appends one line to $EXPANSE_FAKE_CUPTI_TRACE with a single write(2), so lines from several
// threads or processes never interleave.
void AppendTrace(const std::string& line) {
  const char* path = std::getenv("EXPANSE_FAKE_CUPTI_TRACE");
  if (path == nullptr || *path == '\0')
    return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  [[maybe_unused]] const ssize_t written = write(fd, line.data(), line.size());
  close(fd);
}

}  // namespace

Scenario Parse(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    return ParseDocument(doc);
  } catch (const std::exception&) {
    return Scenario{};  // a field of the wrong type (or a key that is not a number): as bad JSON
  }
}

bool MetricKnown(const Scenario& scenario, const std::string& chip, const std::string& metric) {
  for (const Device& device : scenario.devices) {
    if (device.chip == chip && device.metrics.count(metric) != 0)
      return true;
  }
  return std::find(scenario.known_metrics.begin(), scenario.known_metrics.end(), metric) !=
         scenario.known_metrics.end();
}

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t CuptiNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1000000000000ULL + static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL +
         static_cast<uint64_t>(ts.tv_nsec);
}

Call::Call(const char* name) : lock_(g_mu), name_(name) {
  Refresh(false);
  auto hang = g_scenario.hang_ms.find(name);
  if (hang != g_scenario.hang_ms.end() && hang->second > 0) {
    const unsigned ms = hang->second;
    lock_.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    lock_.lock();
    Refresh(false);
  }
}

Call::~Call() {
  std::string line = std::string(name_) + " dev=" + device_;
  if (!details_.empty())
    line += " " + details_;
  if (code_ != 0)
    line += " -> " + std::to_string(code_);
  AppendTrace(line + "\n");
}

void Call::ForceRefresh() { Refresh(true); }

const Scenario& Call::scenario() const { return g_scenario; }

const Device* Call::device(uint64_t index) const {
  if (index >= g_scenario.devices.size())
    return nullptr;
  return &g_scenario.devices[index];
}

void Call::SetDevice(uint64_t index) { device_ = std::to_string(index); }

void Call::AddDetail(const std::string& detail) {
  if (!details_.empty())
    details_ += " ";
  details_ += detail;
}

}  // namespace expanse_fake_cupti
