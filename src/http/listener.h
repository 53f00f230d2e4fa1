// Listener: one HTTP(S) endpoint of expanse-server (the control plane, the data
// plane, the console), on Boost.Beast and Asio.
//
//   EXPANSE_ASSIGN_OR_RETURN(auto listener, http::Listener::Create(options));
//   listener->Get("/api/v1/jobs/:job_id", [&](const http::Request& request) {
//     return http::JsonResponse(200, store.JobJson(request.PathParam("job_id")));
//   });
//   EXPANSE_RETURN_IF_ERROR(listener->Start());   // binds, serves on background threads
//   ...
//   listener->Stop();                             // or let the destructor do it
//
// Every answer the listener makes itself is a JSON error (http/error.h, listed in
// docs/formats/http-errors.md): unknown path 404 "not_found", known path with another
// method 405 "method_not_allowed" (with Allow), body over the route's limit 413
// "body_too_large", a handler that throws 500 "internal" (and an error_log line), malformed
// requests 400 "bad_request", too many requests waiting for a worker 503 "overloaded".
//
// Threads: connections are read and written asynchronously by io_threads (accept, TLS,
// parsing, writing, deadlines); a handler runs on one of worker_threads only once its
// request is complete, so a slow or idle client never holds a worker. Every phase of a
// connection has an absolute deadline (handshake, header, body, write), not an inactivity
// timeout: a client sending a byte a second is cut when the phase's deadline passes.
// Connections are capped in all and per client address (IPv6 per /64), checked at accept.
//
// Body limits: a route may declare its own (RouteOptions::max_body_bytes); the others take
// ListenerOptions::max_body_bytes. A Content-Length over the limit is refused (413) before
// any of the body is read; a chunked body is refused once it passes the limit; either is
// counted after Content-Encoding is undone, so a gzip bomb is refused after at most the
// limit has been decompressed, before any handler sees it.
// Bodies being read or handled are bounded together, in all and per client address
// (max_request_body_bytes_in_flight), before any byte is read: a body is read before its
// request can be authenticated.
//
// Deferred routes: a route added with GetDeferred() (long-polls) or PostDeferred() (ingest,
// answered by the thread that writes its group) answers through a Responder, now or later
// from any thread; while it waits it holds no thread at all.
//
// Memory: after a request or an answer whose body reached trim_heap_after_bytes, or whose
// handler called RequestHeapTrim(), the listener calls glibc's malloc_trim(0) once the
// response is written. Large answers held while slow clients read them are bounded together
// (max_answer_bytes_in_flight).
// glibc keeps freed memory in its per-thread arenas; without the trim, one large request
// (a big batch decoded and parsed) leaves the process that much larger for good.

#ifndef EXPANSE_HTTP_LISTENER_H_
#define EXPANSE_HTTP_LISTENER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "http/message.h"
#include "http/router.h"

namespace expanse::http_internal {
class PendingAnswer;  // listener_core.h
class ListenerCore;   // listener_core.h
class Engine;         // listener_engine.h
}  // namespace expanse::http_internal

