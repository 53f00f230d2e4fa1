#include "cupti/cuda/pm_device.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <utility>

namespace expanse::cupti {
namespace {

template <typename Params>
Params Make(size_t struct_size) {
  Params params{};
  params.structSize = struct_size;
  return params;
}
#define EXPANSE_PARAMS(type) Make<type>(type##_STRUCT_SIZE)

std::vector<const char*> Pointers(const std::vector<std::string>& names) {
  std::vector<const char*> pointers;
  pointers.reserve(names.size());
  for (const auto& name : names)
    pointers.push_back(name.c_str());
  return pointers;
}

// The calls that configure metrics on a host object that exists: their refusal is about the
// metrics, not about the library or the chip.
bool IsMetricConfigurationCall(const std::string& call) {
  return call == "cuptiProfilerHostConfigAddMetrics" ||
         call == "cuptiProfilerHostGetConfigImageSize" ||
         call == "cuptiProfilerHostGetConfigImage" || call == "cuptiProfilerHostGetNumOfPasses";
}

}  // namespace

PmDevice::PmDevice(const CuptiLibrary& cupti, CallWatchdog& watchdog, size_t device_index,
                   PmOptions options)
    : cupti_(cupti), watchdog_(watchdog), device_index_(device_index), options_(options) {}

PmDevice::~PmDevice() {
  Release();
  for (auto& [set, resolved] : resolved_)
    FreeHostObject(resolved.host);
}

CuptiStatus PmDevice::Call(const char* name, CUptiResult result) {
  if (result == CUPTI_SUCCESS)
    return std::nullopt;
  return CuptiError{name, result};
}

// Runs one CUPTI call under the watchdog and turns its result into a CuptiStatus.
#define EXPANSE_CUPTI_CALL(function, params)                       \
  [&] {                                                            \
    CallWatchdog::Scope scope(watchdog_, "cupti" #function);       \
    return Call("cupti" #function, cupti_.fn().function(&params)); \
  }()

CuptiStatus PmDevice::Prepare() {
  if (!chip_.empty())
    return std::nullopt;
  auto chip = EXPANSE_PARAMS(CUpti_Device_GetChipName_Params);
  chip.deviceIndex = device_index_;
  if (auto error = EXPANSE_CUPTI_CALL(DeviceGetChipName, chip))
    return error;
  auto availability = EXPANSE_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params);
  availability.deviceIndex = device_index_;
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingGetCounterAvailability, availability))
    return error;
  availability_.assign(availability.counterAvailabilityImageSize, 0);
  availability.pCounterAvailabilityImage = availability_.data();
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingGetCounterAvailability, availability))
    return error;
  chip_ = chip.pChipName != nullptr ? chip.pChipName : "";
  return std::nullopt;
}

CuptiStatus PmDevice::NewHostObject(CUpti_Profiler_Host_Object** host, bool with_availability) {
  auto init = EXPANSE_PARAMS(CUpti_Profiler_Host_Initialize_Params);
  init.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
  init.pChipName = chip_.c_str();
  // Planning for a chip has no image: what the chip takes when no other profiler holds it.
  init.pCounterAvailabilityImage = with_availability && use_availability_ && !availability_.empty()
                                       ? availability_.data()
                                       : nullptr;
  if (auto error = EXPANSE_CUPTI_CALL(ProfilerHostInitialize, init))
    return error;
  *host = init.pHostObject;
  return std::nullopt;
}

void PmDevice::FreeHostObject(CUpti_Profiler_Host_Object*& host) {
  if (host == nullptr)
    return;
  auto deinit = EXPANSE_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
  deinit.pHostObject = host;
  (void)EXPANSE_CUPTI_CALL(ProfilerHostDeinitialize, deinit);
  host = nullptr;
}

CuptiStatus PmDevice::TryMetric(const std::string& metric, bool with_availability) {
  CUpti_Profiler_Host_Object* host = nullptr;
  if (auto error = NewHostObject(&host, with_availability))
    return error;
  const char* name = metric.c_str();
  auto add = EXPANSE_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  add.pHostObject = host;
  add.ppMetricNames = &name;
  add.numMetrics = 1;
  const CuptiStatus error = EXPANSE_CUPTI_CALL(ProfilerHostConfigAddMetrics, add);
  FreeHostObject(host);
  return error;
}

