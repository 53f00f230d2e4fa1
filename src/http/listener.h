// Listener: one HTTP(S) endpoint of expanse-server (the control plane, the data
// plane, the console), on cpp-httplib.
//
//   EXPANSE_ASSIGN_OR_RETURN(auto listener, http::Listener::Create(options));
//   listener->Get("/api/v1/jobs/:job_id", [&](const http::Request& request) {
//     return http::JsonResponse(200, store.JobJson(request.PathParam("job_id")));
//   });
//   EXPANSE_RETURN_IF_ERROR(listener->Start());   // binds, serves on worker threads
//   ...
//   listener->Stop();                             // or let the destructor do it
//
// Every answer the listener makes itself is a JSON error (http/error.h): unknown path
// 404 "not_found", known path with another method 405 "method_not_allowed" (with
// Allow), body over the route's limit 413 "body_too_large", a handler that throws 500
// "internal" (and an error_log line), malformed requests 400 "bad_request".
//
// Body limits: a route may declare its own (RouteOptions::max_body_bytes); the others take
// ListenerOptions::max_body_bytes. Either is enforced while the body is read, counting the
// bytes after Content-Encoding is undone, so a gzip bomb is refused after at most the limit
// has been decompressed, before any handler sees it.
//
// Memory: after a request whose body reached trim_heap_after_bytes, or whose handler called
// RequestHeapTrim(), the listener calls glibc's malloc_trim(0) once the response is written.
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
#include <thread>

#include "core/result.h"
#include "core/status.h"
#include "http/message.h"
#include "http/router.h"

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
  // A request body at least this large has malloc_trim(0) run after its response; 0: only
  // when the handler asks (RequestHeapTrim).
  size_t trim_heap_after_bytes = 1 << 20;
  // Bound each read and write on a connection; the read timeout also bounds the TLS
  // handshake, so a client that connects and sends nothing holds a worker this long.
  std::chrono::seconds read_timeout{10};
  std::chrono::seconds write_timeout{10};
  // How long an idle keep-alive connection is held open for its next request, which
  // is also how long Stop() may wait for such a connection to go away.
  std::chrono::seconds keep_alive_timeout{2};
  size_t keep_alive_max_requests = 100;  // >= 1; 1 closes every connection after a request
  // Connections served at once (httplib serves one connection per thread); further
  // accepted connections wait in a queue. >= 1.
  size_t worker_threads = 8;
  // Where the listener reports handler exceptions and dropped response headers.
  // Null: spdlog::error. Called from worker threads.
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
// small body (a decompressed batch). Does nothing outside a listener's worker thread.
void RequestHeapTrim();

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

  // Binds and listens, so connections queue in the kernel until Start(); returns the
  // port (useful with port 0). kUnavailable when the address is in use,
  // kPermissionDenied for a privileged port, kInvalidArgument for a host that does not
  // resolve or is not on this machine.
  Result<int> Bind();

  // Binds if Bind() has not run, then serves on a background thread. Returns once
  // the listener accepts connections.
  Status Start();

  // Stops accepting, lets requests already being handled finish and answer, then
  // returns. Connections accepted but not yet read are closed unanswered, and an idle
  // keep-alive connection can delay the return by up to keep_alive_timeout.
  // Idempotent; after Stop the listener cannot be started again. Must not be called
  // from a handler (it would wait for that handler to finish).
  void Stop();

  int port() const { return port_; }  // 0 before Bind()
  bool tls() const { return !options_.cert_file.empty(); }
  const ListenerOptions& options() const { return options_; }
  // How many times malloc_trim has run after a response (for tests and metrics).
  uint64_t heap_trims() const { return heap_trims_.load(); }

 private:
  struct Server;  // httplib's server and its listening socket; see listener_server.h

  explicit Listener(ListenerOptions options);
  void AddRoute(std::string_view method, std::string_view pattern, Handler handler,
                RouteOptions route);
  void InstallHandlers();
  void LogError(std::string_view message) const;

  enum class State { kCreated, kBound, kRunning, kStopped };

  const ListenerOptions options_;
  std::unique_ptr<Server> server_;
  Router router_;
  Status route_error_;  // the first malformed route, reported by Bind()

  std::mutex mu_;  // guards state_ and thread_
  State state_ = State::kCreated;
  std::atomic<int> port_{0};
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  std::atomic<uint64_t> heap_trims_{0};
};

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_LISTENER_H_
