// libexpanse-agent.so's entry point. The CUDA driver loads the library named by
// CUDA_INJECTION64_PATH (TaskProlog exports it) into every process that initialises CUDA and
// calls InitializeInjection once. The agent then subscribes to CUPTI's Activity API and runs a
// thread of its own that flushes CUPTI's buffers once a second into the CaptureAgent (aggregates
// every window, a trace segment on a Phase B trigger). docs/capture-agent.md.
//
// The agent never alters the job: every failure is swallowed (and noted once in the spool), it
// never calls exit or abort, its thread blocks every signal, its buffers are bounded, and at exit
// it waits at most two seconds for its last flush. A forked child (which cannot use CUDA) is not
// captured; an exec'd child is injected afresh by the driver.

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture/capture_agent.h"
#include "capture/cuda/cupti_activity.h"
#include "capture/cuda/pc_sampling.h"
#include "capture/process_identity.h"
#include "capture/record_budget.h"
#include "capture/spool_files.h"

namespace expanse::capture {
namespace {

constexpr size_t kBufferBytes = 1 << 20;
constexpr int kMaxBuffers = 16;  // at most 16 MiB of CUPTI buffers; beyond, CUPTI drops (counted)
constexpr char kDefaultControlDir[] = "/var/lib/expanse/control";

uint64_t UnixNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t UnixMs() { return UnixNs() / 1000000; }

uint64_t EnvMs(const char* name, uint64_t fallback, uint64_t low, uint64_t high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0')
    return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == nullptr || *end != '\0' || value < low || value > high)
    return fallback;
  return value;
}

// Everything the agent keeps for the life of the process. Never destroyed: CUPTI's buffer
// thread and the exit handler may use it while static destructors run.
struct AgentState {
  CuptiActivityApi api;
  CaptureAgent* agent = nullptr;
  std::atomic<int64_t> offset_ns{0};  // Unix ns - CUPTI ns, re-measured every tick
  pid_t owner = 0;
  std::chrono::milliseconds tick{1000};  // a window or trace never ends more than a tick late
  std::mutex decode_mu;  // NvtxRanges; CUPTI may complete buffers on more than one thread
  NvtxRanges nvtx;
  std::atomic<int> buffers{0};
  // Recording in bursts within the budget (RecordBudget): the kinds the agent enabled, whether
  // they are on now (the worker's alone), and the records CUPTI delivered since the last cycle.
  std::vector<CUpti_ActivityKind> kinds;
  bool recording = true;
  std::atomic<uint64_t> records{0};
  RecordBudget budget;
  // Detaching between bursts (the worker's, but `link` also the detach callback's): while CUPTI
  // is attached every CUDA call of the job pays for it, whatever kinds are on (measured on an
  // H200: ~2.3 us a launch), so the off part of a cycle is only free once CUPTI is gone.
  bool detach = false;    // EXPANSE_CAPTURE_DETACH is not 0 and the library can
  std::atomic<int> link;  // Link
  // Another CUPTI subscriber (the job's profiler, Nsight) holds CUPTI: the agent makes no CUPTI
  // call but its once-a-cycle check until it is gone.
  bool yielded = false;
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;  // under mu
  bool stopped = false;   // under mu
  // Set when the exit handler stopped waiting: the worker then makes no further call, since
  // CUDA and CUPTI are being torn down around it.
  std::atomic<bool> abandoned{false};
  // PC sampling in Phase B windows (the worker's alone). Null when the node, the libraries or
  // EXPANSE_CAPTURE_PC_SAMPLING=0 rule it out; each segment then says why (pc_off_*).
  std::unique_ptr<PcSampler> pc;
  PcSamplingState pc_off_state = PcSamplingState::kUnavailable;
  std::string pc_off_reason;
  bool pc_tried = false;  // in the open trace: started, refused, or given up on
};

enum Link : int {
  kAttached,         // CUPTI is in the process (the agent's kinds may be on or off)
  kDetachRequested,  // the next CUDA call's exit detaches it
  kDetaching,        // that call's exit is detaching it now
  kDetached,         // CUPTI is out of the process until the next burst attaches it again
};

AgentState* g_state = nullptr;
std::atomic<bool> g_initialised{false};

bool InOwnerProcess() { return g_state != nullptr && getpid() == g_state->owner; }

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  *buffer = nullptr;
  *size = 0;
  if (g_state == nullptr || g_state->buffers.fetch_add(1) >= kMaxBuffers) {
    if (g_state != nullptr)
      g_state->buffers.fetch_sub(1);
    return;  // CUPTI drops the records it cannot store, and reports how many
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  if (*buffer == nullptr) {
    g_state->buffers.fetch_sub(1);
    return;
  }
  *size = kBufferBytes;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                              size_t valid) {
  if (buffer == nullptr)
    return;
  // Nothing may leave a CUPTI callback by exception (it would unwind through C, or terminate).
  if (InOwnerProcess() && !g_state->abandoned.load()) {
    try {
      std::lock_guard<std::mutex> lock(g_state->decode_mu);
      DecodeActivityBuffer(g_state->api, buffer, valid, g_state->offset_ns.load(), g_state->nvtx,
                           [](const Activity& a) {
                             g_state->records.fetch_add(1, std::memory_order_relaxed);
                             g_state->agent->OnActivity(a);
                           });
      size_t dropped = 0;
      if (g_state->api.GetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS &&
          dropped > 0)
        g_state->agent->OnDropped(dropped);
    } catch (...) {
    }
  }
  std::free(buffer);
  if (g_state != nullptr)
    g_state->buffers.fetch_sub(1);
}

// Unix time minus CUPTI's clock, so the agent's timestamps follow the wall clock as NTP moves
// it. Returns false when CUPTI cannot say (the previous offset stays).
bool MeasureOffset(AgentState& s) {
  uint64_t cupti_now = 0;
  if (s.api.GetTimestamp(&cupti_now) != CUPTI_SUCCESS)
    return false;
  s.offset_ns.store(static_cast<int64_t>(UnixNs()) - static_cast<int64_t>(cupti_now));
  return true;
}

// Turns the agent's activity kinds on or off (the budget's bursts). A kind CUPTI will not turn
// back on stays off, noted once. Never throws: it runs outside the worker's try blocks.
void SetRecording(AgentState& s, bool on) noexcept {
  if (s.recording == on)
    return;
  s.recording = on;
  for (CUpti_ActivityKind kind : s.kinds) {
    const CUptiResult r = on ? s.api.Enable(kind) : s.api.Disable(kind);
    if (r == CUPTI_SUCCESS)
      continue;
    try {
      s.agent->Note(on ? "re-enable" : "disable",
                    std::string(on ? "cuptiActivityEnable: " : "cuptiActivityDisable: ") +
                        s.api.ResultName(r));
    } catch (...) {
    }
  }
}

// Detaches CUPTI from the exit of the job's next CUDA call, the site NVIDIA's documentation asks
// for (no CUDA call of that thread is in flight; `cuptiFinalize` elsewhere could tear CUPTI out
// from under one). Runs on a job thread: one atomic exchange decides which call does it.
void CUPTIAPI DetachAtApiExit(void*, CUpti_CallbackDomain domain, CUpti_CallbackId,
                              const void* data) {
  if (!InOwnerProcess() || data == nullptr ||
      (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) ||
      static_cast<const CUpti_CallbackData*>(data)->callbackSite != CUPTI_API_EXIT)
    return;
  int expected = kDetachRequested;
  if (!g_state->link.compare_exchange_strong(expected, kDetaching))
    return;
  g_state->api.Finalize();  // also ends the agent's subscription
  {
    std::lock_guard<std::mutex> lock(g_state->mu);
    g_state->link.store(kDetached);
  }
  g_state->wake.notify_all();
}

enum class Subscription { kHeld, kOther, kFailed };

// Subscribes to CUPTI's callbacks, which the real library allows one tool at a time: kOther
// (with `holder` named where CUPTI says) when the job's own profiler or an NVIDIA tool holds
// them. Calling CUPTI attaches it again when it was detached.
Subscription Subscribe(AgentState& s, CUpti_SubscriberHandle* handle, std::string* holder,
                       std::string* error) {
  CUptiResult r;
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  if (s.api.SubscribeV2 != nullptr) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "Expanse capture agent";
    params.oldSubscriberName = old_name;
    params.oldSubscriberSize = sizeof old_name - 1;
    r = s.api.SubscribeV2(handle, DetachAtApiExit, nullptr, &params);
  } else {
    r = s.api.Subscribe(handle, DetachAtApiExit, nullptr);
  }
  if (r == CUPTI_SUCCESS)
    return Subscription::kHeld;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    *holder = old_name[0] != '\0' ? old_name : "another CUPTI subscriber";
    return Subscription::kOther;
  }
  *error = s.api.ResultName(r);
  return Subscription::kFailed;
}