namespace expanse::http {

struct ListenerOptions {
  std::string name{};  // "control", "data", "console": prefixes errors and log lines
  // An IP literal, or a name resolved once by Bind(). Plain HTTP needs a loopback
  // host (see IsLoopbackHost) and must also end up bound to a loopback address.
  std::string host{};
  int port = 0;  // 0: the kernel picks a free port; Bind() returns it
  // PEM certificate chain (server certificate first) and private key. Both empty:
  // plain HTTP.
  std::string cert_file{};
  std::string key_file{};
  // Routes without their own limit (RouteOptions): the most body bytes accepted, after
  // Content-Encoding is undone.
  size_t max_body_bytes = 8 << 20;
  // A request body or an answer body (of a route that is not deferred) at least this large has
  // malloc_trim(0) run after the response; 0: only when the handler asks (RequestHeapTrim).
  size_t trim_heap_after_bytes = 1 << 20;
  // Deadlines, each absolute for its phase of a connection: the TLS handshake; a request's
  // header, counted from its first byte; its body, body_timeout plus the time the body's
  // length takes at min_body_rate_bytes_per_s; writing an answer, likewise from its size.
  // Past one, the connection is closed without an answer.
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  size_t min_body_rate_bytes_per_s = 64 << 10;
  // How long an idle keep-alive connection is held open for its next request.
  std::chrono::milliseconds keep_alive_timeout{2000};
  size_t keep_alive_max_requests = 100;  // >= 1; 1 closes every connection after a request
  // Open connections, in all and per client address (an IPv6 client per /64); over either,
  // a new connection is closed at accept, before TLS. Both >= 1; max_connections must fit
  // in the process's open-file limit.
  size_t max_connections = 1024;
  size_t max_connections_per_address = 64;
  // Threads that read and write connections (1 or 2) and threads that run handlers (>= 1).
  size_t io_threads = 1;
  size_t worker_threads = 8;
  // Complete requests waiting for a worker; over it, 503 "overloaded" at once.
  size_t max_queued_requests = 256;
  // Requests of deferred routes parked at once (GetDeferred, PostDeferred); over it, 503
  // "overloaded".
  size_t max_parked_requests = 1024;
  // Bytes of large answer bodies (over 64 KiB) held at once while clients read them: a client
  // reading at the minimum rate holds a 64 MiB answer for ~17 minutes, and 64 connections of
  // one address could hold gigabytes. An answer that would pass it is replaced by 503
  // "overloaded" (one answer alone always goes out, whatever its size).
  size_t max_answer_bytes_in_flight = size_t{1} << 30;
  // Request bodies held at once, in all and per client address (an IPv6 client per /64),
  // counted from their announced size when their header comes (a compressed body also counts
  // its route's limit, what it may inflate to) until their handler is done. A body that would
  // pass either beside the others is answered 503 "overloaded" (Retry-After) before it is
  // read, and its connection closed; one body alone always goes in. Bodies up to 64 KiB are
  // not counted. Both >= 1.
  size_t max_request_body_bytes_in_flight = size_t{1} << 30;
  size_t max_request_body_bytes_per_address = size_t{256} << 20;
  // Where the listener reports handler exceptions and dropped response headers.
  // Null: spdlog::error. Called from any of the listener's threads.
  std::function<void(std::string_view message)> error_log{};
};

// What a route declares about itself beyond its handler.
struct RouteOptions {
  // The most body bytes the route accepts, after Content-Encoding is undone; 0: the
  // listener's max_body_bytes. May be larger or smaller than the listener's.
  size_t max_body_bytes = 0;
};

// From a handler: have the listener give freed heap memory back to the system (malloc_trim)
// once this request's response is written. For handlers that built something large from a
// small body (a decompressed batch). In a deferred handler it is that request's, whenever its
// answer comes (call it before Respond). Does nothing outside a listener's worker thread.
void RequestHeapTrim();

// The answer of a deferred request (Listener::GetDeferred, PostDeferred), given now or later
// from any thread. Copies share one answer; the first Respond wins.
class Responder {
 public:
  explicit Responder(std::shared_ptr<http_internal::PendingAnswer> pending);

  // Sends `response`. false when the request was answered already (by another Respond or
  // the fallback). Thread-safe. A parked request keeps its connection until it is answered,
  // so every Responder must be answered, by its handler or its fallback.
  bool Respond(Response response) const;
  // Unless answered within `after`, `fallback` runs on a worker thread and its result is
  // sent. It also runs, at once, when the listener stops. Call at most once.
  void ExpireAfter(std::chrono::milliseconds after, std::function<Response()> fallback) const;
  bool answered() const;
  // Have the listener give freed heap memory back (malloc_trim) once the answer is written:
  // RequestHeapTrim for a deferred request. Call before Respond.
  void TrimHeapAfterAnswer() const;

