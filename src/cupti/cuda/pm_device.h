// PmDevice: CUPTI PM sampling on one GPU — resolve a counter set to metric names the chip
// accepts in one pass, run it, decode the samples into per-second means, let the GPU go.
//
// Every call runs under the helper's CallWatchdog. A failing call is reported with its name
// and CUPTI result, so the sampler can tell "another profiler holds the counters"
// (CUPTI_ERROR_HARDWARE_BUSY) from missing privileges or an unsupported device.
#ifndef EXPANSE_CUPTI_CUDA_PM_DEVICE_H_
#define EXPANSE_CUPTI_CUDA_PM_DEVICE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cupti/call_watchdog.h"
#include "cupti/cuda/libraries.h"
#include "cupti/metric_sets.h"
#include "cupti/second_means.h"

namespace expanse::cupti {

struct CuptiError {
  std::string call;  // "cuptiPmSamplingEnable"
  CUptiResult code = CUPTI_ERROR_UNKNOWN;
  std::string name() const { return CuptiResultName(code); }
};
using CuptiStatus = std::optional<CuptiError>;

struct PmOptions {
  uint64_t sampling_interval_ns = 100'000'000;  // ten samples a second
  size_t hardware_buffer_bytes = 4 << 20;       // ~minutes of samples at that rate
  uint32_t max_samples_per_decode = 128;        // a decode every second needs ten
};

// A counter set as this chip runs it.
struct ResolvedSet {
  CounterSet set = CounterSet::kLight;
  std::vector<const CounterSeries*> series;  // sampled, in set order
  std::vector<std::string> metrics;          // the CUPTI metric chosen for each
  std::vector<std::string> absent;           // series the chip has no metric for, or no pass
  // Why each absent series is absent: for each candidate, "not on this chip", "N passes
  // alone" or "no room beside the series before it", or the error that refused it.
  std::map<std::string, std::string> why_absent;
  size_t passes = 0;  // of the configuration kept: 1 on success
  std::vector<uint8_t> config_image;
  // The host object that made config_image, kept to evaluate what the sampler records, as
  // NVIDIA's sample and OpenXLA's sampler do (PmDevice frees it).
  CUpti_Profiler_Host_Object* host = nullptr;
};

class PmDevice {
 public:
  PmDevice(const CuptiLibrary& cupti, CallWatchdog& watchdog, size_t device_index,
           PmOptions options);
  ~PmDevice();
  PmDevice(const PmDevice&) = delete;
  PmDevice& operator=(const PmDevice&) = delete;

  // Chip name and counter availability: the first calls that need profiling rights.
  CuptiStatus Prepare();
  // Plans for `chip` (a CUPTI chip name, "GH100") without a GPU: Prepare() then has nothing to
  // ask the device, and host objects are made without a counter availability image, so what
  // Resolve keeps is what the chip takes when nothing else holds its counters. `plan` uses it.
  void PlanForChip(std::string chip) { chip_ = std::move(chip); }
  const std::string& chip() const { return chip_; }

  // Metric names for `set` that the chip accepts in one pass (cached per set). Series are
  // placed in set order: each takes its first candidate that the chip accepts and that still
  // fits one pass beside the series placed before it, so a candidate that needs passes of its
  // own (sm__throughput is 19 on GH100) gives way to the next one instead of pushing the
  // series after it out.
  CuptiStatus Resolve(CounterSet set, const ResolvedSet** resolved);

  // Enables PM sampling on the GPU if needed and runs `set`.
  CuptiStatus Start(CounterSet set);
  // Decodes what the GPU recorded since the last call into `means` (one entry per series of
  // the running set, scaled to series units); returns the samples decoded.
  CuptiStatus Decode(SecondMeans& means, size_t* samples);
  // Stops and disables PM sampling; errors are ignored (the GPU may be gone).
  void Release();

  // Each metric the last Resolve tried that CUPTI refused with something other than "no such
  // metric", with its result, and the result of the same metric on a host object made without
  // the counter availability image: what a probe reports when no metric was accepted (on an
  // H200, every metric came back CUPTI_ERROR_UNKNOWN; this tells the image from the names).
  struct MetricCheck {
    std::string metric;
    std::string result;         // with the availability image
    std::string without_image;  // the same metric, host object without it
  };
  const std::vector<MetricCheck>& metric_checks() const { return metric_checks_; }
  // Set when CUPTI refused every metric of a set on host objects made with this GPU's counter
  // availability image and accepted some without it: the error it gave with the image. From
  // then on this GPU is configured without the image (CUPTI needs it only for chips newer than
  // the library).
  const CuptiStatus& availability_refusal() const { return availability_refusal_; }
  // The absent series of the last Resolve and why, whether or not it succeeded.
  const std::map<std::string, std::string>& last_why_absent() const { return last_why_absent_; }
  // Tries each of `metrics` alone, with and without the availability image, and records both
  // results in metric_checks() whatever they are (a probe's diagnosis when nothing resolved).
  void CheckMetrics(const std::vector<std::string>& metrics);
  size_t availability_bytes() const { return availability_.size(); }

