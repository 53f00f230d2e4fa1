#include "agent/controller_role.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "agent/capabilities.h"
#include "agent/controller_round.h"
#include "agent/heartbeat_builder.h"
#include "agent/run_history.h"
#include "agent/sampler_role.h"
#include "agent/segment_grant_files.h"
#include "agent/segment_grant_issuer.h"
#include "agent/segment_relay.h"
#include "agent/segment_upload.h"
#include "agent/server_requests.h"
#include "deploy/daemon_config.h"
#include "net/http_client.h"
#include "outbox/outbox.h"
#include "outbox/uploader.h"
#include "spool/aggregator.h"
#include "wire/error_answer.h"

namespace expanse::agent {
namespace {

// What the heartbeat thread reads and the main loop writes.
struct SharedState {
  std::mutex mu;
  std::condition_variable wake;
  gpu::Inventory inventory;
  nlohmann::json gpu_use = nlohmann::json::array();
  nlohmann::json capabilities = nlohmann::json::object();
  spool::WorkerHealthSnapshot workers;
  nlohmann::json outbox = nlohmann::json::object();
  nlohmann::json diagnostics = nlohmann::json::object();
  bool revoked = false;
  std::string revoked_reason;
};

class Controller {
 public:
  Controller(const ControllerOptions& options, Host& host, const std::atomic<bool>& stop)
      : options_(options),
        host_(host),
        clock_(host.clock()),
        stop_(stop),
        collector_(options.node, clock_) {}

  Status Start() {
    EXPANSE_ASSIGN_OR_RETURN(config_, deploy::LoadDaemonConfig(options_.config_path));
    shared_prefix_ = options_.shared_prefix_override.empty() ? config_.shared_prefix
                                                             : options_.shared_prefix_override;
    const RuntimeSettings& s = options_.settings;

    outbox::OutboxOptions box;
    box.directory = options_.state_dir + "/outbox";
    box.log = [this](std::string_view line) { Log(std::string(line)); };
    EXPANSE_RETURN_IF_ERROR(host_.MakeDirectories(options_.state_dir, 0755));
    EXPANSE_ASSIGN_OR_RETURN(outbox_, outbox::Outbox::Open(box, clock_));

    net::HttpClientOptions http;
    http.ca_file = s.ssl_cert_file;
    // daemon.env is where operators put the proxy; the process environment is left alone.
    http.https_proxy = s.https_proxy;
    http.no_proxy = s.no_proxy;
    http.user_agent = "expanse-daemon/" + options_.daemon_version;
    EXPANSE_ASSIGN_OR_RETURN(upload_client_, net::HttpClient::Create(http));
    EXPANSE_ASSIGN_OR_RETURN(heartbeat_client_, net::HttpClient::Create(http));

    outbox::UploaderOptions up;
    up.data_plane_url = config_.data_plane_url;
    up.log = [this](std::string_view line) { Log(std::string(line)); };
    EXPANSE_ASSIGN_OR_RETURN(
        uploader_, outbox::Uploader::Create(
                       up, *outbox_, *upload_client_, [this] { return Credential(); }, clock_));

    // Trace segments: those the samplers relay, and this node's own when it runs jobs.
    SegmentUploadOptions segments;
    if (!shared_prefix_.empty()) {
      segments.relay_root = SegmentRelayRoot(shared_prefix_);
      if (Status made = host_.MakeDirectories(segments.relay_root, 0755); !made.ok())
        Log("trace segments cannot be relayed: " + made.message());
    }
    if (!options_.node.capture_control_dir.empty()) {
      segments.own_ready_dir = options_.node.capture_control_dir + "/capture-ready";
      segments.own_host = options_.node.hostname;
    }
    segments.quarantine_dir = options_.state_dir + "/segment-quarantine";
    segments.data_plane_url = config_.data_plane_url;
    segments.expected_uid = geteuid();
    segments.log = [this](std::string_view line) { Log(std::string(line)); };
    segment_uploader_ = std::make_unique<SegmentUploader>(
        std::move(segments), *upload_client_, [this] { return Credential(); }, clock_);
    // Grants for the workers that send their segments themselves (direct, auto).
    SegmentGrantIssuerOptions grants;
    if (!shared_prefix_.empty()) {
      grants.grant_root = SegmentGrantRoot(shared_prefix_);
      if (Status made = host_.MakeDirectories(grants.grant_root, 0755); !made.ok())
        Log("segment grants cannot be handed to workers: " + made.message());
    }
    grants.data_plane_url = config_.data_plane_url;
    grants.expected_uid = geteuid();
    grants.log = [this](std::string_view line) { Log(std::string(line)); };
    grant_issuer_ = std::make_unique<SegmentGrantIssuer>(
        std::move(grants), *upload_client_, [this] { return Credential(); }, clock_);

    if (!shared_prefix_.empty()) {
      const std::string root = WorkerSpoolRoot(shared_prefix_);
      EXPANSE_RETURN_IF_ERROR(host_.MakeDirectories(root, 0755));
      spool::AggregatorOptions agg;
      agg.spool_root = root;
      agg.state_dir = options_.state_dir + "/aggregator";
      agg.expected_uid = geteuid();
      agg.log = [this](std::string_view line) {
        // An idle round is logged once every ten minutes, not every few seconds.
        if (line.find("files=0 records=0 bytes=0 bad=0") != std::string_view::npos) {
          const int64_t now = clock_.NowMs();
          if (now - last_idle_drain_log_ms_ < 10 * 60 * 1000)
            return;
          last_idle_drain_log_ms_ = now;
        }
        Log(std::string(line));
      };
      EXPANSE_ASSIGN_OR_RETURN(aggregator_, spool::Aggregator::Open(agg, clock_));
      // The first heartbeat goes out before the first round: it must already count the
      // workers, or every restart would report "0 of 0" and look like a fresh compute.
      if (Result<spool::WorkerHealthSnapshot> health =
              aggregator_->ReadWorkerHealth(clock_.NowMs());
          health.ok()) {
        shared_.workers = std::move(*health);
      }
    }
    ControllerRoundOptions round;
    round.hostname = options_.node.hostname;
    round.shared_prefix = shared_prefix_;
    round.control_dir = options_.control_dir;
    round.gres_conf_path = options_.node.gres_conf_path;
    round.settings = options_.settings;
    round.sacct_mark_file = options_.state_dir + "/sacct-covered-to";
    round.log = options_.log;
    round_ = std::make_unique<ControllerRound>(std::move(round), host_, collector_, *outbox_,
                                               aggregator_.get());
    runs_ = RecordStart(options_.state_dir, clock_.NowMs());
    if (runs_.previous_run_unclean) {
      Log("the previous run ended without a clean stop: " + runs_.last_unclean_reason);
    }
    shared_.diagnostics = {{"runs", runs_.ToJson()}};
    Log("controller for compute " + config_.compute_id + " on " + options_.node.hostname +
        (shared_prefix_.empty() ? std::string(", no shared prefix")
                                : ", worker spool " + WorkerSpoolRoot(shared_prefix_)));
    return OkStatus();
  }

