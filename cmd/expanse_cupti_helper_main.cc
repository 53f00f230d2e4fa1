// expanse-cupti-helper: the GPU hardware-counter sampler, one build per CUPTI variant. The
// daemon's sampler runs `sample` as a child and reads its records; operators run `probe --json`
// to see whether PM sampling works for the service and why not. The work lives in src/cupti.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "core/clock.h"
#include "core/version.h"
#include "cupti/call_watchdog.h"
#include "cupti/cuda/plan.h"
#include "cupti/cuda/probe.h"
#include "cupti/cuda/sample_loop.h"
#include "cupti/helper_records.h"
#include "cupti/pm_reasons.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// A hung driver call cannot be cancelled: report it on both streams and end the process; the
// sampler restarts the helper with backoff.
void OnHungCall(const char* call) {
  const std::string reason = std::string(expanse::cupti::kReasonHungCall) + " in " + call;
  std::fprintf(stderr, "expanse-cupti-helper: %s\n", reason.c_str());
  std::fflush(stderr);
  std::string line = "{\"kind\":\"fatal\",\"reason\":\"" + reason + "\"}\n";
  // A parent that stopped reading must not keep us from exiting.
  fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
  (void)!write(1, line.data(), line.size());
  _exit(3);
}

int Run(int argc, char** argv) {
  namespace cupti = expanse::cupti;
  CLI::App app{"expanse-cupti-helper: GPU performance counters through CUPTI PM sampling (" +
               cupti::VariantName() + ")"};
  app.set_version_flag(
      "--version", "expanse-cupti-helper " + expanse::VersionString() + " " + cupti::VariantName());
  app.require_subcommand(1);
  std::string libcuda, libcupti;
  int timeout_ms = 10'000;
  app.add_option("--libcuda", libcuda, "libcuda.so.1 to open (default: the loader's)");
  app.add_option("--libcupti", libcupti,
                 "libcupti to open (default: ../lib beside the helper, then the loader's)");
  app.add_option("--call-timeout-ms", timeout_ms,
                 "deadline for one CUDA or CUPTI call; a call past it ends the helper")
      ->check(CLI::Range(100, 600'000));

  auto* probe = app.add_subcommand("probe", "report whether PM sampling works on each GPU");
  bool json = false;
  probe->add_flag("--json", json, "JSON (the only format; the flag is for scripts)");

  auto* plan = app.add_subcommand(
      "plan", "which metric each counter series uses on a chip (no GPU needed; JSON)");
  std::vector<std::string> chips;
  plan->add_option("--chip", chips, "CUPTI chip name (GH100, GA100, ...), repeatable, or all")
      ->required();

  auto* sample = app.add_subcommand("sample", "sample the Light set; records on stdout");
  cupti::SampleOptions options;
  std::string devices;
  int period_ms = 1000, duration_s = 0;
  bool no_escalation = false;
  int backoff_ms = 5000;
  sample->add_option("--devices", devices, "GPU UUIDs, comma-separated (default: all)");
  sample->add_option("--period-ms", period_ms, "reporting period")->check(CLI::Range(100, 60'000));
  sample
      ->add_option("--duration", duration_s,
                   "stop after this many seconds (default: until "
                   "standard input closes)")
      ->check(CLI::Range(1, 86'400));
  sample->add_flag("--no-escalation", no_escalation,
                   "keep the Light set even when asked to escalate (EXPANSE_PROFILING_ENABLE=0)");
  sample
      ->add_option("--retry-backoff-ms", backoff_ms,
                   "first wait before retrying a GPU that was let go (doubles to 5 minutes)")
      ->check(CLI::Range(10, 300'000));
  CLI11_PARSE(app, argc, argv);

  expanse::MonotonicClock clock;  // deadlines must not jump with the wall clock
  cupti::CallWatchdog watchdog(clock, std::chrono::milliseconds(timeout_ms), OnHungCall);
  watchdog.Start(std::chrono::milliseconds(100));

  if (probe->parsed()) {
    cupti::ProbeOptions probe_options;
    probe_options.libcuda = libcuda;
    probe_options.libcupti = libcupti;
    std::printf("%s\n", cupti::Probe(probe_options, watchdog).dump(2).c_str());
    return 0;  // it reported, whatever it found
  }
  if (plan->parsed()) {
    cupti::PlanOptions plan_options;
    plan_options.libcupti = libcupti;
    plan_options.chips = chips;
    const nlohmann::json report = cupti::Plan(plan_options, watchdog);
    std::printf("%s\n", report.dump(2).c_str());
    return report.contains("reason") ? 1 : 0;
  }

  // The helper never outlives the sampler that started it.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  for (size_t pos = 0; pos < devices.size();) {
    size_t comma = devices.find(',', pos);
    if (comma == std::string::npos)
      comma = devices.size();
    if (comma > pos)
      options.uuids.push_back(devices.substr(pos, comma - pos));
    pos = comma + 1;
  }
  options.period = std::chrono::milliseconds(period_ms);
  if (duration_s > 0)
    options.duration = std::chrono::seconds(duration_s);
  options.plan.escalation_enabled = !no_escalation;
  options.plan.initial_backoff = std::chrono::milliseconds(backoff_ms);

  auto cuda = cupti::CudaLibrary::Open(libcuda);
  if (!cuda.ok()) {
    std::fprintf(stderr, "expanse-cupti-helper: %s\n", cuda.status().message().c_str());
    cupti::WriteLine(1, cupti::RenderRecord(cupti::FatalRecord{cuda.status().message()}));
    return 1;
  }
  options.libcupti = libcupti;
  return cupti::RunSampleLoop(**cuda, watchdog, options, g_stop);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "expanse-cupti-helper: internal error: %s\n", error.what());
    return 70;
  }
}
