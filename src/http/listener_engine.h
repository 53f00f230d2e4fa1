// Internal to the http module: the I/O engine under a Listener (Boost.Asio and Beast), behind
// a Boost-free interface so that only listener_engine.cc and listener_session_tls.cc compile
// Boost's templates (about 45 CPU-seconds each in the sanitizer build).

#ifndef EXPANSE_HTTP_LISTENER_ENGINE_H_
#define EXPANSE_HTTP_LISTENER_ENGINE_H_

#include <cstdint>
#include <memory>

#include "core/result.h"
#include "http/listener_core.h"

namespace expanse::http_internal {

class Engine {
 public:
  // Serves connections accepted on `listen_fd` (bound and listening; the engine owns it from
  // here on) until Stop(). `ssl_ctx`: an SSL_CTX for TLS, or null for plain HTTP.
  static Result<std::unique_ptr<Engine>> Start(std::shared_ptr<ListenerCore> core, int listen_fd,
                                               std::shared_ptr<void> ssl_ctx);
  virtual ~Engine() = default;

  // Stops accepting, closes connections that are not being answered, lets answers in
  // progress finish (parked requests get their fallback), then joins every thread.
  // Idempotent. Never from one of the engine's threads.
  virtual void Stop() = 0;

  virtual uint64_t refused_connections() const = 0;
};

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_LISTENER_ENGINE_H_
