// RemoteWriteForwarder: a copy of the samples of every batch the server stores, sent with the
// remote-write protocol to a site's own Prometheus-compatible store (--forward-remote-write),
// so that a site with Prometheus and Grafana keeps its dashboards beside Expanse's console.
//
// Best effort by design, and never in ingest's way: Enqueue encodes the batch and returns; one
// thread sends the queue in order. A receiver that is down or overloaded (no connection, 5xx,
// 429) is retried with backoff (1 s doubling to 30 s) while later batches wait behind; a
// refusal (another 4xx: the receiver will never take that batch) drops it. When the queue
// holds max_queue_bytes of requests the oldest is dropped. Every drop is counted (Stats, and
// /metrics), and what Expanse stores is unaffected: its own store is the record.
#ifndef EXPANSE_PROMSTORE_FORWARDER_H_
#define EXPANSE_PROMSTORE_FORWARDER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/result.h"
#include "net/http_client.h"
#include "tsdb/sample.h"

namespace expanse::promstore {

struct ForwarderOptions {
  std::string url{};           // the receiver's remote-write URL
  std::string bearer_token{};  // "Authorization: Bearer" when not empty
  std::string ca_file{};       // "" = the system's CAs
  size_t max_queue_bytes = 64u << 20;
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds first_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
};

class RemoteWriteForwarder {
 public:
  struct Stats {
    uint64_t sent_batches = 0, sent_samples = 0;
    uint64_t dropped_batches = 0;  // refused by the receiver, or pushed out of a full queue
    uint64_t failed_attempts = 0;  // sends that will be tried again
    size_t queued_batches = 0;
  };

  // kInvalidArgument for a URL the client policy refuses (plain http only to loopback).
  static Result<std::unique_ptr<RemoteWriteForwarder>> Start(ForwarderOptions options);
  // Stops the thread; what is still queued is dropped (the site's copy, not the record).
  ~RemoteWriteForwarder();
  RemoteWriteForwarder(const RemoteWriteForwarder&) = delete;
  RemoteWriteForwarder& operator=(const RemoteWriteForwarder&) = delete;

  void Enqueue(const tsdb::Batch& batch);
  Stats stats();

 private:
  struct Request {
    std::string body;
    size_t samples = 0;
  };
  RemoteWriteForwarder(ForwarderOptions options, std::unique_ptr<net::HttpClient> client)
      : options_(std::move(options)), client_(std::move(client)) {}
  void Run();

  const ForwarderOptions options_;
  std::unique_ptr<net::HttpClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  size_t queued_bytes_ = 0;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace expanse::promstore

#endif  // EXPANSE_PROMSTORE_FORWARDER_H_