CuptiStatus PmDevice::Accepts(const std::string& metric, std::string* refusal) {
  const CuptiStatus error = TryMetric(metric, /*with_availability=*/true);
  refusal->clear();
  if (!error)
    return std::nullopt;
  if (error->call != "cuptiProfilerHostConfigAddMetrics")
    return error;  // no host object at all: nothing else will work either
  // An unknown name is an answer, not a failure. CUPTI may also say INVALID_PARAMETER for it;
  // that is remembered, so a set where nothing was accepted that way reports the error rather
  // than "no metrics" (a struct this variant got wrong looks the same).
  if (error->code == CUPTI_ERROR_INVALID_PARAMETER)
    saw_invalid_parameter_ = true;
  if (error->code == CUPTI_ERROR_INVALID_METRIC_NAME ||
      error->code == CUPTI_ERROR_INVALID_PARAMETER) {
    *refusal = "not on this chip";
    return std::nullopt;
  }
  // Any other refusal rules out this metric, not the set: the next candidate is tried. It is
  // kept, with the same metric's result on a host object without the availability image, for
  // the probe to report; the set fails with it only when no metric is accepted.
  *refusal = error->name();
  if (use_availability_) {
    const CuptiStatus bare = TryMetric(metric, /*with_availability=*/false);
    metric_checks_.push_back({metric, error->name(), bare ? bare->name() : "CUPTI_SUCCESS"});
  }
  if (!first_refusal_)
    first_refusal_ = error;
  return std::nullopt;
}

void PmDevice::CheckMetrics(const std::vector<std::string>& metrics) {
  const auto name = [](const CuptiStatus& status) {
    return status ? status->name() : std::string("CUPTI_SUCCESS");
  };
  for (const std::string& metric : metrics)
    metric_checks_.push_back({metric, name(TryMetric(metric, /*with_availability=*/true)),
                              name(TryMetric(metric, /*with_availability=*/false))});
}

std::vector<PmDevice::MetricListing> PmDevice::ListSubMetrics(const std::vector<std::string>& bases,
                                                              bool with_availability) {
  std::vector<MetricListing> listings;
  CUpti_Profiler_Host_Object* host = nullptr;
  const CuptiStatus made = NewHostObject(&host, with_availability);
  for (const std::string& base : bases) {
    MetricListing listing{base, "", {}, ""};
    const auto failed = [&](const CuptiError& error) {
      listing.error = error.call + ": " + error.name();
    };
    if (made) {
      failed(*made);
      listings.push_back(std::move(listing));
      continue;
    }
    auto properties = EXPANSE_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
    properties.pHostObject = host;
    properties.pMetricName = base.c_str();
    auto sub = EXPANSE_PARAMS(CUpti_Profiler_Host_GetSubMetrics_Params);
    if (auto error = EXPANSE_CUPTI_CALL(ProfilerHostGetMetricProperties, properties)) {
      failed(*error);
    } else {
      static constexpr const char* kTypes[] = {"counter", "ratio", "throughput"};
      const auto type = static_cast<size_t>(properties.metricType);
      listing.type = type < std::size(kTypes) ? kTypes[type] : "type " + std::to_string(type);
      sub.pHostObject = host;
      sub.metricType = properties.metricType;
      sub.pMetricName = base.c_str();
      if (auto listing_error = EXPANSE_CUPTI_CALL(ProfilerHostGetSubMetrics, sub))
        failed(*listing_error);
    }
    // CUPTI owns the strings (until the host object goes): copied now, a bounded number.
    constexpr size_t kMaxSubMetrics = 256;
    for (size_t i = 0; listing.error.empty() && sub.ppSubMetrics != nullptr &&
                       i < std::min(sub.numOfSubmetrics, kMaxSubMetrics);
         ++i) {
      if (sub.ppSubMetrics[i] != nullptr)
        listing.submetrics.emplace_back(sub.ppSubMetrics[i]);
    }
    listings.push_back(std::move(listing));
  }
  FreeHostObject(host);
  return listings;
}

CuptiStatus PmDevice::Configure(const std::vector<std::string>& metrics,
                                std::vector<uint8_t>* image, size_t* passes,
                                CUpti_Profiler_Host_Object** kept) {
  CUpti_Profiler_Host_Object* host = nullptr;
  if (auto error = NewHostObject(&host))
    return error;
  auto names = Pointers(metrics);
  auto add = EXPANSE_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
  add.pHostObject = host;
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  CuptiStatus error = EXPANSE_CUPTI_CALL(ProfilerHostConfigAddMetrics, add);
  auto size = EXPANSE_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
  size.pHostObject = host;
  if (!error)
    error = EXPANSE_CUPTI_CALL(ProfilerHostGetConfigImageSize, size);
  if (!error) {
    image->assign(size.configImageSize, 0);
    auto get = EXPANSE_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    get.pHostObject = host;
    get.configImageSize = image->size();
    get.pConfigImage = image->data();
    error = EXPANSE_CUPTI_CALL(ProfilerHostGetConfigImage, get);
  }
  if (!error) {
    auto count = EXPANSE_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    count.configImageSize = image->size();
    count.pConfigImage = image->data();
    error = EXPANSE_CUPTI_CALL(ProfilerHostGetNumOfPasses, count);
    *passes = count.numOfPasses;
  }
  if (!error && kept != nullptr)
    *kept = std::exchange(host, nullptr);
  FreeHostObject(host);
  return error;
}

