#include "agent/sampler_role.h"

#include <unistd.h>

#include <thread>

#include "agent/burst_inbox.h"
#include "agent/capabilities.h"
#include "agent/gpu_json.h"
#include "agent/profiling_permissions.h"
#include "agent/segment_direct.h"
#include "agent/segment_grant_files.h"
#include "agent/segment_relay.h"
#include "agent/spool_handoff.h"
#include "spool/spool_writer.h"
#include "wire/records.h"

namespace expanse::agent {

std::string WorkerSpoolRoot(const std::string& shared_prefix) {
  return shared_prefix + "/spool/workers";
}

namespace {

constexpr size_t kHealthProcessListBudget = 48 * 1024;

class SamplerLoop {
 public:
  SamplerLoop(const SamplerRoleOptions& options, Host& host,
              std::unique_ptr<spool::SpoolWriter> writer)
      : options_(options),
        host_(host),
        clock_(host.clock()),
        writer_(std::move(writer)),
        collector_(options.node, clock_),
        handoff_(*writer_, {.commit = [this](const NodeCollection& c) { collector_.Commit(c); },
                            .restore = [this](const NodeCollection& c) { collector_.Restore(c); }}),
        permissions_(
            DaemonPermissionOptions(options.control_dir, options.shared_prefix,
                                    WorkerSpoolRoot(options.shared_prefix), options.node.hostname),
            options.settings.profiling_agent_enable),
        bursts_(BurstInboxOptions{.control_root = ControlTreeRoot(options.shared_prefix),
                                  .hostname = options.node.hostname,
                                  .expected_uid = geteuid(),
                                  .log = options.log},
                clock_),
        relay_(SegmentRelayOptions{
            .ready_dir = options.node.capture_control_dir + "/capture-ready",
            .relay_dir = SegmentRelayRoot(options.shared_prefix) + "/" + options.node.hostname}) {
    // Direct (or auto) sends the node's segments itself with the controller's grants; relay
    // never opens a connection.
    if (!options.node.capture_control_dir.empty() &&
        options.settings.segment_upload_mode != "relay") {
      SegmentDirectOptions direct;
      direct.may_relay = options.settings.segment_upload_mode == "auto";
      direct.ready_dir = options.node.capture_control_dir + "/capture-ready";
      direct.grant_dir = SegmentGrantRoot(options.shared_prefix) + "/" + options.node.hostname;
      direct.quarantine_dir = options.node.capture_control_dir + "/segment-quarantine";
      direct.expected_uid = geteuid();
      direct.http.ca_file = options.settings.ssl_cert_file;
      direct.http.https_proxy = options.settings.https_proxy;
      direct.http.no_proxy = options.settings.no_proxy;
      direct.http.user_agent = "expanse-daemon/" + options.daemon_version;
      direct.log = options.log;
      direct_ = std::make_unique<SegmentDirect>(std::move(direct), clock_);
    }
  }

  // The controller's stack burst requests for this node, carried out at once.
  void PollBursts() {
    for (const StackBurstRequest& r : bursts_.Poll()) {
      const std::string job = r.slurm_job_id > 0 ? std::to_string(r.slurm_job_id) : r.job_id;
      const Status s = collector_.RequestStackBurst(job, r.trigger_ms);
      if (!s.ok()) {
        bursts_.NoteNotCarriedOut(r, s.reason());
        continue;
      }
      if (options_.log) {
        options_.log("stack burst for job " + r.job_id + " (" + r.reason +
                     ", asked by the controller at " + std::to_string(r.trigger_ms) + ")");
      }
    }
  }

  void Flush(bool force = false) {
    handoff_.Put(collector_.Collect(/*final=*/force));
    bool wrote = false;
    const Status flushed = handoff_.Flush(force, &wrote);
    if (wrote)
      last_written_ms_ = clock_.NowMs();
    for (const std::string& problem : collector_.TakeProblems()) {
      if (options_.log)
        options_.log(problem);
    }
    if (!flushed.ok())
      problem_ = flushed.message();
    else
      problem_.clear();
    // Trace segments after the telemetry, and only with a capture spool to take them from.
    if (!options_.node.capture_control_dir.empty() &&
        (direct_ == nullptr || direct_->Flush() == SegmentDirect::Next::kRelay))
      relay_.Flush();
    WriteHealth();
  }

