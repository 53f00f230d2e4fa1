// A fake libcupti.so.13 for tests on machines without NVIDIA GPUs.
//
// It exports the CUPTI entry points expanse-cupti-helper resolves: the profiler's device checks,
// the profiler host API (metric configuration and evaluation) and PM sampling. It answers them
// from a scenario file (JSON, see README.md beside this file) named by
// $EXPANSE_FAKE_CUPTI_SCENARIO, else /etc/expanse/fake-cupti.json, re-read when its modification
// time changes, so a test can change metric values or inject faults (privileges, a busy device,
// a hung call) while the helper runs. Every call can be traced to $EXPANSE_FAKE_CUPTI_TRACE so a
// test in another process sees which calls the helper made. The real dlopen path of the helper
// thus runs in CI; the real library is exercised on a GPU machine.
//
// The prototypes come from NVIDIA's own CUPTI headers, so a definition that does not match the
// real signature fails to compile. The call order rules and the error codes follow the headers'
// documentation. The availability, config and counter data images are opaque to the caller, as
// the real ones are; this fake writes its own small formats into them (below) so that it can
// check the caller hands each image to the right call.

#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fake_cupti_scenario.h"

namespace {

using expanse_fake_cupti::Call;
using expanse_fake_cupti::Device;
using expanse_fake_cupti::MetricKnown;
using expanse_fake_cupti::NowNs;
using expanse_fake_cupti::Support;

// ---- Opaque images ---------------------------------------------------------------------------

constexpr uint32_t kAvailabilityMagic = 0x4C415658;  // "XVAL"
constexpr uint32_t kConfigMagic = 0x47464358;        // "XCFG"
constexpr uint32_t kCounterDataMagic = 0x49444358;   // "XCDI"
constexpr size_t kAvailabilitySize = 256;

size_t RoundUp8(size_t n) { return (n + 7) & ~size_t{7}; }

// Serialises the availability and config images: little records of u32s and length-prefixed
// strings, padded to a multiple of 8 bytes (the real images must be 8-byte aligned in size).
class ImageWriter {
 public:
  void U32(uint32_t value) { Append(&value, sizeof value); }
  void Str(const std::string& value) {
    U32(static_cast<uint32_t>(value.size()));
    Append(value.data(), value.size());
  }
  std::vector<uint8_t> Finish(size_t min_size) {
    bytes_.resize(std::max(RoundUp8(bytes_.size()), min_size), 0);
    return std::move(bytes_);
  }

