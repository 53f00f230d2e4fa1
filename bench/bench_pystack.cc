// Python stacks: what the native CPython reader and the daemon's collector cost, measured on
// real interpreters in one run (issue 6; figures and the command in docs/performance.md):
//
//  1. Per sample: NativeReader::Sample on three targets (a busy loop a few frames deep, eight
//     threads asleep in different functions, a 100-deep recursion) for Debian's python3.11 and
//     every pyenv CPython found; wall and thread CPU time, the first (cold) sample apart.
//  2. Slowdown of a CPU-bound Python program sampled at 10 Hz: phases A/B/A/B, A not sampled,
//     B sampled by a thread of this process; the program reports its own iteration count.
//     The same with py-spy (the daemon's fallback: one `py-spy dump` per sample) if on PATH.
//  3. The daemon's whole collector (agent::PyStacksCollector) on a job with that program, at
//     10 Hz and at the default 1 Hz, and with no job at all (the cost of its ticks alone).
//
// A plain program, not a Google Benchmark: the phases run for fixed wall-clock times and the
// targets are child processes. It prints figures and asserts nothing about them.

#include <glob.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "agent/py_stacks.h"
#include "core/clock.h"
#include "pystack/native_reader.h"
#include "pystack/pyspy_source.h"
// The tests' child-process helper (header-only): a Python child with a pipe on its fd 3.
#include "pystack/python_process_for_test.h"

namespace {

using expanse::pystack::NativeReader;
using expanse::pystack::ProcessStacks;
using expanse::pystack::StackSource;
using expanse::pystack::test_util::ChildProcess;
using Seconds = std::chrono::duration<double>;

constexpr int kSamplesPerTarget = 2000;
constexpr auto kPhaseLength = std::chrono::seconds(10);
constexpr auto kCollectorLength = std::chrono::seconds(20);
constexpr auto kCollectorWarmUp = std::chrono::seconds(3);
constexpr auto kSampleInterval = std::chrono::milliseconds(100);  // 10 Hz

// A CPU-bound program five frames deep (<module>, main, loop, work, leaf) that writes
// "<time.monotonic()> <time.process_time()> <iterations>" to fd 3 about every 0.5 s. time.monotonic
// is CLOCK_MONOTONIC, the clock std::chrono::steady_clock reads, so its lines can be placed in this
// program's phases. %-formatting keeps it valid on every Python 3.
constexpr char kBusyScript[] = R"(import os, time
out = os.fdopen(3, "w", 1)
def leaf(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
def work():
    return leaf(200)
def loop():
    count = 0
    out.write("ready\n")
    next_report = time.monotonic() + 0.5
    while True:
        work()
        count += 1
        if count % 32 == 0:
            now = time.monotonic()
            if now >= next_report:
                out.write("%.6f %.6f %d\n" % (now, time.process_time(), count))
                next_report = now + 0.5
def main():
    loop()
main()
)";

// The main thread and eight threads, each asleep in a function of its own.
std::string SleepersScript() {
  std::string script = "import os, threading, time\nout = os.fdopen(3, 'w', 1)\n";
  script += "barrier = threading.Barrier(9)\n";
  for (int i = 0; i < 8; ++i) {
    script += fmt::format(
        "def sleeper_{}():\n    barrier.wait()\n    while True:\n        time.sleep(3600)\n", i);
  }
  for (int i = 0; i < 8; ++i) {
    script += fmt::format("threading.Thread(target=sleeper_{}, daemon=True).start()\n", i);
  }
  script += "barrier.wait()\ntime.sleep(0.2)\nout.write('ready\\n')\n";
  script += "while True:\n    time.sleep(3600)\n";
  return script;
}

// 100 frames of `recurse` under <module>, asleep at the bottom.
constexpr char kRecursionScript[] = R"(import os, time
out = os.fdopen(3, "w", 1)
def recurse(depth):
    if depth == 1:
        out.write("ready\n")
        while True:
            time.sleep(3600)
    return recurse(depth - 1)
recurse(100)
)";

