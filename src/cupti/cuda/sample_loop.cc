#include "cupti/cuda/sample_loop.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <map>
#include <memory>

#include "cupti/cuda/devices.h"
#include "cupti/helper_records.h"
#include "cupti/pm_reasons.h"

namespace expanse::cupti {
namespace {

using Clock = std::chrono::steady_clock;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Gpu {
  CudaDevice device;
  std::unique_ptr<PmDevice> pm;
  DevicePlan plan;
  std::unique_ptr<SecondMeans> means;
  std::string last_status;  // pm_sampling + reason last reported, to report changes only
  int good_decodes = 0;     // since the last start; the backoff starts over after a few
};

// Decodes in a row that make a GPU count as working again: a GPU that starts and then fails at
// once must keep backing off, not cycle every few seconds.
constexpr int kDecodesToTrust = 3;

class Loop {
 public:
  Loop(const CuptiLibrary* cupti, CallWatchdog& watchdog, const SampleOptions& options)
      : cupti_(cupti), watchdog_(watchdog), options_(options) {}

  bool Emit(const HelperRecord& record) {
    if (!WriteLine(options_.output_fd, RenderRecord(record)))
      output_gone_ = true;
    return !output_gone_;
  }

  // An "ok" status's reason: empty, or that the GPU runs without its availability image.
  static std::string OkReason(const Gpu& gpu) {
    const CuptiStatus& refusal = gpu.pm->availability_refusal();
    return refusal ? std::string(kReasonAvailabilityRefused) + " (" + refusal->name() + " in " +
                         refusal->call + ")"
                   : "";
  }

  void Status(Gpu& gpu, const std::string& state, const std::string& reason) {
    // "yielded_to_job_profiler (CUPTI_ERROR_HARDWARE_BUSY)": the fix is the code's.
    StatusRecord status{static_cast<unsigned>(gpu.device.index),
                        gpu.device.uuid,
                        state,
                        reason,
                        FixFor(reason.substr(0, reason.find(' '))),
                        {}};
    if (state == "ok" && gpu.pm->active() != nullptr) {
      for (const auto* series : gpu.pm->active()->series)
        status.series.push_back(series->series);
    }
    const std::string key = state + "/" + reason + "/" + std::to_string(status.series.size());
    if (key == gpu.last_status)
      return;
    gpu.last_status = key;
    Emit(status);
  }

  void AddGpu(const CudaDevice& device) {
    Gpu gpu{device, nullptr, DevicePlan(options_.plan), nullptr, ""};
    if (cupti_ != nullptr)
      gpu.pm = std::make_unique<PmDevice>(*cupti_, watchdog_, device.index, options_.pm);
    gpus_.push_back(std::move(gpu));
  }

  // Lets the GPU go and schedules the next attempt.
  void Release(Gpu& gpu, const CuptiError& error, Clock::time_point now) {
    gpu.pm->Release();
    gpu.means.reset();
    gpu.plan.Released(now);
    gpu.good_decodes = 0;
    // No metric of the set on this chip: the probe's word for it.
    const std::string reason =
        error.code == CUPTI_ERROR_INVALID_METRIC_NAME ? kReasonNoMetrics : error.name();
    Status(
        gpu, IsCounterContention(reason) ? "yielded" : "unavailable",
        IsCounterContention(reason) ? std::string(kReasonYielded) + " (" + reason + ")" : reason);
  }

  void Tick(Clock::time_point now) {
    for (Gpu& gpu : gpus_) {
      if (!gpu.pm)
        continue;
      const CounterSet wanted = gpu.plan.Wanted(now);
      if (gpu.pm->running() && gpu.pm->active()->set != wanted) {
        // What the old set recorded since the last period goes out before the switch.
        size_t samples = 0;
        if (auto error = gpu.pm->Decode(*gpu.means, &samples)) {
          Release(gpu, *error, now);
          continue;
        }
        Flush(gpu);
        if (auto error = gpu.pm->Start(wanted)) {
          Release(gpu, *error, now);
          continue;
        }
        gpu.means = std::make_unique<SecondMeans>(gpu.pm->active()->series.size());
        Status(gpu, "ok", OkReason(gpu));
      }
      if (!gpu.pm->running()) {
        if (!gpu.plan.MayTry(now))
          continue;
        if (auto error = gpu.pm->Start(wanted)) {
          Release(gpu, *error, now);
          continue;
        }
        gpu.good_decodes = 0;
        gpu.means = std::make_unique<SecondMeans>(gpu.pm->active()->series.size());
        Status(gpu, "ok", OkReason(gpu));
        continue;  // the first decode has nothing yet
      }
      size_t samples = 0;
      if (auto error = gpu.pm->Decode(*gpu.means, &samples)) {
        Release(gpu, *error, now);
        continue;
      }
      if (++gpu.good_decodes == kDecodesToTrust)
        gpu.plan.Resumed();
      Flush(gpu);
    }
    Emit(AliveRecord{UnixMs()});
  }