// Notes that another subscriber holds CUPTI; the agent then leaves CUPTI alone.
void Yield(AgentState& s, const std::string& holder) {
  if (s.yielded)
    return;
  s.yielded = true;
  s.agent->Note("yield", "capture paused while " + holder +
                             " holds CUPTI (the job's own profiler or an NVIDIA tool); it "
                             "resumes when that is gone");
}

// Once a cycle: whether CUPTI is the agent's to use now. Another subscriber means the job's
// profiler (or Nsight, cuda-gdb) is at work: the agent yields, touching neither kinds nor
// buffers, until it is gone; then the agent's own callbacks and kinds come back (the other tool
// may have replaced or turned them off).
bool MayUseCupti(AgentState& s) {
  if (!s.api.CanDetach())
    return true;  // an older CUPTI: no way to tell; the agent behaves as before
  CUpti_SubscriberHandle handle = nullptr;
  std::string holder, error;
  switch (Subscribe(s, &handle, &holder, &error)) {
    case Subscription::kOther:
      Yield(s, holder);
      return false;
    case Subscription::kFailed:
      s.agent->Note("subscribe", "cannot check for the job's own CUPTI user: cuptiSubscribe: " +
                                     error + "; CUPTI stays attached");
      s.detach = false;
      s.api.SubscribeV2 = nullptr;  // CanDetach() is false from now on: no more checks
      s.api.Subscribe = nullptr;
      return !s.yielded;
    case Subscription::kHeld:
      s.api.Unsubscribe(handle);  // held only for as long as a detach takes
      if (s.yielded) {
        s.yielded = false;
        s.link.store(kDetached);  // whatever the other tool left: register and enable again
      }
      return true;
  }
  return true;
}