double SteadySeconds() {
  return Seconds(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double MicrosOf(const timeval& t) {
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
}

// User + system CPU from getrusage (RUSAGE_THREAD or RUSAGE_CHILDREN), in µs. On this VM's
// kernel it advances in whole scheduler ticks (4 ms), so it is used for totals over many
// samples; single calls are timed with the thread's CPU clock, which counts nanoseconds.
double RusageCpuMicros(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return MicrosOf(usage.ru_utime) + MicrosOf(usage.ru_stime);
}

double ClockMicros(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double ThreadCpuMicros() { return ClockMicros(CLOCK_THREAD_CPUTIME_ID); }
double ProcessCpuMicros() { return ClockMicros(CLOCK_PROCESS_CPUTIME_ID); }

std::string LoadAverage() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

struct Spread {
  double median = 0;
  double p90 = 0;
  double max = 0;
};

Spread SpreadOf(std::vector<double> values) {
  if (values.empty()) {
    return {};
  }
  std::sort(values.begin(), values.end());
  const auto at = [&values](double q) {
    return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))];
  };
  return {at(0.5), at(0.9), values.back()};
}

int MinorVersionOf(const std::string& path) {
  return std::atoi(path.c_str() + path.rfind("python3.") + 8);
}

// Debian's interpreter first, then every pyenv CPython (python3.N, not python3.Nm or -config)
// by version.
std::vector<std::string> FindInterpreters() {
  std::vector<std::string> pyenv;
  glob_t matches{};
  if (glob("/root/.pyenv/versions/*/bin/python3.*", 0, nullptr, &matches) == 0) {
    const std::regex name(R"(.*/bin/python3\.[0-9]+)");
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
      const std::string path = matches.gl_pathv[i];
      if (std::regex_match(path, name) && access(path.c_str(), X_OK) == 0) {
        pyenv.push_back(path);
      }
    }
  }
  globfree(&matches);
  std::stable_sort(pyenv.begin(), pyenv.end(), [](const std::string& a, const std::string& b) {
    return MinorVersionOf(a) < MinorVersionOf(b);
  });
  std::vector<std::string> found;
  if (access(expanse::pystack::test_util::kDebianPython, X_OK) == 0) {
    found.emplace_back(expanse::pystack::test_util::kDebianPython);
  }
  found.insert(found.end(), pyenv.begin(), pyenv.end());
  return found;
}

// Starts `python -c script` and waits for its "ready" line; false (with a message) if not.
bool StartTarget(ChildProcess& child, const std::string& python, const std::string& script) {
  if (!child.Start({python, "-c", script})) {
    fmt::print("  {}: could not start\n", python);
    return false;
  }
  const std::optional<std::string> line = child.ReadLine(std::chrono::seconds(60));
  if (line != "ready") {
    fmt::print("  {}: target did not become ready\n", python);
    return false;
  }
  return true;
}

std::string Shape(const ProcessStacks& stacks) {
  std::size_t deepest = 0;
  for (const auto& thread : stacks.threads) {
    deepest = std::max(deepest, thread.frames.size());
  }
  return fmt::format("{}/{}", stacks.threads.size(), deepest);
}

// --- 1. Cost per sample ---------------------------------------------------------------------

