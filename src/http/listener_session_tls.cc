// TLS sessions of a Listener: Session over beast::ssl_stream, in its own file so that the
// heavy template instantiation (about 45 CPU-seconds in the sanitizer build) compiles in
// parallel with listener_engine.cc.

#include <boost/beast/ssl/ssl_stream.hpp>

#include "http/listener_session.h"  // first Boost include: see the note on <utility> there

namespace expanse::http_internal {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <>
void Session<TlsStream>::Handshake() {
  phase_ = Phase::kHandshake;
  // A client that connects and never completes the handshake is cut at this deadline.
  Lowest().expires_after(options_.handshake_timeout);
  stream_.async_handshake(asio::ssl::stream_base::server,
                          [self = shared_from_this()](beast::error_code ec) {
                            if (ec) {
                              self->Close();
                              return;
                            }
                            self->ReadRequest(true);
                          });
}

template <>
void Session<TlsStream>::Shutdown() {
  // close_notify, briefly: a client that does not answer it is simply closed.
  phase_ = Phase::kClosed;
  Lowest().expires_after(std::chrono::milliseconds(500));
  stream_.async_shutdown([self = shared_from_this()](beast::error_code) { self->Linger(); });
}

void StartTlsSession(const std::shared_ptr<EngineState>& engine, tcp::socket socket,
                     ConnectionLimiter::Slot slot) {
  auto [peer, port] = PeerOf(socket);
  auto session =
      std::make_shared<Session<TlsStream>>(engine, std::move(slot), std::move(peer), port,
                                           beast::tcp_stream(std::move(socket)), *engine->tls);
  session->Start();
}

}  // namespace expanse::http_internal