// Turns the agent's buffers and kinds on in a CUPTI that was detached (or that another tool
// used). False when CUPTI refuses the buffers: this cycle is then not observed.
bool Attach(AgentState& s) {
  if (const CUptiResult r = s.api.RegisterCallbacks(BufferRequested, BufferCompleted);
      r != CUPTI_SUCCESS) {
    s.agent->Note("reattach", "capture paused: cuptiActivityRegisterCallbacks after a detach: " +
                                  s.api.ResultName(r));
    return false;
  }
  s.link.store(kAttached);
  s.recording = false;
  SetRecording(s, true);
  MeasureOffset(s);
  return true;
}

// The end of a burst: the agent's kinds off, their last records flushed, and CUPTI detached at
// the exit of the job's next CUDA call, waited for until `deadline` (called with `lock` held;
// CUPTI is called with it released). A job that makes no CUDA call by then pays nothing for an
// attached CUPTI either: the request is withdrawn and CUPTI stays. When the job's profiler took
// CUPTI during the burst, nothing is turned off: the kinds may be its own now.
void EndBurst(AgentState& s, std::unique_lock<std::mutex>& lock,
              std::chrono::steady_clock::time_point deadline) {
  lock.unlock();
  CUpti_SubscriberHandle handle = nullptr;
  bool requested = false;
  try {
    std::string holder, error;
    const Subscription subscription =
        s.detach ? Subscribe(s, &handle, &holder, &error) : Subscription::kFailed;
    if (subscription == Subscription::kOther) {
      Yield(s, holder);
    } else {
      SetRecording(s, false);
      if (s.detach)  // the burst's last records sit in a buffer that is not full
        s.api.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    if (subscription == Subscription::kHeld) {
      const CUptiResult driver = s.api.EnableDomain(1, handle, CUPTI_CB_DOMAIN_DRIVER_API);
      const CUptiResult runtime = s.api.EnableDomain(1, handle, CUPTI_CB_DOMAIN_RUNTIME_API);
      if (driver == CUPTI_SUCCESS || runtime == CUPTI_SUCCESS) {
        s.link.store(kDetachRequested);
        requested = true;
      } else {
        s.agent->Note("detach",
                      "CUPTI stays attached: cuptiEnableDomain: " + s.api.ResultName(driver));
        s.detach = false;
        s.api.Unsubscribe(handle);
      }
    } else if (subscription == Subscription::kFailed && s.detach) {
      s.agent->Note("detach", "CUPTI stays attached: cuptiSubscribe: " + error);
      s.detach = false;
    }
  } catch (...) {
  }
  lock.lock();
  if (!requested)
    return;
  s.wake.wait_until(lock, deadline, [&s] { return s.link.load() == kDetached || s.stopping; });
  int expected = kDetachRequested;
  if (s.link.compare_exchange_strong(expected, kAttached)) {
    lock.unlock();
    s.api.Unsubscribe(handle);  // no CUDA call came: withdrawn
    lock.lock();
    return;
  }
  // A job thread is detaching right now: it takes microseconds.
  s.wake.wait_for(lock, std::chrono::seconds(1), [&s] { return s.link.load() == kDetached; });
}

// The open trace's PcProfile gets `fn` (nothing when no trace is open).
void WithPcProfile(AgentState& s, const std::function<void(PcProfile&)>& fn) {
  s.agent->WithTrace([&fn](TraceSegment& segment) { fn(segment.pc_profile()); });
}

// Ends PC sampling: the last records into the open trace, every context disabled.
void StopPcSampling(AgentState& s) {
  if (!s.pc || !s.pc->active())
    return;
  PcProfile drained;
  s.pc->Stop(drained);
  WithPcProfile(s, [&drained](PcProfile& p) { p.Merge(drained); });
  if (s.pc->names_exhausted()) {
    s.agent->Note("pc names",
                  "PC sampling off: CUPTI named more distinct functions than the "
                  "agent keeps");
    s.pc_off_reason = "CUPTI named more distinct functions than the agent keeps";
    s.pc.reset();
  }
}

// Once a tick, before the CaptureAgent's: what CUPTI sampled goes into the open trace, and
// sampling ends when the trace is about to close (its last records belong in it), when CUPTI is
// not the agent's this cycle (another tool took it, or a burst ended: detaching with contexts
// still sampled is not something CUPTI documents), or when no trace is open.
void DrainPcSampling(AgentState& s, bool attached_all_cycle) {
  if (!s.pc || !s.pc->active())
    return;
  if (!attached_all_cycle || !s.agent->Tracing() || s.agent->TraceEndsBy(UnixMs() + 100)) {
    StopPcSampling(s);
    return;
  }
  PcProfile drained;
  s.pc->Drain(drained);
  WithPcProfile(s, [&drained](PcProfile& p) { p.Merge(drained); });
  if (s.pc->names_exhausted())
    StopPcSampling(s);  // the bound on CUPTI's name strings: no more for this process
}

// After the CaptureAgent's tick: a trace that opened starts PC sampling on the job's active
// primary contexts (tried again each tick while the job has none yet); a node that does not
// allow it says so in the segment, once.
void StartPcSampling(AgentState& s, bool attached) {
  if (!s.agent->Tracing()) {
    s.pc_tried = false;
    return;
  }
  if (s.pc_tried || !attached)
    return;
  if (!s.pc) {
    s.pc_tried = true;
    WithPcProfile(s, [&s](PcProfile& p) { p.SetState(s.pc_off_state, s.pc_off_reason); });
    return;
  }
  const PcSampler::StartResult started =
      s.pc->Start([&s](CUptiResult r) { return s.api.ResultName(r); });
  if (started.contexts > 0) {
    s.pc_tried = true;
    WithPcProfile(s, [&s](PcProfile& p) {
      p.SetState(PcSamplingState::kSampled);
      p.SetPeriod(s.pc->period());
    });
    if (!started.error.empty())
      s.agent->Note("pc context", "PC sampling left out a context: " + started.error);
    return;
  }
  if (started.error.empty())
    return;  // no active context yet: the next tick looks again
  s.pc_tried = true;
  const bool restricted = IsRestriction(started.first_error);
  WithPcProfile(s, [&](PcProfile& p) {
    p.SetState(restricted ? PcSamplingState::kRestricted : PcSamplingState::kUnavailable,
               started.error);
  });
  s.agent->Note(restricted ? "pc restricted" : "pc unavailable",
                std::string(restricted ? "PC sampling not allowed here, Activity and NVTX only: "
                                       : "PC sampling failed: ") +
                    started.error);
}

// Each cycle (a tick): record for the budget's share of it, CUPTI off (detached where it can
// be) for the rest, then flush, learn the record rate, and let the CaptureAgent close windows
// and traces.
void* WorkerMain(void*) {
  AgentState& s = *g_state;
  std::unique_lock<std::mutex> lock(s.mu);
  const auto stopping = [&s] { return s.stopping; };
  while (!s.stopping) {
    const auto cycle_start = std::chrono::steady_clock::now();
    const uint64_t cycle_ms = static_cast<uint64_t>(s.tick.count());
    uint64_t on_ms = cycle_ms;
    lock.unlock();
    bool observing = false;
    try {
      on_ms = s.budget.OnMs(cycle_ms, s.agent->Tracing());
      observing = MayUseCupti(s) && (s.link.load() == kAttached || Attach(s));
    } catch (...) {
    }
    lock.lock();
    if (observing && on_ms < cycle_ms) {
      if (s.wake.wait_until(lock, cycle_start + std::chrono::milliseconds(on_ms), stopping))
        break;
      lock.unlock();
      try {
        StopPcSampling(s);  // before CUPTI may be detached
      } catch (...) {
      }
      lock.lock();
      // Never detach under contexts still sampled (a stop that failed half way): CUPTI stays.
      if (!s.pc || !s.pc->active())
        EndBurst(s, lock, cycle_start + s.tick);
    }
    if (s.wake.wait_until(lock, cycle_start + s.tick, stopping))
      break;
    lock.unlock();
    try {
      // Checked again right before the flush: a profiler that took CUPTI during the cycle owns
      // the buffers a flush would complete.
      if (observing && s.link.load() == kAttached && !MayUseCupti(s))
        observing = false;
      if (observing) {
        if (s.link.load() == kAttached) {
          if (!MeasureOffset(s))
            s.agent->Note("timestamp", "cuptiGetTimestamp failed: timestamps may drift");
          const uint32_t flag = s.recording ? 0 : CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
          if (const CUptiResult r = s.api.FlushAll(flag); r != CUPTI_SUCCESS)
            s.agent->Note("flush", "cuptiActivityFlushAll: " + s.api.ResultName(r));
        }
        s.budget.Observe(s.records.exchange(0, std::memory_order_relaxed), on_ms);
        if (on_ms < cycle_ms)
          s.agent->OnUnobserved(cycle_ms - on_ms);
      } else {
        s.agent->OnUnobserved(cycle_ms);
      }
      const bool attached = observing && s.link.load() == kAttached;
      DrainPcSampling(s, attached && on_ms == cycle_ms);
      s.agent->Tick();
      StartPcSampling(s, attached);
    } catch (...) {
      // Out of memory, most likely: this window is lost, the job goes on.
    }
    if (observing && s.link.load() == kAttached)
      SetRecording(s, true);  // the next cycle starts with a burst (a detached CUPTI: Attach)
    lock.lock();
  }
  lock.unlock();
  try {
    if (!s.abandoned.load())
      StopPcSampling(s);  // the open trace keeps its last records; contexts released
    if (!s.abandoned.load() && !s.yielded && s.link.load() == kAttached)
      s.api.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (!s.abandoned.load())
      s.agent->Finish();
  } catch (...) {
  }
  lock.lock();
  s.stopped = true;
  s.wake.notify_all();
  return nullptr;
}

// At exit: the worker's last flush and spool, waited for at most two seconds.
void AtExit() {
  if (!InOwnerProcess())
    return;
  std::unique_lock<std::mutex> lock(g_state->mu);
  g_state->stopping = true;
  g_state->wake.notify_all();
  if (!g_state->wake.wait_for(lock, std::chrono::seconds(2), [] { return g_state->stopped; }))
    g_state->abandoned.store(true);
}

// The directory this library was loaded from: libcupti of the same CUPTI archive sits beside it.
std::string OwnDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnDirectory), &info) == 0 || info.dli_fname == nullptr)
    return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// A small file of /proc as text ("" when unreadable).