CuptiStatus PmDevice::PassesOf(const std::vector<std::string>& metrics, size_t* passes) {
  std::vector<uint8_t> image;
  *passes = 0;
  return Configure(metrics, &image, passes);
}

bool PmDevice::ImageRefusedEverything(const CuptiStatus& error) const {
  if (!error || error->code == CUPTI_ERROR_INVALID_METRIC_NAME ||
      error->code == CUPTI_ERROR_INVALID_PARAMETER || !IsMetricConfigurationCall(error->call))
    return false;
  for (const MetricCheck& check : metric_checks_) {
    if (check.without_image == "CUPTI_SUCCESS")
      return true;
  }
  return false;
}

CuptiStatus PmDevice::Resolve(CounterSet set, const ResolvedSet** out) {
  if (auto it = resolved_.find(set); it != resolved_.end()) {
    *out = &it->second;
    return std::nullopt;
  }
  if (auto error = Prepare())
    return error;
  // The checks are this attempt's: a set refused on every retry (backoff up to five minutes,
  // for weeks on a node whose counters are unavailable) must not add to them each time.
  metric_checks_.clear();
  ResolvedSet resolved;
  CuptiStatus error = Place(set, &resolved);
  if (use_availability_ && ImageRefusedEverything(error)) {
    // CUPTI's header calls the availability image "required for future chip support": a chip
    // the library knows is configured without it. On two H200 VMs CUPTI refused every metric
    // with the image (CUPTI_ERROR_UNKNOWN), names that `plan` places without one; such a GPU
    // is sampled without it, and says so, rather than not at all. Start still asks the GPU, so
    // counters the driver really withholds fail there with the driver's own error.
    availability_refusal_ = error;
    use_availability_ = false;
    resolved = ResolvedSet{};
    error = Place(set, &resolved);
  }
  if (error)
    return error;
  *out = &(resolved_[set] = std::move(resolved));
  return std::nullopt;
}

CuptiStatus PmDevice::Place(CounterSet set, ResolvedSet* out) {
  // What refused this set's metrics decides its error, not what refused another set's.
  first_refusal_.reset();
  saw_invalid_parameter_ = false;
  ResolvedSet& resolved = *out;
  resolved.set = set;
  // PM sampling runs one pass: each series takes the first candidate that fits beside those
  // placed before it. That is one host configuration (a few milliseconds of CPU) per candidate
  // tried, once per set and GPU for the helper's life: ~90 ms for both sets on GH100
  // (bench/cupti_helper_memory.sh), too little to share between GPUs of one chip.
  for (const CounterSeries& series : SeriesOf(set)) {
    std::string why;
    const auto note = [&why](const std::string& metric, const std::string& text) {
      why += (why.empty() ? "" : "; ") + metric + ": " + text;
    };
    bool placed = false;
    for (const std::string& candidate : series.candidates) {
      std::string refusal;
      if (auto error = Accepts(candidate, &refusal)) {
        FreeHostObject(resolved.host);  // the configuration of the series placed so far
        return error;
      }
      if (!refusal.empty()) {
        note(candidate, refusal);
        continue;
      }
      resolved.metrics.push_back(candidate);
      size_t passes = 0;
      std::vector<uint8_t> image;
      CUpti_Profiler_Host_Object* host = nullptr;
      const CuptiStatus combined = Configure(resolved.metrics, &image, &passes, &host);
      if (!combined && passes == 1) {
        // The configuration with this series is the set's until a later series joins it.
        FreeHostObject(resolved.host);
        resolved.host = host;
        resolved.config_image = std::move(image);
        resolved.passes = passes;
        resolved.series.push_back(&series);
        placed = true;
        break;
      }
      FreeHostObject(host);
      resolved.metrics.pop_back();
      const char* beside = resolved.metrics.empty() ? "alone" : "beside the series before it";
      if (combined) {
        if (!IsMetricConfigurationCall(combined->call)) {
          FreeHostObject(resolved.host);
          return combined;  // no host object at all: nothing else will work either
        }
        note(candidate, combined->name() + " in " + combined->call + " " + beside);
        if (!first_refusal_)
          first_refusal_ = combined;
        continue;
      }
      if (resolved.metrics.empty()) {
        note(candidate, std::to_string(passes) + " passes alone");
        continue;
      }
      size_t alone = 0;
      if (const CuptiStatus by_itself = PassesOf({candidate}, &alone))
        note(candidate, by_itself->name() + " in " + by_itself->call + " alone");
      else if (alone == 1)
        note(candidate, "no room beside the series before it");
      else
        note(candidate, std::to_string(alone) + " passes alone");
    }
    if (!placed) {
      resolved.absent.push_back(series.series);
      resolved.why_absent[series.series] = why;
    }
  }
  last_why_absent_ = resolved.why_absent;
  if (resolved.metrics.empty() && first_refusal_)
    return first_refusal_;
  if (resolved.metrics.empty())
    return CuptiError{"cuptiProfilerHostConfigAddMetrics", saw_invalid_parameter_
                                                               ? CUPTI_ERROR_INVALID_PARAMETER
                                                               : CUPTI_ERROR_INVALID_METRIC_NAME};
  return std::nullopt;
}

