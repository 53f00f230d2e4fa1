#include "promstore/forwarder.h"

#include <algorithm>
#include <utility>

#include "net/url_policy.h"
#include "promstore/remote_write.h"

namespace expanse::promstore {

Result<std::unique_ptr<RemoteWriteForwarder>> RemoteWriteForwarder::Start(
    ForwarderOptions options) {
  if (options.url.empty())
    return InvalidArgumentError("--forward-remote-write needs a URL");
  if (Status allowed = net::CheckUrlAllowed(options.url); !allowed.ok())
    return InvalidArgumentError("--forward-remote-write " + options.url + ": " + allowed.message());
  net::HttpClientOptions client_options;
  client_options.ca_file = options.ca_file;
  client_options.total_timeout = options.timeout;
  client_options.connect_timeout = std::min(options.timeout, client_options.connect_timeout);
  client_options.user_agent = "expanse-server";
  EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> client,
                           net::HttpClient::Create(client_options));
  std::unique_ptr<RemoteWriteForwarder> forwarder(
      new RemoteWriteForwarder(std::move(options), std::move(client)));
  forwarder->thread_ = std::thread([f = forwarder.get()] { f->Run(); });
  return forwarder;
}

RemoteWriteForwarder::~RemoteWriteForwarder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void RemoteWriteForwarder::Enqueue(const tsdb::Batch& batch) {
  Request request;
  request.samples = batch.sample_count();
  if (request.samples == 0)
    return;
  request.body = EncodeWriteRequest(batch);
  {
    std::lock_guard lock(mu_);
    queued_bytes_ += request.body.size();
    queue_.push_back(std::move(request));
    // The front may be in the sender's hands (it stays queued until answered): drop after it.
    while (queued_bytes_ > options_.max_queue_bytes && queue_.size() > 1) {
      queued_bytes_ -= queue_[1].body.size();
      queue_.erase(queue_.begin() + 1);
      ++stats_.dropped_batches;
    }
  }
  cv_.notify_all();
}

RemoteWriteForwarder::Stats RemoteWriteForwarder::stats() {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.queued_batches = queue_.size();
  return s;
}

void RemoteWriteForwarder::Run() {
  std::chrono::milliseconds backoff = options_.first_backoff;
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_)
      return;
    // The front stays queued (and its bytes counted) while it is sent; Enqueue drops behind it.
    const net::HttpRequest request =
        RemoteWriteRequest(options_.url, queue_.front().body, options_.bearer_token);
    const size_t samples = queue_.front().samples;
    lock.unlock();
    const Result<net::HttpResponse> response = client_->Send(request);
    lock.lock();
    const int status = response.ok() ? response->status : 0;
    const bool retry = status == 0 || status == 429 || status >= 500;
    if (!retry) {
      if (status >= 200 && status < 300) {
        ++stats_.sent_batches;
        stats_.sent_samples += samples;
      } else {
        ++stats_.dropped_batches;
      }
      queued_bytes_ -= queue_.front().body.size();
      queue_.pop_front();
      backoff = options_.first_backoff;
      continue;
    }
    ++stats_.failed_attempts;
    cv_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min(options_.max_backoff, backoff * 2);
  }
}

}  // namespace expanse::promstore
