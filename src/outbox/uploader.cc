#include "outbox/uploader.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/quote.h"
#include "net/url_policy.h"

namespace expanse::outbox {
namespace {

using nlohmann::json;

// {"error":{"code","message"}} (docs/formats/http-errors.md); empty strings when absent.
std::pair<std::string, std::string> ErrorCodeAndMessage(const std::string& body) {
  const json doc = json::parse(body, nullptr, false);
  if (!doc.is_object())
    return {};
  auto error = doc.find("error");
  if (error == doc.end() || !error->is_object())
    return {};
  auto text = [&](const char* key) {
    auto it = error->find(key);
    return it != error->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  // The code becomes a Status reason and goes into log lines unquoted, so only the documented
  // shape is taken.
  std::string code = text("code");
  const bool snake_case =
      !code.empty() && code.size() <= 64 && std::all_of(code.begin(), code.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  return {snake_case ? code : std::string(), text("message")};
}

bool IsPoison(int status) {
  return status == 400 || status == 413 || status == 415 || status == 422;
}

bool HonoursRetryAfter(int status) { return status == 429 || status == 503; }

// "network_error: POST ... refused": the stable reason first, for a quick look in a heartbeat.
std::string Describe(const Status& status) {
  return status.reason().empty() ? status.ToString() : status.reason() + ": " + status.message();
}

std::string JoinUrl(std::string base, std::string_view path) {
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  return base + std::string(path);
}

}  // namespace

Uploader::Uploader(UploaderOptions options, Outbox& outbox, net::HttpClient& client,
                   CredentialSupplier credential, Clock& clock, RandomSource random)
    : options_(std::move(options)),
      ingest_url_(JoinUrl(options_.data_plane_url, kIngestPath)),
      outbox_(outbox),
      client_(client),
      credential_(std::move(credential)),
      clock_(clock),
      backoff_(options_.backoff_base_ms, options_.backoff_cap_ms,
               random ? std::move(random) : DefaultRandomSource()) {}

Result<std::unique_ptr<Uploader>> Uploader::Create(UploaderOptions options, Outbox& outbox,
                                                   net::HttpClient& client,
                                                   CredentialSupplier credential, Clock& clock,
                                                   RandomSource random) {
  if (options.data_plane_url.empty())
    return InvalidArgumentError("uploader: no data-plane URL");
  EXPANSE_RETURN_IF_ERROR(net::CheckUrlAllowed(JoinUrl(options.data_plane_url, kIngestPath)));
  if (!credential)
    return InvalidArgumentError("uploader: no credential supplier");
  return std::unique_ptr<Uploader>(new Uploader(std::move(options), outbox, client,
                                                std::move(credential), clock, std::move(random)));
}

void Uploader::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

Result<RunSummary> Uploader::RunOnce() {
  RunSummary summary;
  {
    std::lock_guard lock(mu_);
    if (!stop_status_.ok())
      return stop_status_;
    if (clock_.NowMs() < stats_.next_attempt_ms) {
      summary.retry_at_ms = stats_.next_attempt_ms;
      return summary;
    }
  }
  while (options_.max_entries_per_run == 0 || summary.acked < options_.max_entries_per_run) {
    EXPANSE_ASSIGN_OR_RETURN(std::optional<OutboxEntry> entry, outbox_.Peek());
    if (!entry) {
      summary.drained = true;
      return summary;
    }
    const std::string credential = credential_();
    if (credential.empty()) {
      return Stop(UnauthenticatedError("uploader: no compute credential is available")
                      .WithReason("credential_missing"));
    }
    net::HttpRequest request{.method = "POST",
                             .url = ingest_url_,
                             .headers = {{"Content-Type", entry->content_type},
                                         {"Authorization", "Bearer " + credential}},
                             .body = std::move(entry->payload)};
    {
      std::lock_guard lock(mu_);
      ++stats_.sent;
    }
    Result<net::HttpResponse> response = client_.Send(request);
    if (!response.ok()) {
      // A request the client refuses to make (a bad header from a malformed credential) will
      // be refused every time.
      if (response.status().code() == StatusCode::kInvalidArgument)
        return Stop(response.status());
      return Retry(summary, Describe(response.status()), std::nullopt);
    }
    const int status = response->status;
    if (status >= 200 && status < 300) {
      const json answer = json::parse(response->body, nullptr, false);
      const bool duplicate = answer.is_object() && answer.value("duplicate", false);
      EXPANSE_RETURN_IF_ERROR(outbox_.Ack(entry->sequence));
      std::lock_guard lock(mu_);
      ++stats_.acked;
      stats_.duplicates += duplicate ? 1 : 0;
      if (stats_.consecutive_failures > 0) {
        Log("uploader: uploads resumed after " + std::to_string(stats_.consecutive_failures) +
            " failed tries");
      }
      stats_.consecutive_failures = 0;
      stats_.last_error.clear();
      stats_.next_attempt_ms = 0;
      backoff_.Reset();
      ++summary.acked;
      continue;
    }
    const auto [code, message] = ErrorCodeAndMessage(response->body);  // code: snake_case or ""
    const std::string described =
        "HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code);
    if (status == 401) {
      return Stop(UnauthenticatedError("uploader: the data plane refused the credential (" +
                                       (code.empty() ? std::string("401") : code) +
                                       "); uploads stopped, nothing was dropped")
                      .WithReason(code.empty() ? "credential_invalid" : code));
    }
    if (IsPoison(status)) {
      const std::string reason = described + (message.empty() ? "" : ": " + message);
      Log("uploader: the data plane refused batch " + std::to_string(entry->sequence) +
          " for good (" + QuoteForMessage(reason, 300) + "); moved to the dead-letter file");
      entry->payload = std::move(request.body);
      Status dead = outbox_.DeadLetter(*entry, reason);
      std::lock_guard lock(mu_);
      ++stats_.dead_lettered;
      ++summary.acked;
      if (!dead.ok())
        return dead;
      continue;
    }
    std::optional<int64_t> retry_after;
    if (HonoursRetryAfter(status)) {
      if (auto value = response->Header("Retry-After"))
        retry_after = ParseRetryAfterMs(*value);
    }
    return Retry(summary, described, retry_after);
  }
  return summary;
}

RunSummary Uploader::Retry(RunSummary summary, std::string error,
                           std::optional<int64_t> retry_after_ms) {
  const int64_t jittered = backoff_.NextDelayMs();
  const int64_t delay =
      retry_after_ms ? std::min(*retry_after_ms, options_.backoff_cap_ms) : jittered;
  std::lock_guard lock(mu_);
  ++stats_.retries;
  if (stats_.consecutive_failures++ == 0) {
    // Logged once per streak: an outage of hours must not fill the log.
    Log("uploader: upload failed (" + error + "); retrying with backoff, nothing is dropped");
  }
  stats_.last_error = std::move(error);
  stats_.next_attempt_ms = clock_.NowMs() + delay;
  summary.retry_at_ms = stats_.next_attempt_ms;
  return summary;
}

Status Uploader::Stop(Status status) {
  Log(status.message());
  std::lock_guard lock(mu_);
  stats_.stopped = true;
  stats_.last_error = Describe(status);
  stop_status_ = status;
  return status;
}

void Uploader::Resume() {
  std::lock_guard lock(mu_);
  stop_status_ = OkStatus();
  stats_.stopped = false;
  stats_.next_attempt_ms = 0;
}

Status Uploader::Run(const std::function<bool(int64_t wait_ms)>& wait) {
  while (true) {
    Result<RunSummary> run = RunOnce();
    int64_t wait_ms = options_.idle_poll_ms;
    if (!run.ok()) {
      if (run.status().code() == StatusCode::kUnauthenticated)
        return run.status();
      // The outbox could not be read or acknowledged (a disk problem): try again later.
      Log("uploader: " + run.status().ToString());
    } else if (run->retry_at_ms > 0) {
      wait_ms = std::max<int64_t>(run->retry_at_ms - clock_.NowMs(), 0);
    } else if (!run->drained) {
      wait_ms = 0;  // more to send; the wait only gives the caller a chance to stop
    }
    if (!wait(wait_ms))
      return OkStatus();
  }
}

UploaderStats Uploader::stats() {
  const uint64_t dropped = outbox_.stats().dropped_entries;
  std::lock_guard lock(mu_);
  UploaderStats stats = stats_;
  stats.dropped = dropped;
  return stats;
}

}  // namespace expanse::outbox