CuptiStatus PmDevice::PrepareCounterData() {
  auto size = EXPANSE_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params);
  size.pPmSamplingObject = sampler_;
  size.pMetricNames = active_names_.data();
  size.numMetrics = active_names_.size();
  size.maxSamples = options_.max_samples_per_decode;
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingGetCounterDataSize, size))
    return error;
  counter_data_.assign(size.counterDataSize, 0);
  auto init = EXPANSE_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params);
  init.pPmSamplingObject = sampler_;
  init.counterDataSize = counter_data_.size();
  init.pCounterData = counter_data_.data();
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingCounterDataImageInitialize, init))
    return error;
  return std::nullopt;
}

CuptiStatus PmDevice::EnableSampler() {
  if (sampler_ != nullptr)
    return std::nullopt;
  // Again before each Enable: OpenXLA found that disabling a PM sampling object tears down more
  // of CUPTI than that object, and PyTorch that initialising again is safe (a second
  // DeInitialize is not: only the probe calls that, once, as it ends).
  auto init = EXPANSE_PARAMS(CUpti_Profiler_Initialize_Params);
  if (auto error = EXPANSE_CUPTI_CALL(ProfilerInitialize, init))
    return error;
  auto enable = EXPANSE_PARAMS(CUpti_PmSampling_Enable_Params);
  enable.deviceIndex = device_index_;
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingEnable, enable))
    return error;
  sampler_ = enable.pPmSamplingObject;
  return std::nullopt;
}

CuptiStatus PmDevice::SetConfig(const ResolvedSet& resolved) {
  auto config = EXPANSE_PARAMS(CUpti_PmSampling_SetConfig_Params);
  config.pPmSamplingObject = sampler_;
  config.configSize = resolved.config_image.size();
  config.pConfig = resolved.config_image.data();
  config.hardwareBufferSize = options_.hardware_buffer_bytes;
  config.samplingInterval = options_.sampling_interval_ns;
  config.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  // Overwrite the oldest records rather than stop when a decode is late.
  config.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
  return EXPANSE_CUPTI_CALL(PmSamplingSetConfig, config);
}

CuptiStatus PmDevice::Start(CounterSet set) {
  const ResolvedSet* resolved = nullptr;
  if (auto error = Resolve(set, &resolved))
    return error;
  if (running_) {
    auto stop = EXPANSE_PARAMS(CUpti_PmSampling_Stop_Params);
    stop.pPmSamplingObject = sampler_;
    (void)EXPANSE_CUPTI_CALL(PmSamplingStop, stop);
    running_ = false;
  }
  // A sampler that ran another set is configured again. NVIDIA's sample and OpenXLA configure
  // a sampler once, and Kineto disables and enables one to change it: if CUPTI refuses the
  // second configuration, a new sampler takes it.
  const bool reused = sampler_ != nullptr;
  CuptiStatus refused = EnableSampler();
  if (!refused)
    refused = SetConfig(*resolved);
  if (refused && reused) {
    // Said once per switch, so that a GPU run tells whether CUPTI takes a second configuration.
    std::fprintf(stderr,
                 "expanse-cupti-helper: device %zu: %s in %s on a sampler that ran another "
                 "set; a new sampler takes it\n",
                 device_index_, refused->name().c_str(), refused->call.c_str());
    Release();
    refused = EnableSampler();
    if (!refused)
      refused = SetConfig(*resolved);
  }
  if (refused) {
    Release();
    return refused;
  }
  active_ = resolved;
  active_names_ = Pointers(resolved->metrics);
  CuptiStatus error = PrepareCounterData();
  if (!error) {
    auto start = EXPANSE_PARAMS(CUpti_PmSampling_Start_Params);
    start.pPmSamplingObject = sampler_;
    error = EXPANSE_CUPTI_CALL(PmSamplingStart, start);
  }
  if (error) {
    Release();
    return error;
  }
  running_ = true;
  return std::nullopt;
}

