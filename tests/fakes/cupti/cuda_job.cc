// A stand-in for a job's CUDA process: it loads libcuda.so.1 the way the CUDA runtime does
// (dlopen by soname, so LD_LIBRARY_PATH picks the fake), calls cuInit (where the driver injects
// CUDA_INJECTION64_PATH), then works for a while and prints a result that depends only on its
// arguments, so a test can check that an injected agent changed nothing the job does.
//
//   expanse-fake-cuda-job [--ms N] [--threads N] [--fork] [--exec] [--launches N]
//                         [--report-cupti] [--profiler FROM_MS:FOR_MS]
//
// --threads: N threads call cuInit at once (the driver injects once per process).
// --fork: a child is forked after cuInit and does the same work (a forked child cannot use CUDA;
// the agent must leave it alone). Exit status 0 unless the work itself fails.
// --exec: once done, the process execs this program again with half the --ms (same pid, a new
// image: libcuda loaded and injected afresh at its cuInit, as a job's launcher script does).
// --launches: N CUDA calls (cuCtxSynchronize) every 10 ms, as a launch-bound loop makes.
// --report-cupti: prints to stderr how many of those calls found CUPTI attached or detached
// (the fake libcupti counts them; an attached CUPTI is what costs a real job time per call).
// --profiler: the job's own CUPTI profiler, as torch.profiler's Kineto uses it: from FROM_MS it
// subscribes (cuptiSubscribe_v2, "kineto"), registers its own activity buffers and records
// kernels; after FOR_MS it flushes, turns them off and unsubscribes, then prints to stderr what
// it got: `profiler subscribe=<CUptiResult> kernels=<records its buffers received>`.

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using CuInit = int (*)(unsigned int);
using CuCall = int (*)();

// The job's own profiler (--profiler), on the job's copy of libcupti.
class JobProfiler {
 public:
  void Start() {
    void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (cupti == nullptr)
      return;
    subscribe_ = reinterpret_cast<decltype(subscribe_)>(dlsym(cupti, "cuptiSubscribe_v2"));
    unsubscribe_ = reinterpret_cast<decltype(unsubscribe_)>(dlsym(cupti, "cuptiUnsubscribe"));
    register_ =
        reinterpret_cast<decltype(register_)>(dlsym(cupti, "cuptiActivityRegisterCallbacks"));
    enable_ = reinterpret_cast<decltype(enable_)>(dlsym(cupti, "cuptiActivityEnable"));
    disable_ = reinterpret_cast<decltype(disable_)>(dlsym(cupti, "cuptiActivityDisable"));
    flush_ = reinterpret_cast<decltype(flush_)>(dlsym(cupti, "cuptiActivityFlushAll"));
    next_ = reinterpret_cast<decltype(next_)>(dlsym(cupti, "cuptiActivityGetNextRecord"));
    if (!subscribe_ || !unsubscribe_ || !register_ || !enable_ || !disable_ || !flush_ || !next_)
      return;
    struct {
      size_t structSize;
      const char* subscriberName;
      char* oldSubscriberName;
      size_t oldSubscriberSize;
    } params{sizeof params, "kineto", nullptr, 0};
    subscribed_ = subscribe_(&subscriber_, nullptr, nullptr, &params);
    if (subscribed_ != 0)
      return;  // Kineto goes on without callbacks; its activities would still be its own
    register_(Requested, Completed);
    enable_(kConcurrentKernel);
    on_ = true;
  }
  void Stop() {
    if (on_) {
      flush_(1);
      disable_(kConcurrentKernel);
      flush_(1);
      unsubscribe_(subscriber_);
      on_ = false;
    }
    std::fprintf(stderr, "profiler subscribe=%d kernels=%llu\n", subscribed_,
                 static_cast<unsigned long long>(kernels_.load()));
  }

 private:
  static constexpr int kConcurrentKernel = 10;  // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  static void Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 16));
    *size = *buffer != nullptr ? 1 << 16 : 0;
    *max_records = 0;
  }
  static void Completed(void*, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    struct Record {
      int kind;
    }* record = nullptr;
    while (next_(buffer, valid, reinterpret_cast<void**>(&record)) == 0 && record != nullptr) {
      if (record->kind == kConcurrentKernel)
        ++kernels_;
    }
    std::free(buffer);
  }

  static inline std::atomic<uint64_t> kernels_{0};
  static inline int (*next_)(uint8_t*, size_t, void**) = nullptr;
  int (*subscribe_)(void**, void*, void*, void*) = nullptr;
  int (*unsubscribe_)(void*) = nullptr;
  int (*register_)(void (*)(uint8_t**, size_t*, size_t*),
                   void (*)(void*, uint32_t, uint8_t*, size_t, size_t)) = nullptr;
  int (*enable_)(int) = nullptr;
  int (*disable_)(int) = nullptr;
  int (*flush_)(uint32_t) = nullptr;
  void* subscriber_ = nullptr;
  int subscribed_ = -1;
  bool on_ = false;
};

