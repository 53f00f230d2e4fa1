// The scenario, lock, hang and trace shared by the fake libcuda.so.1 and libcupti.so.13
// (fake_cuda.cc, fake_cupti.cc). Each library compiles its own copy, so the two keep separate
// state, as the real driver and CUPTI do; both read the same scenario file and append to the same
// trace. README.md beside this file describes the scenario format and the trace.
//
// The libraries are built with hidden visibility: without it the two copies of these functions
// would interpose on each other when both are loaded into one process.

#ifndef EXPANSE_TESTS_FAKES_CUPTI_FAKE_CUPTI_SCENARIO_H_
#define EXPANSE_TESTS_FAKES_CUPTI_FAKE_CUPTI_SCENARIO_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace expanse_fake_cupti {

// CUpti_Profiler_Support_Level values, spelled out so this header needs no NVIDIA header.
enum class Support { kUnsupported = 1, kDisabled = 2, kSupported = 3 };

struct Device {
  std::string name = "NVIDIA H200";
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string pci_bus_id;  // "dddd:bb:dd.f"
  int cc_major = 9;
  int cc_minor = 0;
  std::string chip = "GH100";
  Support architecture = Support::kSupported;
  Support vgpu = Support::kSupported;
  Support confidential_compute = Support::kSupported;
  Support cmp = Support::kSupported;
  Support sli = Support::kSupported;
  Support wsl = Support::kSupported;
  // CUptiResult codes the named call returns for this device (0: none).
  int availability_error = 0;
  int enable_error = 0;
  int set_config_error = 0;
  int reconfigure_error = 0;  // cuptiPmSamplingSetConfig on a sampler configured before
  int start_error = 0;
  int decode_error = 0;
  // Metrics cuptiProfilerHostConfigAddMetrics refuses with the given CUPTI result on a host
  // object made with this device's counter availability image (not on one made without).
  std::map<std::string, int> refused_metrics;
  // Whether refused_metrics also apply on a host object made without an availability image (such
  // an object belongs to the first device of its chip).
  bool refused_without_image = false;
  unsigned max_metrics_per_pass = 8;
  std::map<std::string, int> metric_passes;  // passes a metric needs alone (default 1)
  unsigned samples_per_decode = 10;
  std::map<std::string, double> metrics;  // metric name -> value EvaluateToGpuValues reports
  // Whether the job's runtime has made the device's primary context (cuDevicePrimaryCtxGetState).
  bool primary_context_active = true;
  // cuMemGetInfo_v2 in the device's context.
  uint64_t memory_free_mib = 100'000;
  uint64_t memory_total_mib = 143'771;
};

// One activity of the fake job's repeating loop (the Activity API half of the fake libcupti).
struct ActivityItem {
  std::string kind;    // "kernel", "memcpy", "memset", "sync", "nvtx_range", "nvtx_mark"
  std::string name;    // kernel or NVTX name
  std::string detail;  // memcpy "htod"/"dtoh"/"dtod"/"htoh"/"ptop"; sync "device"/"stream"/"event"
  uint32_t device = 0;
  uint32_t stream = 7;
  uint64_t duration_ns = 0;
  uint64_t bytes = 0;
  int grid[3] = {1, 1, 1};
  int block[3] = {1, 1, 1};
};

struct ActivityScenario {
  int register_error = 0;            // CUptiResult of cuptiActivityRegisterCallbacks
  std::map<int, int> enable_errors;  // CUpti_ActivityKind -> CUptiResult of cuptiActivityEnable
  uint64_t loop_ns = 100000000;      // one loop iteration starts every loop_ms
  std::vector<ActivityItem> loop;    // laid back to back from each iteration's start
  uint64_t dropped_per_flush = 0;    // records each flush reports as dropped
};

// One sampled instruction of the PC sampling API's data (fake_cupti_pcsampling.cc).
struct PcRecord {
  std::string function;
  uint32_t function_index = 0;
  uint64_t pc_offset = 0;
  uint64_t cubin_crc = 0;
  std::map<uint32_t, uint32_t> stalls;  // stall reason index -> samples
};

struct PcSamplingScenario {
  // CUptiResult of each call (0: success).
  int enable_error = 0;
  int stall_reasons_error = 0;
  int set_config_error = 0;
  int get_data_error = 0;
  std::vector<std::pair<uint32_t, std::string>> stall_reasons;  // index, name
  // What one Enable..Disable of a context samples: GetData hands these out, at most
  // pcs_per_get_data at a time (0: as many as the buffer holds); the last `held_for_disable`
  // come only at Disable, into the configuration buffer, as CUPTI's leftovers do.
  std::vector<PcRecord> pcs;
  size_t pcs_per_get_data = 0;
  size_t held_for_disable = 0;
  uint64_t dropped_samples = 0;  // reported by the first GetData
};

struct Scenario {
  int driver_version = 13000;
  uint32_t cupti_version = 130001;
  int init_error = 0;  // CUresult of cuInit
  std::map<std::string, unsigned> hang_ms;
  std::vector<Device> devices;
  std::vector<std::string> known_metrics;  // valid on every chip, besides the devices' own
  ActivityScenario activity;
  PcSamplingScenario pc_sampling;
};

// Parses a scenario file's text; bad JSON or a field of the wrong type gives the defaults with
// no devices.
Scenario Parse(const std::string& text);

// True when `metric` may be configured on `chip`: some device with that chip lists it, or the
// scenario's known_metrics does.
bool MetricKnown(const Scenario& scenario, const std::string& chip, const std::string& metric);

// CLOCK_REALTIME in nanoseconds (PM sampling timestamps).
uint64_t NowNs();

// cuptiGetTimestamp's clock: CLOCK_MONOTONIC plus a fixed 10^12 ns, on purpose not Unix time,
// so a caller that forgets to convert CUPTI's timestamps is caught.
uint64_t CuptiNowNs();

// One visit to an entry point. The constructor takes the state lock (one mutex for the whole
// library), reloads the scenario if its file changed and applies any configured hang (with the
// lock released while it sleeps); the destructor appends the call's trace line. Everything a
// library keeps between calls must be touched only while a Call is alive.
class Call {
 public:
  explicit Call(const char* name);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // Reloads the scenario now, however recently it was checked (cuInit).
  void ForceRefresh();
  const Scenario& scenario() const;
  // The scenario's device `index`, or nullptr when there is none.
  const Device* device(uint64_t index) const;

  // Trace fields: the device index (else "-") and free-form details.
  void SetDevice(uint64_t index);
  void AddDetail(const std::string& detail);

  // Records the call's result for the trace and returns it.
  template <typename Code>
  Code Return(Code code) {
    code_ = static_cast<long long>(code);
    return code;
  }

 private:
  std::unique_lock<std::mutex> lock_;
  const char* name_;
  std::string device_ = "-";
  std::string details_;
  long long code_ = 0;
};

}  // namespace expanse_fake_cupti

#endif  // EXPANSE_TESTS_FAKES_CUPTI_FAKE_CUPTI_SCENARIO_H_