 private:
  void Append(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  std::vector<uint8_t> bytes_;
};

// Reads what ImageWriter wrote; every read is bounds-checked against the caller's size.
class ImageReader {
 public:
  ImageReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool U32(uint32_t* value) { return Take(value, sizeof *value); }
  bool Str(std::string* value) {
    uint32_t length = 0;
    if (!U32(&length) || length > size_ - pos_)
      return false;
    value->assign(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return true;
  }

 private:
  bool Take(void* out, size_t size) {
    if (size > size_ - pos_)
      return false;
    std::memcpy(out, data_ + pos_, size);
    pos_ += size;
    return true;
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct Availability {
  uint32_t device = 0;
  std::string chip;
};

std::vector<uint8_t> AvailabilityImage(uint64_t device, const std::string& chip) {
  ImageWriter w;
  w.U32(kAvailabilityMagic);
  w.U32(static_cast<uint32_t>(device));
  w.Str(chip.substr(0, kAvailabilitySize / 2));
  return w.Finish(kAvailabilitySize);
}

std::optional<Availability> ReadAvailability(const uint8_t* image) {
  ImageReader r(image, kAvailabilitySize);
  uint32_t magic = 0;
  Availability a;
  if (!r.U32(&magic) || magic != kAvailabilityMagic || !r.U32(&a.device) || !r.Str(&a.chip))
    return std::nullopt;
  return a;
}

// The config image: which chip and device it was made for, how many metrics fit in one pass
// there, the most passes any one of its metrics needs alone, and the metric names.
struct ConfigImage {
  uint32_t device = 0;
  uint32_t max_per_pass = 1;
  uint32_t min_passes = 1;
  std::string chip;
  std::vector<std::string> metrics;

  size_t Passes() const {
    return std::max<size_t>(min_passes, (metrics.size() + max_per_pass - 1) / max_per_pass);
  }
};

std::vector<uint8_t> WriteConfig(const ConfigImage& config) {
  ImageWriter w;
  w.U32(kConfigMagic);
  w.U32(config.device);
  w.U32(config.max_per_pass);
  w.U32(config.min_passes);
  w.Str(config.chip);
  w.U32(static_cast<uint32_t>(config.metrics.size()));
  for (const std::string& metric : config.metrics)
    w.Str(metric);
  return w.Finish(0);
}

std::optional<ConfigImage> ReadConfig(const uint8_t* image, size_t size) {
  ImageReader r(image, size);
  uint32_t magic = 0, count = 0;
  ConfigImage c;
  if (!r.U32(&magic) || magic != kConfigMagic || !r.U32(&c.device) || !r.U32(&c.max_per_pass) ||
      c.max_per_pass == 0 || !r.U32(&c.min_passes) || !r.Str(&c.chip) || !r.U32(&count)) {
    return std::nullopt;
  }
  for (uint32_t i = 0; i < count; ++i) {
    std::string metric;
    if (!r.Str(&metric))
      return std::nullopt;
    c.metrics.push_back(std::move(metric));
  }
  return c;
}

// The counter data image: this header, then max_samples (start, end) timestamp pairs, then the
// metric names, NUL-separated. Read and written with memcpy: the caller's buffer need not be
// aligned.
struct CounterDataHeader {
  uint32_t magic;
  uint32_t device;
  uint32_t num_metrics;
  uint32_t max_samples;
  uint32_t count;  // samples decoded into the image so far
  uint32_t names_bytes;
  uint64_t total_size;
};
constexpr size_t kSampleBytes = 2 * sizeof(uint64_t);

std::string JoinNames(const std::vector<std::string>& metrics) {
  std::string names;
  for (const std::string& metric : metrics)
    names += metric + '\0';
  return names;
}

size_t CounterDataSize(uint32_t max_samples, size_t names_bytes) {
  return RoundUp8(sizeof(CounterDataHeader) + max_samples * kSampleBytes + names_bytes);
}

struct CounterData {
  CounterDataHeader header;
  std::vector<std::string> metrics;
};

std::optional<CounterData> ReadCounterData(const uint8_t* image, size_t size) {
  CounterData d{};
  if (image == nullptr || size < sizeof d.header)
    return std::nullopt;
  std::memcpy(&d.header, image, sizeof d.header);
  const CounterDataHeader& h = d.header;
  if (h.magic != kCounterDataMagic || h.count > h.max_samples ||
      h.total_size != CounterDataSize(h.max_samples, h.names_bytes) || h.total_size > size) {
    return std::nullopt;
  }
  const char* names =
      reinterpret_cast<const char*>(image + sizeof h + h.max_samples * kSampleBytes);
  for (size_t pos = 0; pos < h.names_bytes;) {
    const std::string metric(names + pos, strnlen(names + pos, h.names_bytes - pos));
    d.metrics.push_back(metric);
    pos += metric.size() + 1;
  }
  if (d.metrics.size() != h.num_metrics)
    return std::nullopt;
  return d;
}

void WriteHeader(uint8_t* image, const CounterDataHeader& header) {
  std::memcpy(image, &header, sizeof header);
}

void WriteSample(uint8_t* image, uint32_t index, uint64_t start, uint64_t end) {
  uint8_t* slot = image + sizeof(CounterDataHeader) + index * kSampleBytes;
  std::memcpy(slot, &start, sizeof start);
  std::memcpy(slot + sizeof start, &end, sizeof end);
}

void ReadSample(const uint8_t* image, size_t index, uint64_t* start, uint64_t* end) {
  const uint8_t* slot = image + sizeof(CounterDataHeader) + index * kSampleBytes;
  std::memcpy(start, slot, sizeof *start);
  std::memcpy(end, slot + sizeof *start, sizeof *end);
}

// ---- Library state (touched only while a Call holds the lock) --------------------------------

struct HostObject {
  uint64_t id = 0;  // traced as host=N, so tests can tell which object a call used
  std::string chip;
  uint64_t device = 0;  // the device the chip name or availability image came from
  bool with_availability = false;
  std::vector<std::string> metrics;
  // What the last cuptiProfilerHostGetSubMetrics listed: the object owns the strings, as
  // CUPTI's does, until the next listing or its Deinitialize.
  std::vector<std::string> listed;
  std::vector<const char*> listed_pointers;
};

struct Sampler {
  uint64_t device = 0;
  bool configured = false;
  std::vector<std::string> config_metrics;
  bool started = false;
  bool ever_started = false;
  uint64_t last_ns = 0;  // end of the last decoded sample (or Start)
  uint64_t stop_ns = 0;
  // Samples the "hardware" took that a full image left undecoded: the next decode continues
  // with them (ending at backlog_end_ns) before it takes any newer ones.
  uint32_t backlog = 0;
  uint64_t backlog_end_ns = 0;
  uint64_t backlog_slice_ns = 0;
};

// What a GetCounterDataSize call asked for, found again by the size it returned.
struct CounterDataRequest {
  std::vector<std::string> metrics;
  uint32_t max_samples = 0;
};

bool g_profiler_initialised = false;
std::map<const void*, std::unique_ptr<HostObject>> g_hosts;
std::map<const void*, std::unique_ptr<Sampler>> g_samplers;
std::map<size_t, CounterDataRequest> g_counter_data_requests;
std::set<std::string> g_chip_names;  // interned: cuptiDeviceGetChipName hands out pointers

std::string JoinComma(const char** names, size_t count) {
  std::string joined;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0)
      joined += ",";
    joined += names[i] == nullptr ? "(null)" : names[i];
  }
  return joined;
}

std::string JoinComma(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& name : names)
    joined += (joined.empty() ? "" : ",") + name;
  return joined;
}

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Every params struct starts with structSize; CUPTI rejects a null struct or a zero size.
template <typename Params>
bool BadParams(const Params* params) {
  return params == nullptr || params->structSize == 0;
}

// The checks of a PM sampling call on an existing object: parameters, the profiler initialised,
// and an object that is enabled (a disabled or unknown one is an invalid operation).
template <typename Params>
CUptiResult CheckSampler(Call& call, const Params* params, Sampler** sampler) {
  if (BadParams(params))
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (!g_profiler_initialised)
    return CUPTI_ERROR_NOT_INITIALIZED;
  if (params->pPmSamplingObject == nullptr)
    return CUPTI_ERROR_INVALID_PARAMETER;
  auto it = g_samplers.find(params->pPmSamplingObject);
  if (it == g_samplers.end())
    return CUPTI_ERROR_INVALID_OPERATION;
  *sampler = it->second.get();
  call.SetDevice(it->second->device);
  return CUPTI_SUCCESS;
}

template <typename Params>
HostObject* FindHost(Call& call, const Params* params) {
  auto it = g_hosts.find(params->pHostObject);
  if (it == g_hosts.end())
    return nullptr;
  call.SetDevice(it->second->device);
  return it->second.get();
}

// A device's scenario error code as a CUptiResult (0 = none).
CUptiResult Injected(int code) { return static_cast<CUptiResult>(code); }

CUpti_Profiler_Support_Level Level(Support support) {
  return static_cast<CUpti_Profiler_Support_Level>(support);
}

ConfigImage MakeConfig(const Call& call, const HostObject& host) {
  const Device* device = call.device(host.device);
  ConfigImage config;
  config.device = static_cast<uint32_t>(host.device);
  config.max_per_pass = std::max(1u, device == nullptr ? 8u : device->max_metrics_per_pass);
  config.chip = host.chip;
  config.metrics = host.metrics;
  for (const std::string& metric : config.metrics) {
    if (device == nullptr)
      break;
    if (auto it = device->metric_passes.find(metric); it != device->metric_passes.end())
      config.min_passes = std::max(config.min_passes, static_cast<uint32_t>(it->second));
  }
  return config;
}

// Appends the samples the "hardware" took since the previous decode: samples_per_decode equal
// slices of the time since then, as many as fit in the image. Samples that do not fit stay in
// the hardware buffer: the next decode (into a re-initialised image) continues with them, and
// answers END_OF_RECORDS once it has delivered the last of them.
CUpti_PmSampling_DecodeStopReason DecodeSamples(const Device& device, Sampler& sampler,
                                                uint8_t* image, CounterDataHeader& header,
                                                uint32_t* decoded) {
  *decoded = 0;
  if (sampler.backlog == 0) {
    const uint64_t end = sampler.started ? NowNs() : sampler.stop_ns;
    const uint32_t wanted = device.samples_per_decode;
    if (!sampler.ever_started || wanted == 0 || end <= sampler.last_ns)
      return CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
    sampler.backlog = wanted;
    sampler.backlog_end_ns = end;
    sampler.backlog_slice_ns = (end - sampler.last_ns) / wanted;
  }
  const uint32_t room = header.max_samples - header.count;
  const uint32_t n = std::min(sampler.backlog, room);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t start = sampler.last_ns;
    const uint64_t stop =
        (sampler.backlog == 1) ? sampler.backlog_end_ns : start + sampler.backlog_slice_ns;
    WriteSample(image, header.count + i, start, stop);
    sampler.last_ns = stop;
    --sampler.backlog;
  }
  header.count += n;
  *decoded = n;
  return sampler.backlog > 0 ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                             : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
}

struct ResultText {
  CUptiResult code;
  const char* name;
};

// cuptiGetResultString answers with the enumerator's name, as the real library does.
#define FAKE_RESULT(code) \
  ResultText { code, #code }
constexpr ResultText kResults[] = {
    FAKE_RESULT(CUPTI_SUCCESS),
    FAKE_RESULT(CUPTI_ERROR_INVALID_PARAMETER),
    FAKE_RESULT(CUPTI_ERROR_INVALID_DEVICE),
    FAKE_RESULT(CUPTI_ERROR_INVALID_CONTEXT),
    FAKE_RESULT(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID),
    FAKE_RESULT(CUPTI_ERROR_INVALID_EVENT_ID),
    FAKE_RESULT(CUPTI_ERROR_INVALID_EVENT_NAME),
    FAKE_RESULT(CUPTI_ERROR_INVALID_OPERATION),
    FAKE_RESULT(CUPTI_ERROR_OUT_OF_MEMORY),
    FAKE_RESULT(CUPTI_ERROR_HARDWARE),
    FAKE_RESULT(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT),
    FAKE_RESULT(CUPTI_ERROR_API_NOT_IMPLEMENTED),
    FAKE_RESULT(CUPTI_ERROR_MAX_LIMIT_REACHED),
    FAKE_RESULT(CUPTI_ERROR_NOT_READY),
    FAKE_RESULT(CUPTI_ERROR_NOT_COMPATIBLE),
    FAKE_RESULT(CUPTI_ERROR_NOT_INITIALIZED),
    FAKE_RESULT(CUPTI_ERROR_INVALID_METRIC_ID),
    FAKE_RESULT(CUPTI_ERROR_INVALID_METRIC_NAME),
    FAKE_RESULT(CUPTI_ERROR_QUEUE_EMPTY),
    FAKE_RESULT(CUPTI_ERROR_INVALID_HANDLE),
    FAKE_RESULT(CUPTI_ERROR_INVALID_STREAM),
    FAKE_RESULT(CUPTI_ERROR_INVALID_KIND),
    FAKE_RESULT(CUPTI_ERROR_INVALID_EVENT_VALUE),
    FAKE_RESULT(CUPTI_ERROR_DISABLED),
    FAKE_RESULT(CUPTI_ERROR_INVALID_MODULE),
    FAKE_RESULT(CUPTI_ERROR_INVALID_METRIC_VALUE),
    FAKE_RESULT(CUPTI_ERROR_HARDWARE_BUSY),
    FAKE_RESULT(CUPTI_ERROR_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE),
    FAKE_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS),
    FAKE_RESULT(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE),
    FAKE_RESULT(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES),
    FAKE_RESULT(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED),
    FAKE_RESULT(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE),
    FAKE_RESULT(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES),
    FAKE_RESULT(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED),
    FAKE_RESULT(CUPTI_ERROR_INVALID_CHIP_NAME),
    FAKE_RESULT(CUPTI_ERROR_UNKNOWN),
};
#undef FAKE_RESULT

const char* ResultName(CUptiResult result) {
  for (const ResultText& r : kResults) {
    if (r.code == result)
      return r.name;
  }
  return nullptr;
}

}  // namespace