  void WriteHealth() {
    CapabilityInputs inputs;
    inputs.settings = options_.settings;
    inputs.gpu = collector_.GpuHealth();
    inputs.shared_prefix = options_.shared_prefix;
    inputs.hostname = options_.node.hostname;
    inputs.profiling_permissions_problem = permissions_.Check(clock_.NowMs(), options_.log);
    inputs.py_stacks = collector_.PyStacksCapability();
    inputs.cupti = collector_.CuptiCapability();
    inputs.dcgm = collector_.DcgmCapability();
    inputs.path_env = host_.GetEnv("PATH").value_or("/usr/bin:/bin");
    const auto capabilities = DescribeCapabilities(inputs);
    const spool::SpoolWriterCounters counters = writer_->counters();
    nlohmann::json health = {{"version", 1},
                             {"host", options_.node.hostname},
                             {"daemon_version", options_.daemon_version},
                             {"last_sample_ms", inputs.gpu.last_ok_ms},
                             {"last_spool_write_ms", last_written_ms_},
                             {"capabilities", CapabilitiesJson(capabilities)},
                             {"inventory", ToJson(collector_.Inventory())},
                             {"gpu_use", collector_.GpuUse()},
                             {"job_devices", collector_.JobDevices()},
                             {"py_stacks", collector_.PyStacksStats()},
                             {"cupti", collector_.CuptiStats()},
                             {"dcgm", collector_.DcgmStats()},
                             {"capture", collector_.CaptureStats()},
                             {"segment_relay",
                              {{"relayed", relay_.stats().relayed},
                               {"held_for_space", relay_.stats().held_for_space},
                               {"failed", relay_.stats().failed},
                               {"last_problem", relay_.stats().last_problem}}},
                             {"segment_direct", SegmentDirectJson()},
                             {"live_bursts", bursts_.Stats()},
                             {"spool",
                              {{"records_written", counters.records_written},
                               {"files_written", counters.files_written},
                               {"records_dropped", counters.records_dropped_batch_full +
                                                       counters.records_dropped_spool_full},
                               {"write_errors", counters.write_errors}}}};
    if (!problem_.empty())
      health["problem"] = problem_;
    // The report has a fixed size cap (the spool's 64 KiB); a node crowded with GPU processes
    // loses its process lists first, keeping the per-GPU states and everything else.
    if (DumpJson(health).size() > kHealthProcessListBudget) {
      for (auto& gpu : health["gpu_use"])
        gpu.erase("processes");
      health["gpu_use_processes_omitted"] = true;
    }
    // Then the GPU lists of the self-check's jobs that need no words: a disagreement keeps
    // the GPUs it names.
    if (DumpJson(health).size() > kHealthProcessListBudget) {
      for (auto& job : health["job_devices"]) {
        if (job.value("state", "") != "disagrees" && job.value("state", "") != "unconstrained") {
          job.erase("allocated_gpus");
          job.erase("cgroup_gpus");
        }
      }
      health["job_devices_gpus_omitted"] = true;
    }
    // Logged when the problem starts or changes, not at every flush while it lasts.
    const Status written = writer_->WriteHealth(DumpJson(health));
    const std::string health_problem = written.ok() ? "" : written.message();
    if (!health_problem.empty() && health_problem != health_problem_ && options_.log)
      options_.log("cannot write the health report: " + health_problem);
    health_problem_ = health_problem;
  }

  NodeCollector& collector() { return collector_; }

  // docs/formats/segment-direct.md; null where the node relays (or has no capture spool).
  nlohmann::json SegmentDirectJson() const {
    if (direct_ == nullptr)
      return nullptr;
    const SegmentDirectStats& d = direct_->stats();
    return {{"mode", options_.settings.segment_upload_mode},
            {"requested", d.requested},
            {"uploaded", d.uploaded},
            {"duplicates", d.duplicates},
            {"bytes", d.bytes},
            {"retries", d.retries},
            {"fallbacks", d.fallbacks},
            {"refused", d.refused},
            {"relay_until_ms", d.relay_until_ms},
            {"last_error", d.last_error}};
  }