std::string ReadProcText(const char* path) {
  // Non-blocking: this runs in the job's thread (InitializeInjection), and a FIFO named by the
  // test variable must not hold it.
  const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return "";
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while (text.size() < (1 << 16) && (n = read(fd, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<size_t>(n));
  close(fd);
  return text;
}

// Whether Phase B windows sample PCs here, decided once: the operator's switch, the node's
// profiling restriction for this process, and the libraries' entry points.
void SetUpPcSampling(AgentState& s) {
  if (EnvMs("EXPANSE_CAPTURE_PC_SAMPLING", 1, 0, 1) == 0) {
    s.pc_off_reason = "turned off (EXPANSE_CAPTURE_PC_SAMPLING=0)";
    return;
  }
  const char* params_env = std::getenv("EXPANSE_NVIDIA_PARAMS_FILE");  // tests: a node's file
  const std::string refusal = PcSamplingRefusal(
      ReadProcText(params_env != nullptr && *params_env == '/' ? params_env
                                                               : "/proc/driver/nvidia/params"),
      ReadProcText("/proc/self/status"));
  if (!refusal.empty()) {
    s.pc_off_state = PcSamplingState::kRestricted;
    s.pc_off_reason = refusal;
    s.agent->Note("pc restricted",
                  "PC sampling not allowed here, Activity and NVTX only: " + refusal);
    return;
  }
  std::string error;
  std::optional<CuptiPcSamplingApi> cupti = LoadPcSamplingApi(s.api.path, &error);
  std::optional<CudaContextApi> cuda = cupti ? LoadCudaContextApi(&error) : std::nullopt;
  if (!cupti || !cuda) {
    s.pc_off_reason = "no PC sampling: " + error;
    s.agent->Note("pc load", "PC sampling off: " + error);
    return;
  }
  PcSamplerOptions options;
  options.period = static_cast<uint32_t>(EnvMs("EXPANSE_CAPTURE_PC_PERIOD", 0, 5, 31));
  s.pc = std::make_unique<PcSampler>(*cupti, *cuda, options);
}

void Start() {
  const char* control_env = std::getenv("EXPANSE_CONTROL_DIR");
  const std::string control =
      control_env != nullptr && *control_env == '/' ? control_env : kDefaultControlDir;
  struct stat st {};
  if (stat((control + "/disabled").c_str(), &st) == 0)
    return;  // the node's operator turned in-process capture off
  AgentOptions options;
  options.control_dir = control;
  options.spool_dir = control + "/" + kCaptureDirName;
  options.window_ms = EnvMs("EXPANSE_CAPTURE_WINDOW_MS", 10000, 100, 600000);
  options.trace_window_ms = EnvMs("EXPANSE_CAPTURE_TRACE_MS", 10000, 100, 60000);
  ProcessIdentity process = CurrentProcess([](const char* name) { return std::getenv(name); });
  if (!SafeJobId(process.job_id))
    return;  // not a SLURM task: nothing would ever collect what it wrote
  auto* agent = new CaptureAgent(options, process, UnixMs);

  const char* override_path = std::getenv("EXPANSE_AGENT_CUPTI");
  const std::string major = std::to_string(CUDA_VERSION / 1000);
  std::string error;
  // The job's own libcupti when it has one loaded (see LoadedLibcupti), else the one of the
  // agent's CUPTI archive beside it, else the loader's.
  std::optional<CuptiActivityApi> api =
      LoadCuptiActivityApi({override_path != nullptr ? override_path : "", LoadedLibcupti(major),
                            OwnDirectory() + "/libcupti.so." + major, "libcupti.so." + major},
                           &error);
  if (!api) {
    agent->Note("load", "capture off: no usable libcupti (" + error + ")");
    return;
  }
  auto* state = new AgentState();
  state->api = *api;
  state->agent = agent;
  state->owner = getpid();
  state->link.store(kAttached);
  state->detach = api->CanDetach() && EnvMs("EXPANSE_CAPTURE_DETACH", 1, 0, 1) == 1;
  state->tick = std::chrono::milliseconds(
      std::min<uint64_t>({1000, options.window_ms, options.trace_window_ms}));
  if (!MeasureOffset(*state))
    agent->Note("timestamp", "cuptiGetTimestamp failed: timestamps may be wrong");
  g_state = state;

  if (const CUptiResult r = api->RegisterCallbacks(BufferRequested, BufferCompleted);
      r != CUPTI_SUCCESS) {
    agent->Note("register", "capture off: cuptiActivityRegisterCallbacks: " + api->ResultName(r));
    return;
  }
  // NVTX reaches CUPTI only through NVTX's own injection variable; a job's profiler that set
  // it already keeps it.
  setenv("NVTX_INJECTION64_PATH", api->path.c_str(), /*overwrite=*/0);
  std::vector<CUpti_ActivityKind> enabled;
  for (const auto& [kind, name] :
       {std::pair{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels"},
        std::pair{CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy"},
        std::pair{CUPTI_ACTIVITY_KIND_MEMSET, "memset"},
        std::pair{CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization"},
        std::pair{CUPTI_ACTIVITY_KIND_MARKER, "nvtx"}}) {
    if (const CUptiResult r = api->Enable(kind); r != CUPTI_SUCCESS)
      agent->Note(std::string("enable ") + name,
                  std::string(name) + " not captured: cuptiActivityEnable: " + api->ResultName(r));
    else
      enabled.push_back(kind);
  }

  state->kinds = enabled;
  state->budget = RecordBudget(BudgetOptions{
      .always_on_fraction =
          static_cast<double>(EnvMs("EXPANSE_CAPTURE_BUDGET_PERMILLE", 1000, 1, 1000)) / 1000.0,
      .trace_fraction =
          static_cast<double>(EnvMs("EXPANSE_CAPTURE_TRACE_BUDGET_PERMILLE", 1000, 1, 1000)) /
          1000.0,
      .record_cost_ns = EnvMs("EXPANSE_CAPTURE_RECORD_COST_NS", 2300, 1, 1000000),
  });
  SetUpPcSampling(*state);
  // The worker blocks every signal, so the job's signal handling is exactly what it was.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t worker;
  const int created = pthread_create(&worker, nullptr, WorkerMain, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (created != 0) {
    // Nobody would flush: CUPTI stops recording, so the job pays nothing for it.
    for (CUpti_ActivityKind kind : enabled)
      api->Disable(kind);
    agent->Note("thread", "capture off: no worker thread");
    return;
  }
  pthread_detach(worker);
  std::atexit(AtExit);
}

}  // namespace
}  // namespace expanse::capture

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void);

// Called by the CUDA driver, once per process. Always reports success: what the agent could not
// do is its own business, never the job's.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (expanse::capture::g_initialised.exchange(true))
    return 1;
  try {
    expanse::capture::Start();
  } catch (...) {
  }
  return 1;
}
