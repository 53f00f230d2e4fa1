#include "http/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "http/host.h"
#include "http/listener_server.h"
#include "http/openssl_util.h"

namespace expanse::http {

namespace {

constexpr std::string_view kPlainHttpRefused =
    "plain HTTP is only allowed on loopback; give --tls-cert/--tls-key or --tls-self-signed";

// httplib's default also sets SO_REUSEPORT, which lets a second server bind the same
// port and silently take half of the connections. SO_REUSEADDR alone still allows a
// restart while old connections sit in TIME_WAIT.
void SetListenSocketOptions(int sock) {
  const int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  // Inherited by accepted sockets. httplib writes a response's headers and body in two
  // sends; with Nagle the body waits for the client's delayed ACK of the headers, up to
  // 40 ms per request on a keep-alive connection.
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
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
      options.keep_alive_max_requests == 0) {
    return InvalidArgumentError(
        where + ": max_body_bytes, worker_threads and keep_alive_max_requests must be positive");
  }
  if (options.read_timeout.count() <= 0 || options.write_timeout.count() <= 0 ||
      options.keep_alive_timeout.count() <= 0) {
    return InvalidArgumentError(where + ": timeouts must be positive");
  }
  return OkStatus();
}

// Loads the certificate chain and key into a fresh context, keeping OpenSSL's reason
// when that fails (httplib's own constructors discard it).
Result<std::unique_ptr<httplib::Server>> MakeTlsServer(const ListenerOptions& options,
                                                       const std::string& where) {
  std::string error;
  auto setup = [&](SSL_CTX& context) {
    // httplib's constructors allow TLS 1.1; nothing we talk to needs less than 1.2.
    SSL_CTX_set_min_proto_version(&context, TLS1_2_VERSION);
    SSL_CTX_set_options(&context, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(&context, options.cert_file.c_str()) != 1) {
      error = "cannot load the TLS certificate chain from \"" + options.cert_file +
              "\": " + http_internal::TakeOpenSslErrors();
      return false;
    }
    if (SSL_CTX_use_PrivateKey_file(&context, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      error = "cannot load the TLS private key from \"" + options.key_file +
              "\" (or it does not belong to \"" + options.cert_file +
              "\"): " + http_internal::TakeOpenSslErrors();
      return false;
    }
    if (SSL_CTX_check_private_key(&context) != 1) {
      error = "the TLS private key \"" + options.key_file + "\" does not match the certificate \"" +
              options.cert_file + "\"";
      return false;
    }
    return true;
  };
  auto server =
      std::make_unique<AccessibleServer<httplib::SSLServer>>(std::function<bool(SSL_CTX&)>(setup));
  if (!server->is_valid()) {
    if (error.empty()) {
      error = "cannot create a TLS context: " + http_internal::TakeOpenSslErrors();
    }
    return InvalidArgumentError(where + ": " + error);
  }
  return std::unique_ptr<httplib::Server>(std::move(server));
}

}  // namespace

Listener::Listener(ListenerOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<Listener>> Listener::Create(ListenerOptions options) {
  if (options.name.empty()) {
    options.name = "http";
  }
  const std::string where =
      options.name + " listener on " + options.host + ":" + std::to_string(options.port);
  EXPANSE_RETURN_IF_ERROR(CheckOptions(options, where));

  auto server = std::make_unique<Server>();
  if (options.cert_file.empty()) {
    auto plain = std::make_unique<AccessibleServer<httplib::Server>>();
    server->socket = plain.get();
    server->http = std::move(plain);
  } else {
    EXPANSE_ASSIGN_OR_RETURN(server->http, MakeTlsServer(options, where));
    server->socket = dynamic_cast<ListenSocketAccess*>(server->http.get());
  }

  httplib::Server& http = *server->http;
  const size_t threads = options.worker_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_socket_options(SetListenSocketOptions);
  http.set_payload_max_length(options.max_body_bytes);
  http.set_read_timeout(options.read_timeout);
  http.set_write_timeout(options.write_timeout);
  http.set_keep_alive_timeout(options.keep_alive_timeout.count());
  http.set_keep_alive_max_count(options.keep_alive_max_requests);

  std::unique_ptr<Listener> listener(new Listener(std::move(options)));
  listener->server_ = std::move(server);
  listener->InstallHandlers();
  return listener;
}

Listener::~Listener() { Stop(); }

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

void Listener::AddRoute(std::string_view method, std::string_view pattern, Handler handler,
                        RouteOptions route) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRunning || state_ == State::kStopped) {
      // Workers read the router without a lock; changing it now would be a data race.
      std::fprintf(stderr, "expanse: %s listener: route %.*s %.*s added after Start()\n",
                   options_.name.c_str(), static_cast<int>(method.size()), method.data(),
                   static_cast<int>(pattern.size()), pattern.data());
      std::abort();
    }
  }
  Status status = router_.Add(method, pattern, std::move(handler), route.max_body_bytes);
  if (!status.ok() && route_error_.ok()) {
    route_error_ = InvalidArgumentError(options_.name + " listener: " + status.message());
  }
}