  // The means since the last record, as one counters record.
  void Flush(Gpu& gpu) {
    if (!gpu.means || gpu.pm->active() == nullptr)
      return;
    const auto means = gpu.means->Take();
    if (means.samples == 0)
      return;
    CounterRecord record;
    record.unix_ms = UnixMs();
    record.device = static_cast<unsigned>(gpu.device.index);
    record.uuid = gpu.device.uuid;
    record.set = gpu.pm->active()->set;
    record.samples = static_cast<uint32_t>(means.samples);
    for (size_t i = 0; i < means.values.size(); ++i) {
      if (means.values[i])
        record.values.emplace_back(gpu.pm->active()->series[i]->series, *means.values[i]);
    }
    Emit(record);
  }

  void Command(const std::string& line, Clock::time_point now) {
    auto command = ParseCommand(line);
    if (!command.ok())
      return;  // the sampler wrote it; a bad line is dropped, never fatal
    for (Gpu& gpu : gpus_) {
      if (gpu.device.uuid != command->uuid)
        continue;
      switch (command->kind) {
        case HelperCommand::Kind::kLight:
          gpu.plan.EndEscalation();
          break;
        case HelperCommand::Kind::kEscalate:
          gpu.plan.Escalate(now, command->window);
          break;
        case HelperCommand::Kind::kRelease:
          gpu.plan.Hold();
          if (gpu.pm && gpu.pm->running()) {
            gpu.pm->Release();  // at once, not at the next period
            gpu.means.reset();
          }
          if (gpu.pm)
            Status(gpu, "yielded", std::string(kReasonYielded) + " (a CUDA tool runs in a job)");
          break;
        case HelperCommand::Kind::kResume:
          gpu.plan.Resume();
          break;
      }
    }
  }

  // Reads what the sampler wrote; false once its end is closed.
  bool ReadInput(Clock::time_point now) {
    char buffer[4096];
    const ssize_t n = read(options_.input_fd, buffer, sizeof(buffer));
    if (n == 0)
      return false;
    if (n < 0)
      return errno == EINTR || errno == EAGAIN;
    pending_.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending_.find('\n')) != std::string::npos) {
      Command(pending_.substr(0, newline), now);
      pending_.erase(0, newline + 1);
    }
    if (pending_.size() > 4096)
      pending_.clear();  // no command is that long
    return true;
  }

  std::vector<Gpu>& gpus() { return gpus_; }
  bool output_gone() const { return output_gone_; }

 private:
  const CuptiLibrary* cupti_;
  CallWatchdog& watchdog_;
  const SampleOptions& options_;
  std::vector<Gpu> gpus_;
  std::string pending_;
  bool output_gone_ = false;
};

}  // namespace

bool WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

