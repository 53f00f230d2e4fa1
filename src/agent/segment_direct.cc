#include "agent/segment_direct.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "agent/segment_grant_files.h"
#include "agent/segment_relay.h"
#include "core/file_util.h"
#include "crypto/hash.h"
#include "outbox/payload.h"
#include "spool/hostile_read.h"
#include "wire/error_answer.h"
#include "wire/trace_segment_header.h"

namespace expanse::agent {

SegmentDirect::SegmentDirect(SegmentDirectOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      backoff_(options_.backoff_base_ms, options_.backoff_cap_ms, outbox::DefaultRandomSource()) {
  // A segment is at most 64 MiB before compression; a slow link gets a minute for it.
  options_.http.total_timeout = std::chrono::seconds(60);
  Result<std::unique_ptr<net::HttpClient>> client = net::HttpClient::Create(options_.http);
  if (client.ok())
    client_ = std::move(*client);
  else
    client_error_ = client.status().message();
}

SegmentDirect::~SegmentDirect() { WaitForSend(); }

void SegmentDirect::WaitForSend() {
  if (inflight_.valid())
    inflight_.wait();
}

SegmentDirect::Next SegmentDirect::Flush() {
  if (inflight_.valid()) {
    if (inflight_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return Next::kBusy;
    Finish(inflight_.get());
  }
  const int64_t now = clock_.NowMs();
  if (options_.may_relay && now < stats_.relay_until_ms)
    return Next::kRelay;
  if (now < next_attempt_ms_)
    return Next::kBusy;
  const std::vector<SegmentFileEntry> ready = ListSegmentFiles(options_.ready_dir);
  if (ready.empty()) {
    Forget();
    return Next::kIdle;
  }
  if (ready.front().name != name_) {
    Forget();
    name_ = ready.front().name;
  }
  if (sha256_.empty()) {
    // The intake accepted the file; it is the daemon's own, node-local. Hashed here, once.
    Result<std::optional<std::string>> bytes = fs::ReadSmallFile(
        options_.ready_dir + "/" + name_, wire::kMaxTraceSegmentBytes, fs::Symlinks::kRefuse);
    if (!bytes.ok() || !bytes->has_value()) {
      Forget();
      return bytes.ok() ? Next::kBusy : FallBack(bytes.status().message());
    }
    sha256_ = crypto::Sha256Hex(**bytes);
    bytes_ = (*bytes)->size();
  }

  // A grant for it, from the controller?
  const std::string grant_name = SegmentGrantFileName(sha256_);
  const fs::UniqueFd dir_fd(
      open(options_.grant_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.valid()) {
    std::string buffer;
    Result<std::string_view> text =
        spool::ReadHostileFile(dir_fd.get(), options_.grant_dir, grant_name,
                               spool::HostileReadLimits{.expected_uid = options_.expected_uid,
                                                        .max_bytes = kMaxSegmentGrantFileBytes},
                               buffer);
    if (text.ok()) {
      Result<SegmentGrantFile> grant = DecodeSegmentGrantFile(*text);
      if (!grant.ok()) {
        ++stats_.refused["bad_grant_file"];
        stats_.last_error = grant.status().message();
        DropGrant();
        requested_ms_ = 0;  // ask again
      } else if (grant->expires_at_ms <= now + 5000) {
        DropGrant();
        requested_ms_ = 0;
      } else if (client_ == nullptr) {
        return FallBack("no HTTP client: " + client_error_);
      } else {
        inflight_ = std::async(std::launch::async, &SegmentDirect::Send, this,
                               options_.ready_dir + "/" + name_, grant->upload_url, grant->grant);
        return Next::kBusy;
      }
    } else if (text.status().code() == StatusCode::kDataLoss) {
      ++stats_.refused["grant_" + text.status().reason()];
      DropGrant();
      requested_ms_ = 0;
    }
  }

  if (requested_ms_ == 0 || (!options_.may_relay && now - requested_ms_ > options_.rerequest_ms)) {
    Status made = fs::MakeDirectories(options_.grant_dir, 0750);
    if (made.ok()) {
      made = fs::WriteFileAtomically(options_.grant_dir, SegmentGrantRequestName({sha256_, bytes_}),
                                     "", 0600);
    }
    if (!made.ok())
      return options_.may_relay ? FallBack(made.message()) : (Retry(made.message()), Next::kBusy);
    requested_ms_ = now;
    ++stats_.requested;
    return Next::kBusy;
  }
  if (options_.may_relay && now - requested_ms_ > options_.grant_wait_ms) {
    return FallBack("no segment grant within " + std::to_string(options_.grant_wait_ms / 1000) +
                    " s (is the controller running a version that issues them?)");
  }
  return Next::kBusy;
}

// On the send thread: touches nothing but its arguments and the client.
SegmentDirect::Sent SegmentDirect::Send(std::string path, std::string url, std::string grant) {
  Sent sent;
  Result<std::optional<std::string>> bytes =
      fs::ReadSmallFile(path, wire::kMaxTraceSegmentBytes, fs::Symlinks::kRefuse);
  if (!bytes.ok() || !bytes->has_value()) {
    sent.gone = bytes.ok();
    sent.error = bytes.ok() ? "the segment is gone" : bytes.status().message();
    return sent;
  }
  sent.bytes = (*bytes)->size();
  Result<outbox::Payload> payload = outbox::ZstdJsonPayload(**bytes);
  if (!payload.ok()) {
    sent.error = payload.status().message();
    return sent;
  }
  net::HttpRequest request;
  request.method = "POST";
  request.url = std::move(url);
  request.headers = {{"Authorization", "Bearer " + grant}, {"Content-Type", payload->content_type}};
  request.body = std::move(payload->bytes);
  Result<net::HttpResponse> response = client_->Send(request);
  if (!response.ok()) {
    sent.error = response.status().message();
    return sent;
  }
  sent.answered = true;
  sent.status = response->status;
  if (response->status == 200) {
    sent.duplicate = response->body.find("\"duplicate\":true") != std::string::npos;
  } else {
    const wire::ErrorAnswer answer = wire::DecodeErrorAnswer(response->body);
    sent.code = answer.code;
    sent.error = "HTTP " + std::to_string(response->status) +
                 (answer.code.empty() ? "" : " " + answer.code) +
                 (answer.message.empty() ? "" : ": " + answer.message);
  }
  return sent;
}

void SegmentDirect::Finish(Sent sent) {
  if (sent.answered && sent.status == 200) {
    unlink((options_.ready_dir + "/" + name_).c_str());
    DropGrant();
    ++stats_.uploaded;
    stats_.duplicates += sent.duplicate ? 1 : 0;
    stats_.bytes += sent.bytes;
    stats_.last_error.clear();
    backoff_.Reset();
    next_attempt_ms_ = 0;
    Forget();
    return;
  }
  if (sent.gone) {
    DropGrant();
    Forget();  // the intake's bound dropped it meanwhile
    return;
  }
  if (sent.answered && sent.status == 401 && sent.code == "grant_expired") {
    DropGrant();
    requested_ms_ = 0;  // a fresh grant at the next flush
    return;
  }
  // Refused for good: the segment itself, or a grant that does not fit it.
  if (sent.answered && (sent.status == 400 || sent.status == 413 || sent.status == 415 ||
                        (sent.status == 403 && sent.code == "grant_mismatch"))) {
    stats_.last_error = sent.error;
    DropGrant();
    Quarantine(sent.status == 403 ? "grant_mismatch" : "refused_" + std::to_string(sent.status));
    return;
  }
  // Not reachable, busy, or the grant was voided: auto relays, direct asks again later.
  if (sent.answered && sent.status == 401) {
    DropGrant();
    requested_ms_ = 0;
  }
  if (options_.may_relay) {
    FallBack(sent.error);
    return;
  }
  Retry(sent.error);
}

SegmentDirect::Next SegmentDirect::FallBack(const std::string& why) {
  if (!options_.may_relay) {
    Retry(why);
    return Next::kBusy;
  }
  ++stats_.fallbacks;
  stats_.last_error = why;
  stats_.relay_until_ms = clock_.NowMs() + options_.fallback_ms;
  if (options_.log) {
    options_.log("trace segments go by the relay for " +
                 std::to_string(options_.fallback_ms / 60000) + " min: " + why);
  }
  if (!sha256_.empty())
    unlink((options_.grant_dir + "/" + SegmentGrantRequestName({sha256_, bytes_})).c_str());
  Forget();
  return Next::kRelay;
}

void SegmentDirect::Retry(const std::string& why) {
  ++stats_.retries;
  if (stats_.last_error != why && options_.log)
    options_.log("trace segment upload failed, will retry: " + why);
  stats_.last_error = why;
  next_attempt_ms_ = clock_.NowMs() + backoff_.NextDelayMs();
}

void SegmentDirect::Quarantine(const std::string& reason) {
  ++stats_.refused[reason];
  if (options_.log)
    options_.log("trace segment " + name_ + " refused (" + reason + "): " + stats_.last_error);
  const std::string from = options_.ready_dir + "/" + name_;
  if (fs::MakeDirectories(options_.quarantine_dir, 0700).ok()) {
    Result<std::vector<std::string>> held = fs::ListDirectory(options_.quarantine_dir);
    if (held.ok() && held->size() < options_.max_quarantined &&
        rename(from.c_str(), (options_.quarantine_dir + "/" + name_ + "." + reason).c_str()) == 0) {
      Forget();
      return;
    }
  }
  unlink(from.c_str());  // no room to keep it: it goes rather than being refused again
  Forget();
}

void SegmentDirect::DropGrant() {
  if (!sha256_.empty())
    unlink((options_.grant_dir + "/" + SegmentGrantFileName(sha256_)).c_str());
}

void SegmentDirect::Forget() {
  name_.clear();
  sha256_.clear();
  bytes_ = 0;
  requested_ms_ = 0;
}

}  // namespace expanse::agent