Result<int> Listener::Bind() {
  const std::lock_guard<std::mutex> lock(mu_);
  const std::string where = options_.name + " listener: cannot listen on " + options_.host + ":" +
                            std::to_string(options_.port);
  if (state_ != State::kCreated) {
    return FailedPreconditionError(where + ": Bind() was already called");
  }
  EXPANSE_RETURN_IF_ERROR(route_error_);

  httplib::Server& http = *server_->http;
  errno = 0;
  int port = options_.port;
  if (port == 0) {
    port = http.bind_to_any_port(options_.host);
  } else if (!http.bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port < 0) {
    // httplib reports only failure; errno still holds what bind/listen said, or 0
    // when the name did not resolve.
    const int error = errno;
    server_->socket->CloseListenSocket();
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
  if (!tls()) {
    // The name passed IsLoopbackHost, but "localhost" is only what the resolver says
    // it is: check where the socket really is.
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (getsockname(server_->socket->listen_socket(), reinterpret_cast<sockaddr*>(&address),
                    &length) != 0 ||
        !IsLoopbackAddress(address)) {
      server_->socket->CloseListenSocket();
      return InvalidArgumentError(where + ": \"" + options_.host +
                                  "\" resolved to a non-loopback address; " +
                                  std::string(kPlainHttpRefused));
    }
  }
  port_ = port;
  state_ = State::kBound;
  return port;
}

Status Listener::Start() {
  bool bound = false;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kRunning || state_ == State::kStopped) {
      return FailedPreconditionError(options_.name + " listener: Start() after " +
                                     (state_ == State::kRunning ? "Start()" : "Stop()"));
    }
    bound = state_ == State::kBound;
  }
  if (!bound) {
    EXPANSE_RETURN_IF_ERROR(Bind());
  }
  const std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kBound) {
    return FailedPreconditionError(options_.name + " listener: stopped while starting");
  }
  httplib::Server& http = *server_->http;
  // httplib refuses a Content-Length over this before our reader runs; the reader then
  // holds each route to its own limit. Routes are final now (AddRoute aborts from here on).
  http.set_payload_max_length(std::max(options_.max_body_bytes, router_.LargestBodyLimit()));
  thread_ = std::thread([this, &http] {
    http.listen_after_bind();
    listen_returned_ = true;
  });
  // httplib's stop() is a no-op until the listen loop has marked itself running, so
  // a Stop() right after Start() could otherwise leave the loop running forever.
  while (!http.is_running() && !listen_returned_) {
    std::this_thread::yield();
  }
  state_ = State::kRunning;
  return OkStatus();
}

void Listener::Stop() {
  const std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kRunning) {
    server_->http->stop();  // closes the listening socket; the loop drains its workers
    thread_.join();
  } else if (state_ == State::kBound) {
    server_->socket->CloseListenSocket();
  }
  state_ = State::kStopped;
}

void Listener::LogError(std::string_view message) const {
  if (options_.error_log) {
    options_.error_log(message);
  } else {
    spdlog::error("{}", message);
  }
}

}  // namespace expanse::http
