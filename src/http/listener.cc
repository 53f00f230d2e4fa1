#include "http/listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "core/loopback.h"
#include "http/error.h"
#include "http/listener_core.h"
#include "http/listener_engine.h"
#include "http/openssl_util.h"

namespace expanse::http {

namespace {

constexpr std::string_view kPlainHttpRefused =
    "plain HTTP is only allowed on loopback; give --tls-cert/--tls-key or --tls-self-signed";

// Not SO_REUSEPORT, which would let a second server bind the same port and silently take
// half of the connections. SO_REUSEADDR alone still allows a restart while old connections
// sit in TIME_WAIT.
void SetListenSocketOptions(int sock) {
  const int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  // Inherited by accepted sockets: an answer's last segment must not wait for the client's
  // delayed ACK (up to 40 ms per request on a keep-alive connection).
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
}

// A listening socket for host:port, or -1 with errno set (0 when the host did not resolve).
int OpenListenSocket(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    errno = 0;
    return -1;
  }
  int error = 0;
  int sock = -1;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    sock = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (sock < 0) {
      error = errno;
      continue;
    }
    SetListenSocketOptions(sock);
    if (bind(sock, ai->ai_addr, ai->ai_addrlen) == 0 && listen(sock, SOMAXCONN) == 0) {
      break;
    }
    error = errno;
    close(sock);
    sock = -1;
  }
  freeaddrinfo(found);
  errno = error;
  return sock;
}

bool IsLoopbackAddress(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) ||
           (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr) && v6->sin6_addr.s6_addr[12] == 127);
  }
  return false;
}

Status CheckOptions(const ListenerOptions& options, const std::string& where) {
  if (options.host.empty()) {
    return InvalidArgumentError(where + ": no host to listen on");
  }
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgumentError(where + ": port " + std::to_string(options.port) +
                                " is outside 0..65535");
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return InvalidArgumentError(where +
                                ": TLS needs both a certificate and a key (--tls-cert and "
                                "--tls-key); only one was given");
  }
  if (options.cert_file.empty() && !IsLoopbackHost(options.host)) {
    return InvalidArgumentError(where + ": " + std::string(kPlainHttpRefused));
  }
  if (options.max_body_bytes == 0 || options.worker_threads == 0 ||
      options.keep_alive_max_requests == 0 || options.max_connections == 0 ||
      options.max_connections_per_address == 0 || options.max_queued_requests == 0 ||
      options.max_parked_requests == 0 || options.min_body_rate_bytes_per_s == 0 ||
      options.max_request_body_bytes_in_flight == 0 ||
      options.max_request_body_bytes_per_address == 0) {
    return InvalidArgumentError(where +
                                ": max_body_bytes, worker_threads, keep_alive_max_requests, "
                                "max_connections(_per_address), max_queued_requests, "
                                "max_parked_requests, min_body_rate_bytes_per_s and "
                                "max_request_body_bytes_(in_flight|per_address) must be "
                                "positive");
  }
  if (options.io_threads < 1 || options.io_threads > 2) {
    return InvalidArgumentError(where + ": io_threads must be 1 or 2");
  }
  if (options.handshake_timeout.count() <= 0 || options.header_timeout.count() <= 0 ||
      options.body_timeout.count() <= 0 || options.write_timeout.count() <= 0 ||
      options.keep_alive_timeout.count() <= 0) {
    return InvalidArgumentError(where + ": timeouts must be positive");
  }
  // Each connection is a descriptor; past the process's limit accept() fails and the
  // listener would refuse everyone rather than the newest.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
      options.max_connections + 64 > files.rlim_cur) {
    return InvalidArgumentError(
        where + ": max_connections " + std::to_string(options.max_connections) +
        " does not fit the open-file limit " + std::to_string(files.rlim_cur) +
        " (raise LimitNOFILE or lower the connection limit)");
  }
  return OkStatus();
}