  Status Run() {
    std::thread upload([this] {
      while (!Stopping()) {
        Status status = uploader_->Run([this](int64_t wait_ms) {
          // Grants whatever the queue holds: small, and the segments they admit do not come
          // through here.
          const Status granted = grant_issuer_->RunOnce();
          {
            std::lock_guard lock(shared_.mu);
            grant_stats_ = grant_issuer_->stats();
          }
          if (granted.code() == StatusCode::kUnauthenticated) {
            Revoke(granted.reason());
            return false;
          }
          // Segments only once the telemetry queue is empty: telemetry goes first.
          if (outbox_->stats().depth_entries == 0) {
            const Status s = segment_uploader_->RunOnce();
            {
              std::lock_guard lock(shared_.mu);
              segment_stats_ = segment_uploader_->stats();
            }
            if (s.code() == StatusCode::kUnauthenticated) {
              Revoke(s.reason());
              return false;
            }
          }
          return Wait(wait_ms);
        });
        if (status.code() == StatusCode::kUnauthenticated) {
          Revoke(status.reason());
          return;
        }
        if (status.ok())
          return;  // stopping
        // The outbox could not be read or acknowledged: say so and try again; the queue on
        // disk is still there.
        Log("uploads paused: " + status.message());
        Wait(5000);
      }
    });
    std::thread heartbeat([this] { HeartbeatLoop(); });

    using Steady = std::chrono::steady_clock;
    auto next_fast = Steady::now();
    auto next_slow = next_fast + options_.slow_interval;
    auto next_flush = next_fast + options_.flush_interval;
    while (!Stopping()) {
      collector_.TickFast();
      const auto now = Steady::now();
      if (now >= next_slow) {
        collector_.TickSlow();
        next_slow = now + options_.slow_interval;
      }
      if (now >= next_flush) {
        GuardedRound();
        next_flush = now + options_.flush_interval;
      }
      next_fast += options_.interval;
      if (next_fast < Steady::now())
        next_fast = Steady::now();
      std::unique_lock lock(shared_.mu);
      shared_.wake.wait_until(lock, next_fast, [this] { return StoppingLocked(); });
    }
    if (!shared_.revoked)
      GuardedRound(/*final=*/true);  // what was sampled since the last round
    {
      std::lock_guard lock(shared_.mu);
      shared_.wake.notify_all();
    }
    upload.join();
    heartbeat.join();
    RecordCleanStop(options_.state_dir);
    std::lock_guard lock(shared_.mu);
    if (shared_.revoked) {
      return UnauthenticatedError("the compute credential was refused (" + shared_.revoked_reason +
                                  "); a replacement credential was probably exchanged. Stopping.")
          .WithReason("credential_revoked");
    }
    return OkStatus();
  }