// One target: prints its row, or the error of its first sample; false when the interpreter is
// one the reader does not support (its other targets would say the same).
bool MeasurePerSample(const std::string& python, const char* target_name,
                      const std::string& script) {
  ChildProcess child;
  if (!StartTarget(child, python, script)) {
    return true;
  }
  NativeReader reader;  // fresh: the cold sample includes ELF discovery
  const auto cold_started = std::chrono::steady_clock::now();
  const double cold_cpu_started = ThreadCpuMicros();
  const expanse::Result<ProcessStacks> cold = reader.Sample(child.pid());
  const double cold_cpu = ThreadCpuMicros() - cold_cpu_started;
  const double cold_wall =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - cold_started)
          .count();
  if (!cold.ok()) {
    fmt::print("  {:<10} {}\n", target_name, cold.status().message());
    return cold.status().reason() != "unsupported_version";
  }
  (void)reader.Sample(child.pid());  // warm-up

  std::vector<double> wall_us, cpu_us;
  wall_us.reserve(kSamplesPerTarget);
  cpu_us.reserve(kSamplesPerTarget);
  int errors = 0;
  ProcessStacks last = *cold;
  const double rusage_started = RusageCpuMicros(RUSAGE_THREAD);
  for (int i = 0; i < kSamplesPerTarget; ++i) {
    const double cpu_started = ThreadCpuMicros();
    const auto started = std::chrono::steady_clock::now();
    expanse::Result<ProcessStacks> stacks = reader.Sample(child.pid());
    const auto ended = std::chrono::steady_clock::now();
    cpu_us.push_back(ThreadCpuMicros() - cpu_started);
    wall_us.push_back(std::chrono::duration<double, std::micro>(ended - started).count());
    if (stacks.ok()) {
      last = std::move(*stacks);
    } else {
      ++errors;
    }
  }
  // The loop's own clock reads are in this mean too (a few µs a sample).
  const double rusage_mean = (RusageCpuMicros(RUSAGE_THREAD) - rusage_started) / kSamplesPerTarget;
  const Spread wall = SpreadOf(wall_us);
  const Spread cpu = SpreadOf(cpu_us);
  fmt::print(
      "{:<8} {:<10} {:>6} {:>7.0f}/{:<6.0f} {:>6.0f} {:>6.0f} {:>7.0f} {:>6.0f} {:>6.0f} {:>7.0f} "
      "{:>7.0f} {:>4}\n",
      last.python_version, target_name, Shape(last), cold_wall, cold_cpu, wall.median, wall.p90,
      wall.max, cpu.median, cpu.p90, cpu.max, rusage_mean, errors);
  return true;
}

void PerSampleSection() {
  fmt::print(
      "\n== 1. NativeReader::Sample, {} back-to-back samples per target after one cold and "
      "one warm-up sample (µs) ==\n",
      kSamplesPerTarget);
  fmt::print("{:<8} {:<10} {:>6} {:>14} {:>6} {:>6} {:>7} {:>6} {:>6} {:>7} {:>7} {:>4}\n",
             "python", "target", "thr/fr", "cold wall/cpu", "wall50", "wall90", "wallmax", "cpu50",
             "cpu90", "cpumax", "ru mean", "err");
  fmt::print(
      "(thr/fr: threads/deepest frames; cpu: CLOCK_THREAD_CPUTIME_ID around each call; ru mean: "
      "getrusage(RUSAGE_THREAD) over all calls / {})\n",
      kSamplesPerTarget);
  const std::vector<std::pair<const char*, std::string>> targets = {
      {"busy", kBusyScript}, {"8 sleepers", SleepersScript()}, {"recursion", kRecursionScript}};
  for (const std::string& python : FindInterpreters()) {
    fmt::print("-- {}\n", python);
    for (const auto& [name, script] : targets) {
      if (!MeasurePerSample(python, name, script)) {
        break;
      }
    }
  }
}

// --- 2. Slowdown of a busy target -----------------------------------------------------------

// One "<time> <cpu time> <count>" report of the busy target.
struct Report {
  double time = 0;
  double cpu = 0;
  double count = 0;
};

std::optional<Report> ParseReport(const std::string& line) {
  std::istringstream in(line);
  Report report;
  if (!(in >> report.time >> report.cpu >> report.count)) {
    return std::nullopt;
  }
  return report;
}

// The busy target's iterations per second of wall time, and per second of its own CPU time
// (which tells a slower interpreter from one that got less of the shared CPUs).
struct Rate {
  double per_second = -1;
  double per_cpu_second = -1;
};

// Reads the target's reports until `end` (steady seconds) and returns its rate between the
// first report at or after `start` and the last one before `end`; -1s if it stopped reporting.
Rate RateBetween(ChildProcess& target, double start, double end) {
  std::optional<Report> first, last;
  while (SteadySeconds() < end) {
    const std::optional<std::string> line = target.ReadLine(std::chrono::seconds(5));
    if (!line) {
      return {};
    }
    const std::optional<Report> report = ParseReport(*line);
    if (!report || report->time < start || report->time > end) {
      continue;
    }
    if (!first) {
      first = report;
    } else {
      last = report;
    }
  }
  if (!first || !last || last->time <= first->time || last->cpu <= first->cpu) {
    return {};
  }
  const double iterations = last->count - first->count;
  return {iterations / (last->time - first->time), iterations / (last->cpu - first->cpu)};
}