#define FAKE_EXPORT __attribute__((visibility("default")))

extern "C" {

// ---- Results and version ---------------------------------------------------------------------

FAKE_EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  Call call("cuptiGetResultString");
  call.AddDetail("code=" + std::to_string(static_cast<int>(result)));
  const char* name = ResultName(result);
  if (str == nullptr || name == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  *str = name;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  Call call("cuptiGetVersion");
  if (version == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  *version = call.scenario().cupti_version;
  return call.Return(CUPTI_SUCCESS);
}

// ---- Profiler target: initialisation, device support, chip name ---------------------------

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params* pParams) {
  Call call("cuptiProfilerInitialize");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  g_profiler_initialised = true;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params* pParams) {
  Call call("cuptiProfilerDeInitialize");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  g_profiler_initialised = false;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params* pParams) {
  Call call("cuptiProfilerDeviceSupported");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (!g_profiler_initialised)
    return call.Return(CUPTI_ERROR_NOT_INITIALIZED);
  const Device* device =
      pParams->cuDevice < 0 ? nullptr : call.device(static_cast<uint64_t>(pParams->cuDevice));
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  call.SetDevice(static_cast<uint64_t>(pParams->cuDevice));
  pParams->architecture = Level(device->architecture);
  pParams->sli = Level(device->sli);
  pParams->vGpu = Level(device->vgpu);
  pParams->confidentialCompute = Level(device->confidential_compute);
  pParams->cmp = Level(device->cmp);
  pParams->wsl = Level(device->wsl);
  const bool all = device->architecture == Support::kSupported &&
                   device->sli == Support::kSupported && device->vgpu == Support::kSupported &&
                   device->confidential_compute == Support::kSupported &&
                   device->cmp == Support::kSupported && device->wsl == Support::kSupported;
  pParams->isSupported =
      all ? CUPTI_PROFILER_CONFIGURATION_SUPPORTED : CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED;
  call.AddDetail(all ? "supported" : "unsupported");
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params* pParams) {
  Call call("cuptiDeviceGetChipName");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const Device* device = call.device(pParams->deviceIndex);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  call.SetDevice(pParams->deviceIndex);
  pParams->pChipName = g_chip_names.insert(device->chip).first->c_str();
  call.AddDetail("chip=" + device->chip);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params* pParams) {
  Call call("cuptiPmSamplingGetCounterAvailability");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (!g_profiler_initialised)
    return call.Return(CUPTI_ERROR_NOT_INITIALIZED);
  const Device* device = call.device(pParams->deviceIndex);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  call.SetDevice(pParams->deviceIndex);
  if (device->availability_error != 0)
    return call.Return(Injected(device->availability_error));
  if (pParams->pCounterAvailabilityImage == nullptr) {
    pParams->counterAvailabilityImageSize = kAvailabilitySize;
    return call.Return(CUPTI_SUCCESS);
  }
  if (pParams->counterAvailabilityImageSize < kAvailabilitySize)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::vector<uint8_t> image = AvailabilityImage(pParams->deviceIndex, device->chip);
  std::memcpy(pParams->pCounterAvailabilityImage, image.data(), image.size());
  pParams->counterAvailabilityImageSize = image.size();
  return call.Return(CUPTI_SUCCESS);
}

// ---- Profiler host: metric configuration and evaluation -------------------------------------

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params* pParams) {
  Call call("cuptiProfilerHostInitialize");
  if (BadParams(pParams) || pParams->pChipName == nullptr ||
      (pParams->profilerType != CUPTI_PROFILER_TYPE_PM_SAMPLING &&
       pParams->profilerType != CUPTI_PROFILER_TYPE_RANGE_PROFILER)) {
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  }
  // As the real library does: the host side lives in libnvperf_host.so, opened by bare name,
  // so the loader's search picks the copy; without one every host call is NOT_INITIALIZED.
  void* perf = dlopen("libnvperf_host.so", RTLD_NOW | RTLD_LOCAL);
  if (perf == nullptr)
    return call.Return(CUPTI_ERROR_NOT_INITIALIZED);
  const link_map* perf_map = nullptr;
  if (dlinfo(perf, RTLD_DI_LINKMAP, &perf_map) == 0 && perf_map != nullptr)
    call.AddDetail(std::string("nvperf=") + perf_map->l_name);
  dlclose(perf);
  const std::string chip = pParams->pChipName;
  call.AddDetail("chip=" + chip);
  const auto& devices = call.scenario().devices;
  auto host = std::make_unique<HostObject>();
  static uint64_t next_id = 0;
  host->id = ++next_id;
  host->chip = chip;
  if (pParams->pCounterAvailabilityImage != nullptr) {
    const std::optional<Availability> a = ReadAvailability(pParams->pCounterAvailabilityImage);
    if (!a || a->chip != chip || a->device >= devices.size() || devices[a->device].chip != chip)
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
    host->device = a->device;
    host->with_availability = true;
  } else {
    auto it = std::find_if(devices.begin(), devices.end(),
                           [&](const Device& d) { return d.chip == chip; });
    if (it == devices.end())
      return call.Return(CUPTI_ERROR_INVALID_CHIP_NAME);
    host->device = static_cast<uint64_t>(it - devices.begin());
  }
  call.SetDevice(host->device);
  call.AddDetail("host=" + std::to_string(host->id));
  pParams->pHostObject = reinterpret_cast<CUpti_Profiler_Host_Object*>(host.get());
  g_hosts[host.get()] = std::move(host);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params* pParams) {
  Call call("cuptiProfilerHostDeinitialize");
  const HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail("host=" + std::to_string(host->id));
  g_hosts.erase(pParams->pHostObject);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params* pParams) {
  Call call("cuptiProfilerHostConfigAddMetrics");
  HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr || pParams->ppMetricNames == nullptr || pParams->numMetrics == 0)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail("metrics=" + JoinComma(pParams->ppMetricNames, pParams->numMetrics));
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    if (pParams->ppMetricNames[i] == nullptr)
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
    if (!MetricKnown(call.scenario(), host->chip, pParams->ppMetricNames[i]))
      return call.Return(CUPTI_ERROR_INVALID_METRIC_NAME);
    const auto& devices = call.scenario().devices;
    const Device* device = host->device < devices.size() ? &devices[host->device] : nullptr;
    if (device != nullptr && (host->with_availability || device->refused_without_image)) {
      const auto& refused = device->refused_metrics;
      if (auto it = refused.find(pParams->ppMetricNames[i]); it != refused.end())
        return call.Return(static_cast<CUptiResult>(it->second));
    }
  }
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    if (!Contains(host->metrics, pParams->ppMetricNames[i]))
      host->metrics.emplace_back(pParams->ppMetricNames[i]);
  }
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params* pParams) {
  Call call("cuptiProfilerHostGetConfigImageSize");
  const HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  pParams->configImageSize = WriteConfig(MakeConfig(call, *host)).size();
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params* pParams) {
  Call call("cuptiProfilerHostGetConfigImage");
  const HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr || pParams->pConfigImage == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::vector<uint8_t> image = WriteConfig(MakeConfig(call, *host));
  if (pParams->configImageSize < image.size())
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  std::memcpy(pParams->pConfigImage, image.data(), image.size());
  call.AddDetail("host=" + std::to_string(host->id) + " metrics=" + JoinComma(host->metrics));
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params* pParams) {
  Call call("cuptiProfilerHostGetNumOfPasses");
  if (BadParams(pParams) || pParams->pConfigImage == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::optional<ConfigImage> config =
      ReadConfig(pParams->pConfigImage, pParams->configImageSize);
  if (!config)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.SetDevice(config->device);
  pParams->numOfPasses = config->Passes();
  call.AddDetail("passes=" + std::to_string(pParams->numOfPasses));
  return call.Return(CUPTI_SUCCESS);
}

namespace {

// The submetrics of `base` on `chip`: what follows "base." in every name the chip knows (its
// devices' metrics and the scenario's known_metrics), sorted, once each.
std::vector<std::string> SubMetricsOf(const expanse_fake_cupti::Scenario& scenario,
                                      const std::string& chip, const std::string& base) {
  std::set<std::string> subs;
  const auto take = [&](const std::string& name) {
    if (name.size() > base.size() + 1 && name.starts_with(base) && name[base.size()] == '.')
      subs.insert(name.substr(base.size()));
  };
  for (const auto& device : scenario.devices) {
    if (device.chip != chip)
      continue;
    for (const auto& [name, value] : device.metrics)
      take(name);
    for (const auto& [name, code] : device.refused_metrics)
      take(name);
  }
  for (const std::string& name : scenario.known_metrics)
    take(name);
  return {subs.begin(), subs.end()};
}

// A base metric's type by the naming NVIDIA's metrics follow: "*throughput" are throughputs,
// "*_rate"/"*_ratio" ratios, the rest counters.
CUpti_MetricType TypeOf(const std::string& base) {
  if (base.ends_with("throughput"))
    return CUPTI_METRIC_TYPE_THROUGHPUT;
  if (base.ends_with("_rate") || base.ends_with("_ratio"))
    return CUPTI_METRIC_TYPE_RATIO;
  return CUPTI_METRIC_TYPE_COUNTER;
}

}  // namespace

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostGetMetricProperties(CUpti_Profiler_Host_GetMetricProperties_Params* pParams) {
  Call call("cuptiProfilerHostGetMetricProperties");
  const HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr || pParams->pMetricName == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::string name = pParams->pMetricName;
  const std::string base = name.substr(0, name.find('.'));
  call.AddDetail("metric=" + name);
  if (SubMetricsOf(call.scenario(), host->chip, base).empty())
    return call.Return(CUPTI_ERROR_INVALID_METRIC_NAME);
  pParams->pDescription = "a metric of the fake's scenario";
  pParams->pHwUnit = "fake";
  pParams->pDimUnit = "";
  pParams->metricType = TypeOf(base);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostGetSubMetrics(CUpti_Profiler_Host_GetSubMetrics_Params* pParams) {
  Call call("cuptiProfilerHostGetSubMetrics");
  HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr || pParams->pMetricName == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::string name = pParams->pMetricName;
  const std::string base = name.substr(0, name.find('.'));
  call.AddDetail("metric=" + name);
  std::vector<std::string> subs = SubMetricsOf(call.scenario(), host->chip, base);
  if (subs.empty())
    return call.Return(CUPTI_ERROR_INVALID_METRIC_NAME);
  if (pParams->metricType != TypeOf(base))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  host->listed = std::move(subs);
  host->listed_pointers.clear();
  for (const std::string& sub : host->listed)
    host->listed_pointers.push_back(sub.c_str());
  pParams->numOfSubmetrics = host->listed_pointers.size();
  pParams->ppSubMetrics = host->listed_pointers.data();
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params* pParams) {
  Call call("cuptiProfilerHostEvaluateToGpuValues");
  const HostObject* host = BadParams(pParams) ? nullptr : FindHost(call, pParams);
  if (host == nullptr || pParams->ppMetricNames == nullptr || pParams->numMetrics == 0 ||
      pParams->pMetricValues == nullptr) {
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  }
  const std::optional<CounterData> data =
      ReadCounterData(pParams->pCounterDataImage, pParams->counterDataImageSize);
  if (!data || pParams->rangeIndex >= data->header.count)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.SetDevice(data->header.device);
  call.AddDetail("host=" + std::to_string(host->id) +
                 " range=" + std::to_string(pParams->rangeIndex));
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    const char* metric = pParams->ppMetricNames[i];
    if (metric == nullptr)
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
    // Known to the chip, added to this host object and collected into this image; anything
    // else cannot be evaluated.
    if (!MetricKnown(call.scenario(), host->chip, metric) || !Contains(host->metrics, metric) ||
        !Contains(data->metrics, metric))
      return call.Return(CUPTI_ERROR_INVALID_METRIC_NAME);
  }
  const Device* device = call.device(data->header.device);
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    double value = 0;
    if (device != nullptr) {
      auto it = device->metrics.find(pParams->ppMetricNames[i]);
      value = it == device->metrics.end() ? 0 : it->second;
    }
    pParams->pMetricValues[i] = value;
  }
  return call.Return(CUPTI_SUCCESS);
}