uint64_t Work(int ms) {
  // A checksum over a fixed amount of arithmetic per millisecond requested: the same result
  // however fast the machine is.
  uint64_t x = 1469598103934665603ULL;
  for (int i = 0; i < ms * 1000; ++i)
    x = (x ^ static_cast<uint64_t>(i)) * 1099511628211ULL;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  int ms = 1000;
  int threads = 1;
  bool fork_child = false;
  bool exec_again = false;
  int launches = 0;
  bool report_cupti = false;
  int profiler_from = -1, profiler_for = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
      ms = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--fork") == 0) {
      fork_child = true;
    } else if (std::strcmp(argv[i], "--exec") == 0) {
      exec_again = true;
    } else if (std::strcmp(argv[i], "--launches") == 0 && i + 1 < argc) {
      launches = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--report-cupti") == 0) {
      report_cupti = true;
    } else if (std::strcmp(argv[i], "--profiler") == 0 && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%d:%d", &profiler_from, &profiler_for) == 2) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--ms N] [--threads N] [--fork] [--exec] [--launches N] "
                   "[--report-cupti] [--profiler FROM_MS:FOR_MS]\n",
                   argv[0]);
      return 2;
    }
  }
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    std::fprintf(stderr, "libcuda.so.1: %s\n", dlerror());
    return 3;
  }
  auto cu_init = reinterpret_cast<CuInit>(dlsym(cuda, "cuInit"));
  if (cu_init == nullptr)
    return 3;
  std::vector<int> results(static_cast<size_t>(threads), -1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] { results[static_cast<size_t>(t)] = cu_init(0); });
  for (auto& w : workers)
    w.join();
  std::printf("cuInit=%d\n", results[0]);
  pid_t child = -1;
  if (fork_child) {
    std::fflush(stdout);  // else the child would print the parent's buffered lines again
    child = fork();
    if (child == 0) {
      std::printf("child work=%llu\n", static_cast<unsigned long long>(Work(ms / 2)));
      std::fflush(stdout);
      _exit(0);
    }
  }
  auto cu_call = reinterpret_cast<CuCall>(dlsym(cuda, "cuCtxSynchronize"));
  const auto begin = std::chrono::steady_clock::now();
  const auto until = begin + std::chrono::milliseconds(ms);
  uint64_t sum = 0;
  JobProfiler profiler;
  enum { kBefore, kProfiling, kDone } profiling = profiler_from >= 0 ? kBefore : kDone;
  while (std::chrono::steady_clock::now() < until) {
    sum += Work(10);
    for (int l = 0; l < launches && cu_call != nullptr; ++l)
      cu_call();
    const auto elapsed = std::chrono::steady_clock::now() - begin;
    if (profiling == kBefore && elapsed >= std::chrono::milliseconds(profiler_from)) {
      profiler.Start();
      profiling = kProfiling;
    } else if (profiling == kProfiling &&
               elapsed >= std::chrono::milliseconds(profiler_from + profiler_for)) {
      profiler.Stop();
      profiling = kDone;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (profiling == kProfiling)
    profiler.Stop();
  if (report_cupti) {
    using Counts = void (*)(uint64_t*, uint64_t*);
    uint64_t attached = 0, detached = 0;
    if (auto counts = reinterpret_cast<Counts>(dlsym(RTLD_DEFAULT, "cuptiFakeCallCounts")))
      counts(&attached, &detached);
    std::fprintf(stderr, "cupti calls attached=%llu detached=%llu\n",
                 static_cast<unsigned long long>(attached),
                 static_cast<unsigned long long>(detached));
  }
  std::printf("work=%llu\n", static_cast<unsigned long long>(Work(ms)));
  if (child > 0) {
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("child exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  if (exec_again) {
    std::fflush(stdout);
    const std::string half = std::to_string(ms / 2);
    char* again[] = {argv[0], const_cast<char*>("--ms"), const_cast<char*>(half.c_str()), nullptr};
    execv("/proc/self/exe", again);
    std::perror("execv");
    return 5;
  }
  return sum == 0 ? 4 : 0;  // `sum` only keeps the loop from being optimised away
}