CuptiStatus PmDevice::Decode(SecondMeans& means, size_t* samples) {
  *samples = 0;
  if (!running_)
    return CuptiError{"cuptiPmSamplingDecodeData", CUPTI_ERROR_INVALID_OPERATION};
  // The image holds max_samples_per_decode samples; CUPTI says COUNTER_DATA_FULL when the
  // hardware buffer had more, and keeps the rest for the next decode. They are decoded now, into
  // the image started over, until END_OF_RECORDS: left for the next period, the backlog would
  // grow each period and every mean would be of older samples than its stamp says. Bounded, so
  // a driver that always says FULL cannot hold the loop (the next period carries on from there).
  constexpr int kMaxDecodesPerPeriod = 64;
  for (int round = 0; round < kMaxDecodesPerPeriod; ++round) {
    bool full = false;
    if (auto error = DecodeOnce(means, samples, &full))
      return error;
    if (!full)
      break;
  }
  return std::nullopt;
}

CuptiStatus PmDevice::DecodeOnce(SecondMeans& means, size_t* samples, bool* full) {
  auto decode = EXPANSE_PARAMS(CUpti_PmSampling_DecodeData_Params);
  decode.pPmSamplingObject = sampler_;
  decode.pCounterDataImage = counter_data_.data();
  decode.counterDataImageSize = counter_data_.size();
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingDecodeData, decode))
    return error;
  *full = decode.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
  auto info = EXPANSE_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params);
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingGetCounterDataInfo, info))
    return error;
  std::vector<double> values(active_names_.size());
  const size_t completed =
      std::min<size_t>(info.numCompletedSamples, options_.max_samples_per_decode);
  for (size_t i = 0; i < completed; ++i) {
    auto sample = EXPANSE_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params);
    sample.pPmSamplingObject = sampler_;
    sample.pCounterDataImage = counter_data_.data();
    sample.counterDataImageSize = counter_data_.size();
    sample.sampleIndex = i;
    if (auto error = EXPANSE_CUPTI_CALL(PmSamplingCounterDataGetSampleInfo, sample))
      return error;
    auto evaluate = EXPANSE_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    evaluate.pHostObject = active_->host;
    evaluate.pCounterDataImage = counter_data_.data();
    evaluate.counterDataImageSize = counter_data_.size();
    evaluate.rangeIndex = i;
    evaluate.ppMetricNames = active_names_.data();
    evaluate.numMetrics = active_names_.size();
    evaluate.pMetricValues = values.data();
    if (auto error = EXPANSE_CUPTI_CALL(ProfilerHostEvaluateToGpuValues, evaluate))
      return error;
    for (size_t m = 0; m < values.size(); ++m)
      values[m] *= active_->series[m]->scale;
    means.Add(sample.startTimestamp, sample.endTimestamp, values);
  }
  // Start the image over for the next decode, as NVIDIA's PM sampling sample does; a sample
  // still being filled at this decode is decoded again, whole, by the next one.
  auto reset = EXPANSE_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params);
  reset.pPmSamplingObject = sampler_;
  reset.counterDataSize = counter_data_.size();
  reset.pCounterData = counter_data_.data();
  if (auto error = EXPANSE_CUPTI_CALL(PmSamplingCounterDataImageInitialize, reset))
    return error;
  if (decode.overflow != 0)
    ++overflows_;
  *samples += completed;
  return std::nullopt;
}

void PmDevice::Release() {
  if (sampler_ != nullptr) {
    if (running_) {
      auto stop = EXPANSE_PARAMS(CUpti_PmSampling_Stop_Params);
      stop.pPmSamplingObject = sampler_;
      (void)EXPANSE_CUPTI_CALL(PmSamplingStop, stop);
    }
    auto disable = EXPANSE_PARAMS(CUpti_PmSampling_Disable_Params);
    disable.pPmSamplingObject = sampler_;
    (void)EXPANSE_CUPTI_CALL(PmSamplingDisable, disable);
  }
  sampler_ = nullptr;
  running_ = false;
  active_ = nullptr;
}

}  // namespace expanse::cupti
