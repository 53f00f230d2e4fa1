#include "server/serve.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "core/duration.h"
#include "core/file_util.h"
#include "server/alert_evaluator.h"

namespace expanse::server {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

int Fail(const Status& status) {
  std::fprintf(stderr, "expanse-server: %s\n", status.message().c_str());
  return 1;
}

// The first line (without its line break) of a secret's file named by `flag`. Refused when
// others may read the file: the secret would be theirs too.
Result<std::string> ReadPrivateFirstLine(const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return InvalidArgumentError(flag + " " + path + " cannot be read");
  if ((st.st_mode & 0077) != 0)
    return InvalidArgumentError(flag + " " + path + " may be read by others: chmod 600 it");
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text, fs::ReadSmallFile(path, 4096));
  if (!text)
    return InvalidArgumentError(flag + " " + path + " does not exist");
  std::string line = text->substr(0, text->find('\n'));
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  return line;
}

// --smtp-credentials-file: "username:password" on its first line.
Status ReadSmtpCredentials(const std::string& path, AlertSenderOptions& alerts) {
  EXPANSE_ASSIGN_OR_RETURN(const std::string line,
                           ReadPrivateFirstLine("--smtp-credentials-file", path));
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("--smtp-credentials-file " + path +
                                " must hold username:password on its first line");
  }
  alerts.smtp_username = line.substr(0, colon);
  alerts.smtp_password = line.substr(colon + 1);
  return OkStatus();
}

// --segment-s3-credentials-file: the bucket's key pair, which only a bucket URL needs.
Status ReadSegmentS3Credentials(ServeFlags& flags) {
  S3SegmentStoreOptions& s3 = flags.options.segment_s3;
  const std::string& path = flags.segment_s3_credentials_file;
  if (path.empty()) {
    return s3.url.empty()
               ? OkStatus()
               : InvalidArgumentError("--segment-s3-url needs --segment-s3-credentials-file");
  }
  if (s3.url.empty())
    return InvalidArgumentError("--segment-s3-credentials-file needs --segment-s3-url");
  EXPANSE_ASSIGN_OR_RETURN(const std::string line,
                           ReadPrivateFirstLine("--segment-s3-credentials-file", path));
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == line.size()) {
    return InvalidArgumentError("--segment-s3-credentials-file " + path +
                                " must hold access-key:secret-key on its first line");
  }
  s3.access_key = line.substr(0, colon);
  s3.secret_key = line.substr(colon + 1);
  return OkStatus();
}

// --metrics-token-file: the /metrics token, 16 to 256 printable characters, on its first line.
Status ReadMetricsToken(const std::string& path, std::string& token) {
  EXPANSE_ASSIGN_OR_RETURN(token, ReadPrivateFirstLine("--metrics-token-file", path));
  const bool printable =
      std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 0x7f; });
  if (token.size() < 16 || token.size() > 256 || !printable) {
    return InvalidArgumentError("--metrics-token-file " + path +
                                " must hold a token of 16 to 256 printable characters, no blanks");
  }
  return OkStatus();
}

// The forwarding receiver's token (--forward-token-file).
Status ResolveForwarding(ServeFlags& flags) {
  if (flags.forward_token_file.empty())
    return OkStatus();
  if (flags.options.forward.url.empty())
    return InvalidArgumentError("--forward-token-file needs --forward-remote-write");
  EXPANSE_ASSIGN_OR_RETURN(flags.options.forward.bearer_token,
                           ReadPrivateFirstLine("--forward-token-file", flags.forward_token_file));
  return OkStatus();
}

// The remote telemetry store's URLs and token from --telemetry-url and friends.
Status ResolveRemoteTelemetry(ServeFlags& flags) {
  promstore::RemoteTelemetryOptions& remote = flags.options.remote_telemetry;
  const bool given = !flags.telemetry_url.empty() || !remote.write_url.empty() ||
                     !remote.query_url.empty() || !flags.telemetry_token_file.empty();
  if (flags.options.telemetry_store != "remote") {
    if (given) {
      return InvalidArgumentError(
          "--telemetry-url, --telemetry-write-url, --telemetry-query-url and "
          "--telemetry-token-file need --telemetry-store remote");
    }
    return OkStatus();
  }
  std::string root = flags.telemetry_url;
  while (!root.empty() && root.back() == '/')
    root.pop_back();
  if (remote.write_url.empty() && !root.empty())
    remote.write_url = root + "/api/v1/write";
  if (remote.query_url.empty())
    remote.query_url = root;
  if (remote.write_url.empty() || remote.query_url.empty()) {
    return InvalidArgumentError(
        "--telemetry-store remote needs --telemetry-url (or --telemetry-write-url and "
        "--telemetry-query-url)");
  }
  if (!flags.telemetry_token_file.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(remote.bearer_token, ReadPrivateFirstLine("--telemetry-token-file",
                                                                       flags.telemetry_token_file));
    if (remote.bearer_token.empty())
      return InvalidArgumentError("--telemetry-token-file " + flags.telemetry_token_file +
                                  " is empty");
  }
  return OkStatus();
}