 private:
  void Log(const std::string& line) {
    if (options_.log)
      options_.log(line);
  }

  std::string Credential() {
    // Re-read so a replacement written by the installer is used without a restart.
    Result<deploy::DaemonConfig> fresh = deploy::LoadDaemonConfig(options_.config_path);
    if (fresh.ok())
      return fresh->credential;
    return config_.credential;
  }

  bool StoppingLocked() const { return stop_.load() || shared_.revoked; }
  bool Stopping() {
    std::lock_guard lock(shared_.mu);
    return StoppingLocked();
  }

  // The uploader's pause between runs; false ends its loop.
  // What the segment uploader did, for the heartbeat's diagnostics (docs/formats/heartbeat.md).
  nlohmann::json SegmentUploadStatsJson() {
    std::lock_guard lock(shared_.mu);
    return {{"uploaded", segment_stats_.uploaded},
            {"duplicates", segment_stats_.duplicates},
            {"bytes", segment_stats_.bytes},
            {"retries", segment_stats_.retries},
            {"refused", segment_stats_.refused},
            {"last_error", segment_stats_.last_error},
            {"grants",
             {{"issued", grant_stats_.issued},
              {"retries", grant_stats_.retries},
              {"refused", grant_stats_.refused},
              {"stale_removed", grant_stats_.stale_removed},
              {"last_error", grant_stats_.last_error}}}};
  }

  bool Wait(int64_t wait_ms) {
    std::unique_lock lock(shared_.mu);
    if (StoppingLocked())
      return false;
    if (wait_ms > 0) {
      shared_.wake.wait_for(lock, std::chrono::milliseconds(wait_ms),
                            [this] { return StoppingLocked(); });
    }
    return !StoppingLocked();
  }

  void Revoke(const std::string& reason) {
    std::lock_guard lock(shared_.mu);
    if (!shared_.revoked)
      Log("credential refused by the server (" + reason + "); stopping");
    shared_.revoked = true;
    shared_.revoked_reason = reason;
    shared_.wake.notify_all();
  }

  // One flush round (controller_round.h), then what it found for the heartbeat. A round that
  // failed leaves the heartbeat's view as it was.
  void GuardedRound(bool final = false) {
    std::optional<RoundReport> report = round_->Run(final);
    if (!report)
      return;
    const outbox::OutboxStats box = outbox_->stats();
    const outbox::UploaderStats up = uploader_->stats();
    report->diagnostics["runs"] = runs_.ToJson();
    report->diagnostics["uploader"] = {{"sent", up.sent},
                                       {"acked", up.acked},
                                       {"envelopes", up.envelopes},
                                       {"duplicates", up.duplicates},
                                       {"retries", up.retries},
                                       {"dead_lettered", up.dead_lettered},
                                       {"last_error", up.last_error}};
    report->diagnostics["outbox_detail"] = {{"depth_bytes", box.depth_bytes},
                                            {"disk_bytes", box.disk_bytes}};
    report->diagnostics["segments"] = SegmentUploadStatsJson();
    std::lock_guard lock(shared_.mu);
    shared_.inventory = std::move(report->inventory);
    shared_.gpu_use = std::move(report->gpu_use);
    shared_.capabilities = std::move(report->capabilities);
    shared_.workers = std::move(report->workers);
    shared_.diagnostics = std::move(report->diagnostics);
    shared_.outbox = {{"depth_batches", box.depth_entries},
                      {"depth_bytes", box.depth_bytes},
                      {"dropped_batches", box.dropped_entries},
                      {"dead_lettered_batches", box.dead_lettered_entries}};
  }