// Samples `pid` with `source` every 100 ms on its own thread until told to stop; the CPU it
// used is its thread's plus what the children it reaped used (py-spy runs as a child).
class PeriodicSampler {
 public:
  PeriodicSampler(StackSource& source, pid_t pid) : source_(source), pid_(pid) {
    children_cpu_started_ = RusageCpuMicros(RUSAGE_CHILDREN);
    thread_ = std::thread([this] { Run(); });
  }
  // Stops and returns the CPU used in µs.
  double Finish() {
    stop_ = true;
    thread_.join();
    return thread_cpu_ + (RusageCpuMicros(RUSAGE_CHILDREN) - children_cpu_started_);
  }
  int samples() const { return samples_; }
  int errors() const { return errors_; }
  // The thread's CPU inside the Sample calls alone (the rest is sleeping and waking up).
  double in_sample_cpu() const { return in_sample_cpu_; }

 private:
  void Run() {
    const double cpu_started = ThreadCpuMicros();
    auto next = std::chrono::steady_clock::now();
    while (!stop_) {
      const double sample_started = ThreadCpuMicros();
      const bool ok = source_.Sample(pid_).ok();
      in_sample_cpu_ += ThreadCpuMicros() - sample_started;
      ++(ok ? samples_ : errors_);
      next += kSampleInterval;
      std::this_thread::sleep_until(next);
    }
    thread_cpu_ = ThreadCpuMicros() - cpu_started;
  }

  StackSource& source_;
  pid_t pid_;
  std::atomic<bool> stop_{false};
  double children_cpu_started_ = 0;
  double thread_cpu_ = 0;
  double in_sample_cpu_ = 0;
  int samples_ = 0;
  int errors_ = 0;
  std::thread thread_;
};

void RunPhases(const std::string& label, ChildProcess& target, StackSource& source) {
  fmt::print("{}:\n", label);
  fmt::print("  {:<6} {:>10} {:>12} {:>14} {:>12} {:>14} {:>8} {:>6}\n", "phase", "iter/s",
             "iter/cpu-s", "sampler cpu %", "cpu µs/smp", "in Sample µs", "samples", "errors");
  fmt::print(
      "  (cpu µs/smp: the sampler thread's CPU per sample, waking up included; in Sample µs: "
      "inside NativeReader::Sample only)\n");
  double a_wall = 0, b_wall = 0, a_cpu = 0, b_cpu = 0, sampler_cpu = 0, sampled_time = 0;
  for (const char phase : {'A', 'B', 'A', 'B'}) {
    const double start = SteadySeconds();
    const double end = start + Seconds(kPhaseLength).count();
    std::optional<PeriodicSampler> sampler;
    if (phase == 'B') {
      sampler.emplace(source, target.pid());
    }
    const Rate rate = RateBetween(target, start, end);
    if (!sampler) {
      a_wall += rate.per_second;
      a_cpu += rate.per_cpu_second;
      fmt::print("  {:<6} {:>10.0f} {:>12.0f}\n", phase, rate.per_second, rate.per_cpu_second);
      continue;
    }
    const double cpu = sampler->Finish();
    const double elapsed = SteadySeconds() - start;
    sampler_cpu += cpu;
    sampled_time += elapsed;
    b_wall += rate.per_second;
    b_cpu += rate.per_cpu_second;
    const int taken = sampler->samples() + sampler->errors();
    fmt::print("  {:<6} {:>10.0f} {:>12.0f} {:>14.3f} {:>12.0f} {:>14.0f} {:>8} {:>6}\n", phase,
               rate.per_second, rate.per_cpu_second, cpu / (elapsed * 1e6) * 100,
               taken > 0 ? cpu / taken : 0.0, taken > 0 ? sampler->in_sample_cpu() / taken : 0.0,
               sampler->samples(), sampler->errors());
  }
  fmt::print(
      "  B/A: {:.4f} per wall second, {:.4f} per CPU second of the target; sampler {:.3f} % of "
      "one core during B\n",
      b_wall / a_wall, b_cpu / a_cpu, sampler_cpu / (sampled_time * 1e6) * 100);
}