// A TLS server context with our policy and the certificate chain and key, keeping
// OpenSSL's reason when loading fails.
Result<std::shared_ptr<void>> MakeTlsContext(const ListenerOptions& options,
                                             const std::string& where) {
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (raw == nullptr) {
    return InvalidArgumentError(
        where + ": cannot create a TLS context: " + http_internal::TakeOpenSslErrors());
  }
  std::shared_ptr<void> owned(raw,
                              [](void* context) { SSL_CTX_free(static_cast<SSL_CTX*>(context)); });
  // Nothing we talk to needs less than TLS 1.2.
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_options(raw, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(raw, options.cert_file.c_str()) != 1) {
    return InvalidArgumentError(where + ": cannot load the TLS certificate chain from \"" +
                                options.cert_file + "\": " + http_internal::TakeOpenSslErrors());
  }
  if (SSL_CTX_use_PrivateKey_file(raw, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgumentError(where + ": cannot load the TLS private key from \"" +
                                options.key_file + "\" (or it does not belong to \"" +
                                options.cert_file + "\"): " + http_internal::TakeOpenSslErrors());
  }
  if (SSL_CTX_check_private_key(raw) != 1) {
    return InvalidArgumentError(where + ": the TLS private key \"" + options.key_file +
                                "\" does not match the certificate \"" + options.cert_file + "\"");
  }
  return owned;
}

}  // namespace

Listener::Listener(ListenerOptions options)
    : core_(std::make_shared<http_internal::ListenerCore>(std::move(options))) {}

Result<std::unique_ptr<Listener>> Listener::Create(ListenerOptions options) {
  if (options.name.empty()) {
    options.name = "http";
  }
  const std::string where =
      options.name + " listener on " + options.host + ":" + std::to_string(options.port);
  EXPANSE_RETURN_IF_ERROR(CheckOptions(options, where));
  std::shared_ptr<void> tls_context;
  if (!options.cert_file.empty()) {
    EXPANSE_ASSIGN_OR_RETURN(tls_context, MakeTlsContext(options, where));
  }
  std::unique_ptr<Listener> listener(new Listener(std::move(options)));
  listener->tls_context_ = std::move(tls_context);
  return listener;
}

Listener::~Listener() { Stop(); }

const ListenerOptions& Listener::options() const { return core_->options(); }

uint64_t Listener::heap_trims() const { return core_->heap_trims(); }

uint64_t Listener::refused_connections() const {
  return engine_ ? engine_->refused_connections() : 0;
}

void Listener::Get(std::string_view pattern, Handler handler) {
  AddRoute("GET", pattern, std::move(handler), {});
}
void Listener::Post(std::string_view pattern, Handler handler, RouteOptions route) {
  AddRoute("POST", pattern, std::move(handler), route);
}
void Listener::Put(std::string_view pattern, Handler handler, RouteOptions route) {
  AddRoute("PUT", pattern, std::move(handler), route);
}
void Listener::Patch(std::string_view pattern, Handler handler, RouteOptions route) {
  AddRoute("PATCH", pattern, std::move(handler), route);
}
void Listener::Delete(std::string_view pattern, Handler handler, RouteOptions route) {
  AddRoute("DELETE", pattern, std::move(handler), route);
}
void Listener::GetDeferred(std::string_view pattern, DeferredHandler handler) {
  AddDeferredRoute("GET", pattern, std::move(handler), {});
}
void Listener::PostDeferred(std::string_view pattern, DeferredHandler handler, RouteOptions route) {
  AddDeferredRoute("POST", pattern, std::move(handler), route);
}

void Listener::AddDeferredRoute(std::string_view method, std::string_view pattern,
                                DeferredHandler handler, RouteOptions route) {
  if (!handler) {
    AddRoute(method, pattern, nullptr, route);  // reported as an empty handler
    return;
  }
  std::vector<DeferredHandler>& deferred = core_->deferred_handlers();
  deferred.push_back(std::move(handler));
  // The router needs a handler; this one is never called (deferred_id routes go to
  // ListenerCore::ServeDeferred).
  AddRoute(
      method, pattern,
      [](const Request&) { return ErrorResponse(500, "internal", "deferred route"); }, route,
      deferred.size());
}