  // What CUPTI says of a base metric (a name without its rollup, "sm__cycles_active") on this
  // chip through a PM sampling host object: its type and every submetric a name may add to it
  // (".avg", ".sum.per_second", ...), or the error that stopped the listing. A probe reports
  // these when the sets were refused, so that one run on a GPU shows which names the chip
  // takes instead of one guess per run.
  struct MetricListing {
    std::string metric;
    std::string type;  // "counter", "ratio", "throughput"
    std::vector<std::string> submetrics;
    std::string error;  // "cuptiProfilerHostGetSubMetrics: CUPTI_ERROR_...", "" when listed
  };
  std::vector<MetricListing> ListSubMetrics(const std::vector<std::string>& bases,
                                            bool with_availability = true);

  bool running() const { return running_; }
  uint64_t overflows() const { return overflows_; }
  const ResolvedSet* active() const { return active_; }

 private:
  CuptiStatus Call(const char* name, CUptiResult result);
  CuptiStatus NewHostObject(CUpti_Profiler_Host_Object** host, bool with_availability = true);
  // Passes `metrics` need together (0 with the error when CUPTI refused the combination).
  CuptiStatus PassesOf(const std::vector<std::string>& metrics, size_t* passes);
  // The result of adding `metric` alone to a new host object.
  CuptiStatus TryMetric(const std::string& metric, bool with_availability);
  void FreeHostObject(CUpti_Profiler_Host_Object*& host);
  // Whether the chip accepts `metric` alone: `refusal` "" when it does, else "not on this chip"
  // or the CUPTI error that refused it. A returned error ends the set.
  CuptiStatus Accepts(const std::string& metric, std::string* refusal);
  // The placement of Resolve: each series of `set` in one pass, into `*resolved`.
  CuptiStatus Place(CounterSet set, ResolvedSet* resolved);
  // Whether `error`, Place's, came from CUPTI refusing every metric with the availability
  // image while accepting one without it (metric_checks()).
  bool ImageRefusedEverything(const CuptiStatus& error) const;
  // Config image and pass count for `metrics`; the host object that made them in `*host`
  // (the caller frees it), or freed when `host` is null or the call failed.
  CuptiStatus Configure(const std::vector<std::string>& metrics, std::vector<uint8_t>* image,
                        size_t* passes, CUpti_Profiler_Host_Object** host = nullptr);
  CuptiStatus PrepareCounterData();
  // One decode into the image, its samples added to `means` and `*samples`; `*full` when CUPTI
  // had more than the image holds.
  CuptiStatus DecodeOnce(SecondMeans& means, size_t* samples, bool* full);
  // cuptiProfilerInitialize and cuptiPmSamplingEnable, unless a sampler is enabled already.
  CuptiStatus EnableSampler();
  // cuptiPmSamplingSetConfig of `resolved` on the enabled sampler.
  CuptiStatus SetConfig(const ResolvedSet& resolved);

  const CuptiLibrary& cupti_;
  CallWatchdog& watchdog_;
  const size_t device_index_;
  const PmOptions options_;
  std::string chip_;
  std::vector<uint8_t> availability_;
  std::map<CounterSet, ResolvedSet> resolved_;
  CUpti_PmSampling_Object* sampler_ = nullptr;
  const ResolvedSet* active_ = nullptr;
  std::vector<const char*> active_names_;
  std::vector<uint8_t> counter_data_;
  bool running_ = false;
  bool saw_invalid_parameter_ = false;
  bool use_availability_ = true;  // false once CUPTI refused everything with the image
  CuptiStatus availability_refusal_;
  CuptiStatus first_refusal_;  // the set's first refusal that was not "no such metric"
  std::map<std::string, std::string> last_why_absent_;
  std::vector<MetricCheck> metric_checks_;
  uint64_t overflows_ = 0;  // decodes that found the hardware buffer had overflowed
};

}  // namespace expanse::cupti

#endif  // EXPANSE_CUPTI_CUDA_PM_DEVICE_H_