namespace {

// libcupti, opened and initialised; the reason otherwise.
std::unique_ptr<CuptiLibrary> OpenCupti(const std::string& path, CallWatchdog& watchdog,
                                        std::string* reason) {
  auto opened = CuptiLibrary::Open(path);
  if (!opened.ok()) {
    const std::string& message = opened.status().message();
    std::fprintf(stderr, "expanse-cupti-helper: %s\n", message.c_str());
    *reason = message.substr(0, message.find(':'));
    if (*reason == "libcupti_symbol_missing")
      *reason = kReasonSymbolMissing;
    return nullptr;
  }
  CUpti_Profiler_Initialize_Params init{};
  init.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
  CUptiResult result;
  {
    CallWatchdog::Scope scope(watchdog, "cuptiProfilerInitialize");
    result = (*opened)->fn().ProfilerInitialize(&init);
  }
  if (result != CUPTI_SUCCESS) {
    *reason = CuptiResultName(result);
    std::fprintf(stderr, "expanse-cupti-helper: %s in cuptiProfilerInitialize\n", reason->c_str());
    return nullptr;
  }
  return std::move(*opened);
}

// Every GPU let go, and every host object with it, before CUPTI's profiler is de-initialised.
int Finish(Loop& loop, const CuptiLibrary* cupti, CallWatchdog& watchdog) {
  for (Gpu& gpu : loop.gpus())
    gpu.pm.reset();
  if (cupti != nullptr) {
    CUpti_Profiler_DeInitialize_Params deinit{};
    deinit.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
    CallWatchdog::Scope scope(watchdog, "cuptiProfilerDeInitialize");
    (void)cupti->fn().ProfilerDeInitialize(&deinit);
  }
  return 0;
}

}  // namespace

int RunSampleLoop(const CudaLibrary& cuda, CallWatchdog& watchdog, const SampleOptions& options,
                  const std::atomic<bool>& stop) {
  const CudaInventory inventory = ListDevices(cuda, watchdog);
  if (!inventory.error.empty()) {
    const std::string reason = inventory.error + " in " + inventory.error_call;
    std::fprintf(stderr, "expanse-cupti-helper: %s\n", reason.c_str());
    WriteLine(options.output_fd, RenderRecord(FatalRecord{reason}));
    return 1;
  }
  std::string cupti_reason = kReasonDriverTooOld;
  std::unique_ptr<CuptiLibrary> cupti;
  if (inventory.driver_api_version >= CUDA_VERSION)
    cupti = OpenCupti(options.libcupti, watchdog, &cupti_reason);
  Loop loop(cupti.get(), watchdog, options);
  for (const auto& device : inventory.devices) {
    bool wanted = options.uuids.empty();
    for (const auto& uuid : options.uuids)
      wanted = wanted || uuid == device.uuid;
    if (wanted)
      loop.AddGpu(device);
  }
  for (Gpu& gpu : loop.gpus()) {
    if (!gpu.pm)
      loop.Status(gpu, "unavailable", cupti_reason);
  }
  for (const auto& uuid : options.uuids) {
    bool known = false;
    for (const auto& device : inventory.devices)
      known = known || device.uuid == uuid;
    if (!known && IsGpuUuid(uuid))
      loop.Emit(StatusRecord{
          std::nullopt, uuid, "unavailable", kReasonNotVisible, FixFor(kReasonNotVisible), {}});
  }

  const auto started = Clock::now();
  auto next = started;
  bool input_open = true;
  // The sampler writes its releases (GPUs left to a job's own CUDA tool) right after it starts
  // us, before we get here past cuInit: read them before the first period enables anything, or
  // that tool would find the counters taken. Only what is already there; never a wait.
  pollfd pending{options.input_fd, POLLIN, 0};
  for (int reads = 0; reads < 64 && poll(&pending, 1, 0) > 0; ++reads) {  // 64: 256 KiB of lines
    if (!loop.ReadInput(Clock::now())) {
      if (!options.duration)
        return Finish(loop, cupti.get(), watchdog);
      input_open = false;
      break;
    }
    if ((pending.revents & POLLIN) == 0)
      break;  // POLLHUP/POLLERR without data: the next read says
  }
  while (!stop.load() && !loop.output_gone()) {
    const auto now = Clock::now();
    if (options.duration && now - started >= *options.duration)
      break;
    if (now >= next) {
      loop.Tick(now);
      next += options.period;
      if (next < now)
        next = now + options.period;  // a slow tick: skip, never burst
      continue;
    }
    pollfd input{options.input_fd, POLLIN, 0};
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
    const int ready =
        poll(input_open ? &input : nullptr, input_open ? 1 : 0, static_cast<int>(wait.count()) + 1);
    if (ready > 0 && !loop.ReadInput(Clock::now())) {
      // The sampler closed our input: it is gone or wants us gone. A timed run (an operator's
      // check, with input from /dev/null) just stops reading.
      if (!options.duration)
        break;
      input_open = false;
    }
  }
  return Finish(loop, cupti.get(), watchdog);
}

}  // namespace expanse::cupti