void Listener::AddRoute(std::string_view method, std::string_view pattern, Handler handler,
                        RouteOptions route, size_t deferred_id) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRunning || state_ == State::kStopped) {
      // Workers read the router without a lock; changing it now would be a data race.
      std::fprintf(stderr, "expanse: %s listener: route %.*s %.*s added after Start()\n",
                   options().name.c_str(), static_cast<int>(method.size()), method.data(),
                   static_cast<int>(pattern.size()), pattern.data());
      std::abort();
    }
  }
  Status status =
      core_->router().Add(method, pattern, std::move(handler), route.max_body_bytes, deferred_id);
  if (!status.ok() && route_error_.ok()) {
    route_error_ = InvalidArgumentError(options().name + " listener: " + status.message());
  }
}

Result<int> Listener::Bind() {
  const std::lock_guard<std::mutex> lock(mu_);
  const ListenerOptions& opts = options();
  const std::string where =
      opts.name + " listener: cannot listen on " + opts.host + ":" + std::to_string(opts.port);
  if (state_ != State::kCreated) {
    return FailedPreconditionError(where + ": Bind() was already called");
  }
  EXPANSE_RETURN_IF_ERROR(route_error_);

  const int sock = OpenListenSocket(opts.host, opts.port);
  if (sock < 0) {
    const int error = errno;
    if (error == EADDRINUSE) {
      return UnavailableError(where + ": the address is already in use");
    }
    if (error == EACCES) {
      return PermissionDeniedError(where +
                                   ": permission denied (ports below 1024 need "
                                   "CAP_NET_BIND_SERVICE)");
    }
    if (error == EADDRNOTAVAIL) {
      return InvalidArgumentError(where + ": the address is not on this machine");
    }
    return InvalidArgumentError(where + ": " +
                                (error == 0 ? std::string("the host does not resolve")
                                            : std::string(std::strerror(error))));
  }
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(sock);
    return InternalError(where + ": " + std::strerror(error));
  }
  // The name passed IsLoopbackHost, but "localhost" is only what the resolver says it is:
  // check where the socket really is.
  if (!tls() && !IsLoopbackAddress(address)) {
    close(sock);
    return InvalidArgumentError(where + ": \"" + opts.host +
                                "\" resolved to a non-loopback address; " +
                                std::string(kPlainHttpRefused));
  }
  const int port = address.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port)
                       : ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  listen_fd_ = sock;
  port_ = port;
  state_ = State::kBound;
  return port;
}

Status Listener::Start() {
  bool bound = false;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRunning || state_ == State::kStopped) {
      return FailedPreconditionError(options().name + " listener: Start() after " +
                                     (state_ == State::kRunning ? "Start()" : "Stop()"));
    }
    bound = state_ == State::kBound;
  }
  if (!bound) {
    EXPANSE_RETURN_IF_ERROR(Bind());
  }
  const std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kBound) {
    return FailedPreconditionError(options().name + " listener: stopped while starting");
  }
  // Routes are final now (AddRoute aborts from here on).
  Result<std::unique_ptr<http_internal::Engine>> engine =
      http_internal::Engine::Start(core_, listen_fd_, tls_context_);
  if (!engine.ok()) {
    CloseListenSocket();
    state_ = State::kStopped;
    return engine.status();
  }
  listen_fd_ = -1;  // the engine's now
  engine_ = *std::move(engine);
  state_ = State::kRunning;
  return OkStatus();
}

void Listener::Stop() {
  const std::lock_guard<std::mutex> lock(mu_);
  if (engine_) {
    engine_->Stop();
  }
  CloseListenSocket();
  state_ = State::kStopped;
}

void Listener::CloseListenSocket() {
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

}  // namespace expanse::http