void SlowdownSection(ChildProcess& target) {
  fmt::print(
      "\n== 2. A busy Python target ({}) sampled at 10 Hz (B) or not (A), {} s phases "
      "==\n",
      expanse::pystack::test_util::kDebianPython, Seconds(kPhaseLength).count());
  NativeReader reader;
  RunPhases("native reader", target, reader);

  const char* path = std::getenv("PATH");
  const expanse::Result<std::string> pyspy = expanse::pystack::FindPyspy("", "", path);
  if (!pyspy.ok() || pyspy->empty()) {
    fmt::print("py-spy: not available\n");
    return;
  }
  expanse::pystack::PyspyOptions options;
  options.binary = *pyspy;
  expanse::pystack::PyspySource source(options);
  RunPhases(fmt::format("py-spy ({}, one `dump --nonblocking` per sample)", *pyspy), target,
            source);
}

// --- 3. The daemon's collector --------------------------------------------------------------

// `target` null: no job at all, so only the collector's ticks cost.
void MeasureCollector(const ChildProcess* target, double hz) {
  expanse::agent::PyStacksOptions options;
  options.hostname = "bench";
  options.settings.pystacks_hz = hz;
  if (const char* path = std::getenv("PATH")) {
    options.path_env = path;
  }
  options.log = [](const std::string& line) { fmt::print(stderr, "collector: {}\n", line); };
  expanse::SystemClock clock;
  expanse::agent::PyStacksCollector collector(options, clock);
  if (target != nullptr) {
    collector.SetJobs({{"4242", {target->pid()}, false, false}});
  }

  // Measured after a warm-up that includes the first sample's discovery. This thread only
  // sleeps meanwhile, so the process's CPU is the collector thread's.
  collector.Start();
  std::this_thread::sleep_for(kCollectorWarmUp);
  const auto ok_before = collector.Stats()["samples_ok"].get<std::uint64_t>();
  const double cpu_started = ProcessCpuMicros();
  const double started = SteadySeconds();
  std::this_thread::sleep_for(kCollectorLength);
  const double cpu = ProcessCpuMicros() - cpu_started;
  const double elapsed = SteadySeconds() - started;
  const nlohmann::json stats = collector.Stats();
  collector.Stop();
  const expanse::agent::Capability capability = collector.Describe();
  const auto ok = stats["samples_ok"].get<std::uint64_t>() - ok_before;
  fmt::print("  {:<8} {:>5.1f} {:>8.1f} {:>8} {:>7} {:>10.1f} {:>11.3f}   {}\n",
             target != nullptr ? "busy" : "no job", hz, elapsed, ok,
             stats["samples_failed"].get<std::uint64_t>(), ok > 0 ? cpu / ok : 0.0,
             cpu / (elapsed * 1e6) * 100, capability.state + ": " + capability.reason);
}

void CollectorSection(ChildProcess& target) {
  fmt::print(
      "\n== 3. agent::PyStacksCollector (default settings, base rate as given), one job "
      "with the busy target, ticking every 100 ms, 20 s after a 3 s warm-up ==\n");
  fmt::print("  {:<8} {:>5} {:>8} {:>8} {:>7} {:>10} {:>11}   {}\n", "job", "Hz", "s", "samples",
             "failed", "cpu µs/smp", "cpu % core", "capability");
  MeasureCollector(&target, 10.0);
  MeasureCollector(&target, 1.0);  // the daemon's default rate
  MeasureCollector(nullptr, 1.0);
}

}  // namespace

int main() {
  fmt::print("bench_pystack: load average at start {} ({} CPUs online)\n", LoadAverage(),
             sysconf(_SC_NPROCESSORS_ONLN));
  PerSampleSection();

  ChildProcess busy;
  if (!StartTarget(busy, expanse::pystack::test_util::kDebianPython, kBusyScript)) {
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let it settle before phase A
  SlowdownSection(busy);
  CollectorSection(busy);
  fmt::print("\nload average at end {}\n", LoadAverage());
  return 0;
}