 private:
  std::shared_ptr<http_internal::PendingAnswer> pending_;
};

// Runs on a worker thread; answers through the Responder, before returning or later. The
// Request is valid only while the handler runs: copy what a later answer needs. A request
// left unanswered when its last Responder copy goes is answered 500 and logged.
using DeferredHandler = std::function<void(const Request&, Responder)>;

class Listener {
 public:
  // Checks the options and, for TLS, loads the certificate and key. Fails with
  // kInvalidArgument for plain HTTP on a non-loopback host ("plain HTTP is only
  // allowed on loopback; give --tls-cert/--tls-key or --tls-self-signed"), for only
  // one of cert_file/key_file, for unusable limits, and for a certificate or key
  // that OpenSSL cannot load or that do not match.
  static Result<std::unique_ptr<Listener>> Create(ListenerOptions options);

  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();  // Stop()

  // Route registration (patterns: see router.h). All routes must be added before
  // Start(); adding one later aborts, since workers read the routes unlocked. A
  // malformed or duplicate pattern is reported by Bind()/Start().
  void Get(std::string_view pattern, Handler handler);
  void Post(std::string_view pattern, Handler handler, RouteOptions route = {});
  void Put(std::string_view pattern, Handler handler, RouteOptions route = {});
  void Patch(std::string_view pattern, Handler handler, RouteOptions route = {});
  void Delete(std::string_view pattern, Handler handler, RouteOptions route = {});
  // A GET route whose handler may answer later (long-polls): see Responder.
  void GetDeferred(std::string_view pattern, DeferredHandler handler);
  // A POST route whose handler may answer later, from another thread: one whose work joins
  // other requests' (ingest's group commit), so that no worker sits waiting for it.
  void PostDeferred(std::string_view pattern, DeferredHandler handler, RouteOptions route = {});

  // Binds and listens, so connections queue in the kernel until Start(); returns the
  // port (useful with port 0). kUnavailable when the address is in use,
  // kPermissionDenied for a privileged port, kInvalidArgument for a host that does not
  // resolve or is not on this machine.
  Result<int> Bind();

  // Binds if Bind() has not run, then serves on a background thread. Returns once
  // the listener accepts connections.
  Status Start();

  // Stops accepting, lets requests already being handled finish and answer (parked
  // long-polls get their fallback), then returns. Connections still in their handshake or
  // reading a request, and idle keep-alive connections, are closed unanswered.
  // Idempotent; after Stop the listener cannot be started again. Must not be called
  // from a handler (it would wait for that handler to finish).
  void Stop();

  int port() const { return port_; }  // 0 before Bind()
  bool tls() const { return !options().cert_file.empty(); }
  const ListenerOptions& options() const;
  // How many times malloc_trim has run after a response (for tests and metrics).
  uint64_t heap_trims() const;
  // Connections closed at accept because of max_connections(_per_address).
  uint64_t refused_connections() const;

 private:
  explicit Listener(ListenerOptions options);
  void AddRoute(std::string_view method, std::string_view pattern, Handler handler,
                RouteOptions route, size_t deferred_id = 0);
  void AddDeferredRoute(std::string_view method, std::string_view pattern, DeferredHandler handler,
                        RouteOptions route);
  void CloseListenSocket();

  enum class State { kCreated, kBound, kRunning, kStopped };

  // Options, routes and the handling of one request: shared with the engine's sessions.
  std::shared_ptr<http_internal::ListenerCore> core_;
  Status route_error_;  // the first malformed route, reported by Bind()
  // Created by Create() (TLS only) and Bind(); handed to the engine by Start().
  std::shared_ptr<void> tls_context_;  // an SSL_CTX
  int listen_fd_ = -1;
  std::unique_ptr<http_internal::Engine> engine_;

  std::mutex mu_;  // guards state_, listen_fd_, engine_
  State state_ = State::kCreated;
  std::atomic<int> port_{0};
};

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_LISTENER_H_