  void HeartbeatLoop() {
    // The first heartbeat goes out at once: it is what proves enrolment to the installer.
    bool first = true;
    while (true) {
      {
        std::unique_lock lock(shared_.mu);
        if (!first) {
          shared_.wake.wait_for(lock, options_.heartbeat_interval,
                                [this] { return StoppingLocked(); });
        }
        if (StoppingLocked())
          return;
      }
      first = false;
      SendHeartbeat();
    }
  }

  void SendHeartbeat() {
    HeartbeatInputs in;
    {
      std::lock_guard lock(shared_.mu);
      in.controller_inventory = shared_.inventory;
      in.controller_gpu_use = shared_.gpu_use;
      in.controller_capabilities = shared_.capabilities;
      in.workers = shared_.workers;
      in.outbox = shared_.outbox;
      in.diagnostics = shared_.diagnostics;
    }
    in.daemon_version = options_.daemon_version;
    in.controller_host = options_.node.hostname;
    net::HttpRequest request;
    request.method = "POST";
    request.url = config_.control_plane_url + "/cp/v1/heartbeat";
    request.headers = {{"Authorization", "Bearer " + Credential()},
                       {"Content-Type", "application/json"}};
    // Replace, not throw, should any text not be UTF-8 (a log line, a worker's field).
    nlohmann::json body = BuildHeartbeat(in);
    nlohmann::json results = server_requests_.PendingResults();
    const size_t reported = results.size();
    if (reported > 0)
      body["request_results"] = std::move(results);
    request.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    Result<net::HttpResponse> response = heartbeat_client_->Send(request);
    if (!response.ok()) {
      Log("heartbeat not sent: " + response.status().message());
      return;
    }
    if (response->status == 200) {
      if (!heartbeat_ok_)
        Log("heartbeat accepted; " + in.workers.Summary());
      heartbeat_ok_ = true;
      server_requests_.Acknowledge(reported);
      // The server's requests (an alert rule's scancel) ride on the answer.
      server_requests_.HandleAnswer(response->body);
      return;
    }
    heartbeat_ok_ = false;
    const std::string code = wire::DecodeErrorAnswer(response->body).code;
    if (response->status == 401 && (code == "credential_revoked" || code == "credential_invalid")) {
      Revoke(code);
      return;
    }
    Log("heartbeat refused: HTTP " + std::to_string(response->status) + " " + code);
  }

  const ControllerOptions& options_;
  Host& host_;
  Clock& clock_;
  const std::atomic<bool>& stop_;
  NodeCollector collector_;
  deploy::DaemonConfig config_;
  std::string shared_prefix_;
  std::unique_ptr<outbox::Outbox> outbox_;
  std::unique_ptr<net::HttpClient> upload_client_;
  std::unique_ptr<net::HttpClient> heartbeat_client_;
  std::unique_ptr<outbox::Uploader> uploader_;
  std::unique_ptr<SegmentUploader> segment_uploader_;
  SegmentUploadStats segment_stats_;  // the upload thread's copy, under shared_.mu
  std::unique_ptr<SegmentGrantIssuer> grant_issuer_;
  SegmentGrantIssuerStats grant_stats_;  // the upload thread's copy, under shared_.mu
  std::unique_ptr<spool::Aggregator> aggregator_;
  std::unique_ptr<ControllerRound> round_;
  RunHistory runs_;
  bool heartbeat_ok_ = false;
  ServerRequests server_requests_{host_, [this](const std::string& line) { Log(line); }};
  int64_t last_idle_drain_log_ms_ = 0;
  SharedState shared_;
};

}  // namespace

Status RunControllerRole(const ControllerOptions& options, Host& host,
                         const std::atomic<bool>& stop) {
  Controller controller(options, host, stop);
  EXPANSE_RETURN_IF_ERROR(controller.Start());
  return controller.Run();
}

}  // namespace expanse::agent