// Retention on a thread of its own, each minute: trace segments and Python stacks, a batch of
// each in turn. A large site stores thousands of stack rows a second (docs/scaling.md), and
// deleting them takes seconds a minute; removing a segment from a bucket may take seconds (and
// stalled the main loop's flush and stale-compute marking when it ran there). Each batch holds
// the store's writers for one transaction; the thread then waits as long as the batch took, so
// that the store's other users have it at least half the time, and goes on while whole batches
// expire (a backlog drains at half the store's delete rate; segments arrived faster than the
// five-minutely batch of 1,000 removed them). Taking turns, neither backlog holds the other up.
void RunRetention(ServerApp& app, Clock& clock, const std::atomic<bool>& stop) {
  struct Kind {
    const char* what;
    std::function<Result<int64_t>()> batch;
    int64_t whole;
    bool more = false;
  };
  Kind kinds[] = {{"trace segment", [&] { return app.ExpireSegmentsOnce(clock.NowMs()); },
                   ServerApp::kSegmentRetentionBatch},
                  {"stack", [&] { return app.ExpireStacksOnce(clock.NowMs()); },
                   ServerApp::kStackRetentionBatch}};
  auto next = std::chrono::steady_clock::now();  // right after start too: a shorter retention
  while (!stop) {
    if (std::chrono::steady_clock::now() >= next) {
      next = std::chrono::steady_clock::now() + std::chrono::minutes(1);
      for (Kind& kind : kinds)
        kind.more = true;
      while (!stop && (kinds[0].more || kinds[1].more)) {
        for (Kind& kind : kinds) {
          if (!kind.more || stop)
            continue;
          const auto start = std::chrono::steady_clock::now();
          Result<int64_t> deleted = kind.batch();
          if (!deleted.ok())
            std::fprintf(stderr, "expanse-server: %s retention: %s\n", kind.what,
                         deleted.status().ToString().c_str());
          kind.more = deleted.ok() && *deleted >= kind.whole;
          // In steps, so that a batch that waited long for the lock does not hold up a stop.
          const auto resume =
              std::chrono::steady_clock::now() + (std::chrono::steady_clock::now() - start);
          while (kind.more && !stop && std::chrono::steady_clock::now() < resume)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Runs the alert evaluator every `interval` until `stop`; a round's problems go to stderr.
void RunAlerts(AlertEvaluator& evaluator, std::chrono::milliseconds interval,
               const std::atomic<bool>& stop) {
  auto next = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!stop) {
    if (std::chrono::steady_clock::now() >= next) {
      Result<AlertRound> round = evaluator.RunOnce();
      if (!round.ok()) {
        std::fprintf(stderr, "expanse-server: alerts: %s\n", round.status().message().c_str());
      } else {
        for (size_t i = 0; i < round->errors.size() && i < 5; ++i)
          std::fprintf(stderr, "expanse-server: alerts: %s\n", round->errors[i].c_str());
        if (round->sent + round->throttled + round->failed + round->actions > 0) {
          std::fprintf(stderr,
                       "expanse-server: alerts: %lld sent, %lld throttled, %lld failed, %lld "
                       "to retry, %lld actions\n",
                       static_cast<long long>(round->sent),
                       static_cast<long long>(round->throttled),
                       static_cast<long long>(round->failed), static_cast<long long>(round->retry),
                       static_cast<long long>(round->actions));
        }
      }
      next = std::chrono::steady_clock::now() + interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

std::string PublicUrl(const std::string& listen_address, int bound_port, bool tls) {
  auto parsed = ParseListenAddress(listen_address);
  std::string host = parsed.ok() ? parsed->first : "localhost";
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  }
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(bound_port);
}

int RunServe(ServeFlags flags) {
  // Each duration flag in ms; the first that does not parse is refused by its name.
  Status bad_duration;
  auto duration_ms = [&bad_duration](const char* flag, const std::string& text) -> int64_t {
    Result<std::chrono::milliseconds> d = ParseDuration(text);
    if (d.ok())
      return d->count();
    if (bad_duration.ok())
      bad_duration = Status(d.status().code(), std::string(flag) + ": " + d.status().message());
    return 0;
  };
  const int64_t ttl_ms = duration_ms("--install-token-ttl", flags.install_token_ttl);
  flags.options.control.stale_after_ms = duration_ms("--stale-after", flags.stale_after);
  flags.options.retention_ms = duration_ms("--retention", flags.retention);
  flags.options.segment_retention_ms = duration_ms("--segment-retention", flags.segment_retention);
  flags.options.stack_retention_ms = duration_ms("--stack-retention", flags.stack_retention);
  const int64_t alert_interval_ms = duration_ms("--alert-interval", flags.alert_interval);
  if (!bad_duration.ok())
    return Fail(bad_duration);
  if (ttl_ms <= 0)
    return Fail(InvalidArgumentError("--install-token-ttl must be positive"));
  flags.options.control.install_token_ttl_ms = ttl_ms;
  if (alert_interval_ms < 1000)
    return Fail(InvalidArgumentError("--alert-interval must be at least 1s"));
  if (!flags.metrics_token_file.empty()) {
    if (Status s = ReadMetricsToken(flags.metrics_token_file, flags.options.metrics_token); !s.ok())
      return Fail(s);
  }
  if (Status s = ResolveRemoteTelemetry(flags); !s.ok())
    return Fail(s);
  if (Status s = ResolveForwarding(flags); !s.ok())
    return Fail(s);
  if (!flags.smtp_credentials_file.empty()) {
    if (Status s = ReadSmtpCredentials(flags.smtp_credentials_file, flags.options.alerts); !s.ok())
      return Fail(s);
  }
  if (Status s = ReadSegmentS3Credentials(flags); !s.ok())
    return Fail(s);

  SystemClock clock;
  // Public URLs default to the bound listeners, so they are filled in between Bind() and Start().
  auto app = ServerApp::Create(flags.options, clock);
  if (!app.ok())
    return Fail(app.status());
  Status bound = (*app)->Bind();
  if (!bound.ok())
    return Fail(bound);
  ControlPlaneOptions& cp = (*app)->control().mutable_options();
  const ServerOptions& o = flags.options;
  if (cp.control_plane_url.empty()) {
    cp.control_plane_url = PublicUrl(o.control_listen, (*app)->control_port(), (*app)->tls());
  }
  if (cp.data_plane_url.empty()) {
    cp.data_plane_url = PublicUrl(o.data_listen.empty() ? o.control_listen : o.data_listen,
                                  (*app)->data_port(), (*app)->tls());
  }
  std::string console_url =
      PublicUrl(o.console_listen.empty() ? o.control_listen : o.console_listen,
                (*app)->console_port(), (*app)->tls());
  Status started = (*app)->Start();
  if (!started.ok())
    return Fail(started);
  std::printf("expanse-server: control plane %s\n", cp.control_plane_url.c_str());
  std::printf("expanse-server: data plane    %s\n", cp.data_plane_url.c_str());
  std::printf("expanse-server: console API   %s\n", console_url.c_str());
  if (!o.releases_dir.empty()) {
    std::printf("expanse-server: release mirror %s/releases (--releases-url)\n",
                PublicUrl(o.control_listen, (*app)->control_port(), (*app)->tls()).c_str());
  }
  if (!(*app)->ca_file().empty()) {
    std::printf("expanse-server: CA for clients (SSL_CERT_FILE): %s\n",
                std::filesystem::absolute((*app)->ca_file()).c_str());
  }
  std::fflush(stdout);

  AlertEvaluatorOptions alert_options;
  alert_options.console_url = console_url;
  AlertEvaluator alerts((*app)->store(), (*app)->telemetry(), clock, (*app)->alert_sender(),
                        alert_options);
  std::thread alert_thread(RunAlerts, std::ref(alerts),
                           std::chrono::milliseconds(alert_interval_ms), std::cref(g_stop));
  std::thread retention_thread(RunRetention, std::ref(**app), std::ref(clock), std::cref(g_stop));

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto next_stale_check = std::chrono::steady_clock::now();
  auto next_flush = next_stale_check + std::chrono::minutes(5);
  while (!g_stop) {
    if (std::chrono::steady_clock::now() >= next_flush) {
      // Sealing head chunks bounds the WAL and the replay time after a crash.
      if (Status s = (*app)->telemetry().Flush(); !s.ok()) {
        std::fprintf(stderr, "expanse-server: telemetry flush: %s\n", s.ToString().c_str());
      }
      if (Status s = (*app)->telemetry().ApplyRetention(); !s.ok()) {
        std::fprintf(stderr, "expanse-server: telemetry retention: %s\n", s.ToString().c_str());
      }
      next_flush += std::chrono::minutes(5);
    }
    if (std::chrono::steady_clock::now() >= next_stale_check) {
      if (auto n = (*app)->control().MarkStaleComputes(); !n.ok()) {
        std::fprintf(stderr, "expanse-server: marking stale computes: %s\n",
                     n.status().message().c_str());
      }
      next_stale_check += std::chrono::seconds(15);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("expanse-server: shutting down\n");
  alert_thread.join();
  retention_thread.join();
  (*app)->Stop();
  // Seal and persist the head chunks, so the next start has no WAL to replay and the
  // telemetry directory holds exactly the data at rest.
  if (Status s = (*app)->telemetry().Flush(); !s.ok()) {
    std::fprintf(stderr, "expanse-server: telemetry flush at shutdown: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace expanse::server