 private:
  const SamplerRoleOptions& options_;
  Host& host_;
  Clock& clock_;
  std::unique_ptr<spool::SpoolWriter> writer_;
  NodeCollector collector_;
  SpoolHandoff handoff_;
  int64_t last_written_ms_ = 0;
  std::string problem_;
  std::string health_problem_;  // the last health report's write error, "" when written
  PermissionMonitor permissions_;
  BurstInbox bursts_;
  SegmentRelay relay_;
  std::unique_ptr<SegmentDirect> direct_;
};

}  // namespace

Status RunSamplerRole(const SamplerRoleOptions& options, Host& host,
                      const std::atomic<bool>& stop) {
  Clock& clock = host.clock();
  if (options.shared_prefix.empty()) {
    return InvalidArgumentError("the sampler role needs --shared-prefix").WithReason("no_prefix");
  }
  spool::SpoolWriterOptions writer_options;
  writer_options.spool_root = WorkerSpoolRoot(options.shared_prefix);
  writer_options.hostname = options.node.hostname;
  writer_options.state_dir = options.state_dir;
  writer_options.min_flush_interval_ms =
      std::min<int64_t>(5'000, std::max<int64_t>(0, options.flush_interval.count() / 2));
  writer_options.log = [&](std::string_view line) {
    if (options.log)
      options.log(std::string(line));
  };
  // The controller (or the installer) creates the spool root. A sampler started first, or one
  // whose shared mount is not there yet, waits for it instead of exiting: its unit would
  // otherwise restart it in a loop. Hook events wait on local disk meanwhile.
  Result<std::unique_ptr<spool::SpoolWriter>> writer =
      spool::SpoolWriter::Open(writer_options, clock);
  std::string last_error;
  while (!writer.ok() && !stop.load()) {
    if (writer.status().message() != last_error && options.log) {
      options.log("waiting for the worker spool: " + writer.status().message());
    }
    last_error = writer.status().message();
    for (int i = 0; i < 10 && !stop.load(); ++i) {
      std::this_thread::sleep_for(options.flush_interval / 10);
    }
    writer = spool::SpoolWriter::Open(writer_options, clock);
  }
  if (!writer.ok())
    return OkStatus();  // stopped while waiting
  SamplerLoop loop(options, host, std::move(*writer));

  using Steady = std::chrono::steady_clock;
  auto next_fast = Steady::now();
  auto next_slow = next_fast + options.slow_interval;
  auto next_flush = next_fast + options.flush_interval;
  auto next_burst_poll = next_fast;
  loop.WriteHealth();
  uint64_t ticks_with_readings = 0;
  int64_t last_ok_ms = 0;
  while (!stop.load()) {
    loop.collector().TickFast();
    if (const int64_t ok_ms = loop.collector().GpuHealth().last_ok_ms; ok_ms != last_ok_ms) {
      last_ok_ms = ok_ms;
      ++ticks_with_readings;
    }
    const auto now = Steady::now();
    if (now >= next_slow) {
      loop.collector().TickSlow();
      next_slow = now + options.slow_interval;
    }
    if (now >= next_burst_poll) {
      loop.PollBursts();
      next_burst_poll = now + options.burst_poll_interval;
    }
    if (now >= next_flush) {
      loop.Flush();
      next_flush = now + options.flush_interval;
    }
    next_fast += options.interval;
    if (next_fast < Steady::now())
      next_fast = Steady::now();  // fell behind: do not burst
    // Sleep in short steps so a stop request is seen promptly.
    while (!stop.load() && Steady::now() < next_fast) {
      std::this_thread::sleep_for(
          std::min<Steady::duration>(next_fast - Steady::now(), std::chrono::milliseconds(200)));
    }
  }
  loop.Flush(/*force=*/true);
  if (options.log) {
    options.log("sampler stopped after " + std::to_string(ticks_with_readings) +
                " ticks with GPU readings");
  }
  return OkStatus();
}

}  // namespace expanse::agent