// ---- PM sampling -----------------------------------------------------------------------------

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params* pParams) {
  Call call("cuptiPmSamplingEnable");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (!g_profiler_initialised)
    return call.Return(CUPTI_ERROR_NOT_INITIALIZED);
  const Device* device = call.device(pParams->deviceIndex);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  call.SetDevice(pParams->deviceIndex);
  if (device->enable_error != 0)
    return call.Return(Injected(device->enable_error));
  for (const auto& [handle, sampler] : g_samplers) {
    if (sampler->device == pParams->deviceIndex)
      return call.Return(CUPTI_ERROR_HARDWARE_BUSY);
  }
  auto sampler = std::make_unique<Sampler>();
  sampler->device = pParams->deviceIndex;
  pParams->pPmSamplingObject = reinterpret_cast<CUpti_PmSampling_Object*>(sampler.get());
  g_samplers[sampler.get()] = std::move(sampler);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params* pParams) {
  Call call("cuptiPmSamplingDisable");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  g_samplers.erase(pParams->pPmSamplingObject);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params* pParams) {
  Call call("cuptiPmSamplingSetConfig");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  if (pParams->pConfig == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const std::optional<ConfigImage> config = ReadConfig(pParams->pConfig, pParams->configSize);
  if (!config)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail("metrics=" + JoinComma(config->metrics));
  const Device* device = call.device(sampler->device);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  if (device->set_config_error != 0)
    return call.Return(Injected(device->set_config_error));
  if (sampler->configured && device->reconfigure_error != 0)
    return call.Return(Injected(device->reconfigure_error));
  if (config->chip != device->chip || config->metrics.empty() || pParams->hardwareBufferSize == 0 ||
      pParams->samplingInterval == 0 ||
      pParams->triggerMode >= CUPTI_PM_SAMPLING_TRIGGER_MODE_COUNT) {
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  }
  if (config->Passes() > 1)
    return call.Return(CUPTI_ERROR_NOT_SUPPORTED);  // PM sampling is single-pass only
  if (sampler->started)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  sampler->configured = true;
  sampler->config_metrics = config->metrics;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPmSamplingStart(CUpti_PmSampling_Start_Params* pParams) {
  Call call("cuptiPmSamplingStart");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  if (!sampler->configured || sampler->started)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  const Device* device = call.device(sampler->device);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  if (device->start_error != 0)
    return call.Return(Injected(device->start_error));
  sampler->started = sampler->ever_started = true;
  sampler->last_ns = NowNs();
  sampler->backlog = 0;  // a new run starts with an empty hardware buffer
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params* pParams) {
  Call call("cuptiPmSamplingStop");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  if (!sampler->started)
    return call.Return(CUPTI_ERROR_INVALID_OPERATION);
  sampler->started = false;
  sampler->stop_ns = NowNs();
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params* pParams) {
  Call call("cuptiPmSamplingGetCounterDataSize");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  if (pParams->pMetricNames == nullptr || pParams->numMetrics == 0 || pParams->maxSamples == 0)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.AddDetail("metrics=" + JoinComma(pParams->pMetricNames, pParams->numMetrics) +
                 " max_samples=" + std::to_string(pParams->maxSamples));
  const Device* device = call.device(sampler->device);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  CounterDataRequest request;
  request.max_samples = pParams->maxSamples;
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    const char* metric = pParams->pMetricNames[i];
    if (metric == nullptr)
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
    // Once configured, the counter data can hold only metrics of the config image.
    if (sampler->configured && !Contains(sampler->config_metrics, metric))
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
    if (!MetricKnown(call.scenario(), device->chip, metric))
      return call.Return(CUPTI_ERROR_INVALID_METRIC_NAME);
    request.metrics.emplace_back(metric);
  }
  pParams->counterDataSize =
      CounterDataSize(request.max_samples, JoinNames(request.metrics).size());
  g_counter_data_requests[pParams->counterDataSize] = std::move(request);
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPmSamplingCounterDataImageInitialize(
    CUpti_PmSampling_CounterDataImage_Initialize_Params* pParams) {
  Call call("cuptiPmSamplingCounterDataImageInitialize");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  if (pParams->pCounterData == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  // The size must be one cuptiPmSamplingGetCounterDataSize returned: it says what the image holds.
  auto it = g_counter_data_requests.find(pParams->counterDataSize);
  if (it == g_counter_data_requests.end())
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const CounterDataRequest& request = it->second;
  for (const std::string& metric : request.metrics) {
    if (sampler->configured && !Contains(sampler->config_metrics, metric))
      return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  }
  const std::string names = JoinNames(request.metrics);
  const CounterDataHeader header{kCounterDataMagic,
                                 static_cast<uint32_t>(sampler->device),
                                 static_cast<uint32_t>(request.metrics.size()),
                                 request.max_samples,
                                 0,
                                 static_cast<uint32_t>(names.size()),
                                 pParams->counterDataSize};
  std::memset(pParams->pCounterData, 0, pParams->counterDataSize);
  WriteHeader(pParams->pCounterData, header);
  std::memcpy(pParams->pCounterData + sizeof header + request.max_samples * kSampleBytes,
              names.data(), names.size());
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params* pParams) {
  Call call("cuptiPmSamplingDecodeData");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  std::optional<CounterData> data =
      ReadCounterData(pParams->pCounterDataImage, pParams->counterDataImageSize);
  if (!data || data->header.device != sampler->device)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  const Device* device = call.device(sampler->device);
  if (device == nullptr)
    return call.Return(CUPTI_ERROR_INVALID_DEVICE);
  if (device->decode_error != 0)
    return call.Return(Injected(device->decode_error));
  uint32_t decoded = 0;
  pParams->decodeStopReason =
      DecodeSamples(*device, *sampler, pParams->pCounterDataImage, data->header, &decoded);
  pParams->overflow = 0;
  WriteHeader(pParams->pCounterDataImage, data->header);
  call.AddDetail("samples=" + std::to_string(decoded));
  if (pParams->decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
    call.AddDetail("full");
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI
cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params* pParams) {
  Call call("cuptiPmSamplingGetCounterDataInfo");
  if (BadParams(pParams))
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  if (!g_profiler_initialised)
    return call.Return(CUPTI_ERROR_NOT_INITIALIZED);
  const std::optional<CounterData> data =
      ReadCounterData(pParams->pCounterDataImage, pParams->counterDataImageSize);
  if (!data)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  call.SetDevice(data->header.device);
  pParams->numTotalSamples = data->header.max_samples;
  pParams->numPopulatedSamples = data->header.count;
  pParams->numCompletedSamples = data->header.count;
  return call.Return(CUPTI_SUCCESS);
}

FAKE_EXPORT CUptiResult CUPTIAPI cuptiPmSamplingCounterDataGetSampleInfo(
    CUpti_PmSampling_CounterData_GetSampleInfo_Params* pParams) {
  Call call("cuptiPmSamplingCounterDataGetSampleInfo");
  Sampler* sampler = nullptr;
  if (const CUptiResult r = CheckSampler(call, pParams, &sampler); r != CUPTI_SUCCESS)
    return call.Return(r);
  const std::optional<CounterData> data =
      ReadCounterData(pParams->pCounterDataImage, pParams->counterDataImageSize);
  if (!data || pParams->sampleIndex >= data->header.count)
    return call.Return(CUPTI_ERROR_INVALID_PARAMETER);
  ReadSample(pParams->pCounterDataImage, pParams->sampleIndex, &pParams->startTimestamp,
             &pParams->endTimestamp);
  return call.Return(CUPTI_SUCCESS);
}

}  // extern "C"
