// The engine under a Listener: the io_context and its threads, the accept loop with the
// connection caps, the worker pool, plain-HTTP sessions, and a graceful Stop().
// TLS sessions are instantiated in listener_session_tls.cc.

#include "http/listener_engine.h"

#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <openssl/ssl.h>

#include "http/listener_session.h"  // first Boost include: see the note on <utility> there

namespace expanse::http_internal {

EngineState::EngineState(std::shared_ptr<ListenerCore> listener_core, std::shared_ptr<void> ssl_ctx)
    : core(std::move(listener_core)),
      options(core->options()),
      pool(options.worker_threads),
      limiter(options.max_connections, options.max_connections_per_address),
      body_budget(options.max_request_body_bytes_in_flight,
                  options.max_request_body_bytes_per_address) {
  if (ssl_ctx) {
    // asio's context takes ownership of the SSL_CTX it is given; the Listener keeps its own.
    SSL_CTX* native = static_cast<SSL_CTX*>(ssl_ctx.get());
    SSL_CTX_up_ref(native);
    tls.emplace(native);
  }
}

uint64_t EngineState::Register(std::weak_ptr<SessionBase> session) {
  const std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  sessions_.emplace(id, Entry{std::move(session), false});
  return id;
}

void EngineState::Unregister(uint64_t id) {
  const std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(id);
  if (sessions_.empty()) {
    gone_.notify_all();
  }
}

std::vector<std::shared_ptr<SessionBase>> EngineState::TakeUntoldSessions() {
  std::vector<std::shared_ptr<SessionBase>> untold;
  const std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, entry] : sessions_) {
    if (entry.told) {
      continue;
    }
    // Null while the session is being destroyed: it needs no telling.
    if (auto session = entry.session.lock()) {
      entry.told = true;
      untold.push_back(std::move(session));
    }
  }
  return untold;
}

bool EngineState::WaitForNoSessions(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  return gone_.wait_for(lock, wait, [this] { return sessions_.empty(); });
}

std::chrono::milliseconds EngineState::TransferDeadline(std::chrono::milliseconds base,
                                                        uint64_t bytes) const {
  const uint64_t rate = std::max<uint64_t>(1, options.min_body_rate_bytes_per_s);
  // Capped at a day, far past any real transfer, so the sum cannot overflow.
  const uint64_t ms =
      std::min<uint64_t>(bytes / rate * 1000 + (bytes % rate) * 1000 / rate, uint64_t{86'400'000});
  return base + std::chrono::milliseconds(ms);
}

std::pair<std::string, int> PeerOf(const tcp::socket& socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) {
    return {"", 0};
  }
  asio::ip::address address = peer.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return {address.to_string(), peer.port()};
}

template <>
void Session<beast::tcp_stream>::Handshake() {
  ReadRequest(true);
}

template <>
void Session<beast::tcp_stream>::Shutdown() {
  Linger();
}

void StartPlainSession(const std::shared_ptr<EngineState>& engine, tcp::socket socket,
                       ConnectionLimiter::Slot slot) {
  auto [peer, port] = PeerOf(socket);
  auto session = std::make_shared<Session<beast::tcp_stream>>(
      engine, std::move(slot), std::move(peer), port, std::move(socket));
  session->Start();
}

namespace {

class EngineImpl final : public Engine {
 public:
  explicit EngineImpl(std::shared_ptr<EngineState> state)
      : state_(std::move(state)),
        acceptor_(state_->io),
        retry_timer_(state_->io),
        work_(asio::make_work_guard(state_->io)) {}

  ~EngineImpl() override { Stop(); }

  Status Run(int listen_fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&address), &length);
    beast::error_code ec;
    acceptor_.assign(address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listen_fd, ec);
    if (ec) {
      return InternalError("cannot serve the listening socket: " + ec.message());
    }
    Accept();
    const size_t threads = std::clamp<size_t>(state_->options.io_threads, 1, 2);
    for (size_t i = 0; i < threads; ++i) {
      io_threads_.emplace_back([this] { state_->io.run(); });
    }
    return OkStatus();
  }

  void Stop() override {
    if (stopped_.exchange(true)) {
      return;
    }
    state_->stopping = true;
    asio::post(state_->io, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      retry_timer_.cancel();
    });
    // Sessions accepted while this runs are told on a later round.
    do {
      for (const auto& session : state_->TakeUntoldSessions()) {
        session->PostStop();
      }
    } while (!state_->WaitForNoSessions(std::chrono::milliseconds(50)));
    work_.reset();
    state_->io.stop();
    for (std::thread& thread : io_threads_) {
      thread.join();
    }
    state_->pool.join();
    // The posted close may not have run before io.stop(); nothing else runs now. Once Stop()
    // returns, connections must be refused, not queued in the backlog of a socket no one
    // accepts from.
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  uint64_t refused_connections() const override { return state_->limiter.refused(); }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(state_->io),
                           [this](beast::error_code ec, tcp::socket socket) {
                             if (ec == asio::error::operation_aborted || state_->stopping.load()) {
                               return;
                             }
                             if (ec) {
                               // Out of file descriptors or memory: try again shortly rather than
                               // spin.
                               LogThrottled("cannot accept a connection: " + ec.message());
                               retry_timer_.expires_after(std::chrono::milliseconds(100));
                               retry_timer_.async_wait([this](beast::error_code error) {
                                 if (!error && !state_->stopping.load()) {
                                   Accept();
                                 }
                               });
                               return;
                             }
                             OnAccepted(std::move(socket));
                             Accept();
                           });
  }

  void OnAccepted(tcp::socket socket) {
    const std::string peer = PeerOf(socket).first;
    std::optional<ConnectionLimiter::Slot> slot = state_->limiter.TryAcquire(AddressKey(peer));
    if (!slot) {
      LogThrottled("refused a connection from " + peer + ": " +
                   std::to_string(state_->options.max_connections_per_address) +
                   " per address or " + std::to_string(state_->options.max_connections) +
                   " in all are open");
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    if (state_->tls) {
      StartTlsSession(state_, std::move(socket), std::move(*slot));
    } else {
      StartPlainSession(state_, std::move(socket), std::move(*slot));
    }
  }

  // At most one line a minute: a flood of refused connections must not flood the log.
  void LogThrottled(const std::string& message) {
    const auto now = std::chrono::steady_clock::now();
    if (last_log_ && now - *last_log_ < std::chrono::minutes(1)) {
      return;
    }
    last_log_ = now;
    state_->core->LogError(state_->options.name + " listener: " + message);
  }

  std::shared_ptr<EngineState> state_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> io_threads_;
  std::atomic<bool> stopped_{false};
  std::optional<std::chrono::steady_clock::time_point> last_log_{};  // the acceptor's thread only
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Start(std::shared_ptr<ListenerCore> core, int listen_fd,
                                              std::shared_ptr<void> ssl_ctx) {
  auto state = std::make_shared<EngineState>(std::move(core), std::move(ssl_ctx));
  auto engine = std::make_unique<EngineImpl>(std::move(state));
  EXPANSE_RETURN_IF_ERROR(engine->Run(listen_fd));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace expanse::http_internal
