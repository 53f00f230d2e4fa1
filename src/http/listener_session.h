// Internal to the http module, and included only by listener_engine.cc and
// listener_session_tls.cc: one connection of a Listener, on Boost.Beast.
//
// A Session reads one request at a time and answers it before reading the next (HTTP/1.1
// without pipelining in parallel; a pipelined request simply waits in the buffer). Every
// phase has an absolute deadline on the connection's stream (tcp_stream::expires_after arms
// one timer for a whole composed operation, so a client trickling bytes is cut when the
// phase's time is up, however steadily it sends):
//
//   handshake (TLS) -> [idle: keep_alive_timeout until a first byte] -> header -> body
//     -> handler on the worker pool (no deadline: the connection waits, reading nothing)
//     -> write -> back to idle, or close
//
// Everything of one session runs on its strand (the accepted socket's executor), so with two
// I/O threads a session still never races itself. Handlers run on the engine's pool and post
// their answer back to the strand.

#ifndef EXPANSE_HTTP_LISTENER_SESSION_H_
#define EXPANSE_HTTP_LISTENER_SESSION_H_

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>; with
// g++ 12 in C++20 mode it does not compile unless <utility> comes first.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/body_decoder.h"
#include "http/connection_limiter.h"
#include "http/error.h"
#include "http/listener_core.h"

namespace expanse::http_internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// The most header bytes of one request (request line and fields). Browsers' cookies stay far
// below; past it, 431 (or 414 when the request line alone does not fit).
inline constexpr size_t kMaxHeaderBytes = 16 << 10;

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // From any thread: the listener is stopping. The session closes unless it is answering.
  virtual void PostStop() = 0;
};

// What all sessions of one listener share.
class EngineState {
 public:
  EngineState(std::shared_ptr<ListenerCore> listener_core, std::shared_ptr<void> ssl_ctx);

  const std::shared_ptr<ListenerCore> core;
  const http::ListenerOptions& options;
  asio::io_context io;
  asio::thread_pool pool;
  std::optional<asio::ssl::context> tls;
  ConnectionLimiter limiter;
  RequestBodyBudget body_budget;  // ListenerOptions::max_request_body_bytes_in_flight
  std::atomic<size_t> queued{0};  // complete requests waiting for a worker
  std::atomic<size_t> parked{0};  // deferred requests not yet answered
  // Bodies of large answers being written (ListenerOptions::max_answer_bytes_in_flight).
  std::atomic<size_t> answer_bytes{0};
  std::atomic<bool> stopping{false};

  uint64_t Register(std::weak_ptr<SessionBase> session);
  void Unregister(uint64_t id);
  // Sessions registered and not yet told to stop; marks them told.
  std::vector<std::shared_ptr<SessionBase>> TakeUntoldSessions();
  // Waits up to `wait` for the last session to go; true when none is left.
  bool WaitForNoSessions(std::chrono::milliseconds wait);

  // The deadline for moving `bytes` at the listener's minimum rate, plus `base`.
  std::chrono::milliseconds TransferDeadline(std::chrono::milliseconds base, uint64_t bytes) const;

 private:
  struct Entry {
    std::weak_ptr<SessionBase> session;
    bool told = false;
  };
  std::mutex mu_;
  std::condition_variable gone_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Entry> sessions_;
};

// Starts serving an accepted connection (listener_engine.cc, listener_session_tls.cc).
void StartPlainSession(const std::shared_ptr<EngineState>& engine, tcp::socket socket,
                       ConnectionLimiter::Slot slot);
void StartTlsSession(const std::shared_ptr<EngineState>& engine, tcp::socket socket,
                     ConnectionLimiter::Slot slot);

// The peer's address as handlers see it (IPv4-mapped IPv6 unmapped) and its port.
std::pair<std::string, int> PeerOf(const tcp::socket& socket);

template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... StreamArgs>
  Session(std::shared_ptr<EngineState> engine, ConnectionLimiter::Slot slot, std::string peer,
          int port, StreamArgs&&... stream_args)
      : engine_(std::move(engine)),
        core_(*engine_->core),
        options_(engine_->options),
        stream_(std::forward<StreamArgs>(stream_args)...),
        slot_(std::move(slot)),
        remote_addr_(std::move(peer)),
        remote_port_(port),
        fallback_timer_(stream_.get_executor()) {}

  ~Session() override {
    ReleaseAnswerBytes();
    if (id_ != 0) {
      engine_->Unregister(id_);
    }
  }

  void Start() {
    id_ = engine_->Register(this->weak_from_this());
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->Handshake(); });
  }

  void PostStop() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->OnStop(); });
  }

 private:
  // One deferred request's answer; see http::Responder.
  class Pending final : public PendingAnswer {
   public:
    // Holds its session until answered: while a request is parked nothing else does (no
    // read or write is pending), and the answer must still find the connection.
    Pending(const std::shared_ptr<Session>& session, std::shared_ptr<EngineState> engine, bool trim)
        : session_(session), hold_(session), engine_(std::move(engine)), trim_(trim) {}
    ~Pending() override {
      if (!done_.load()) {
        if (auto session = session_.lock()) {
          session->core_.LogError(session->options_.name +
                                  " listener: a deferred request was dropped unanswered");
        }
        Deliver(http::ErrorResponse(500, "internal", "internal error while handling the request"));
      }
    }
    bool Respond(http::Response response) override { return Deliver(std::move(response)); }
    void ExpireAfter(std::chrono::milliseconds after,
                     std::function<http::Response()> fallback) override {
      if (auto session = session_.lock()) {
        std::shared_ptr<Pending> self = self_.lock();
        asio::post(session->stream_.get_executor(),
                   [session, self, after, fallback = std::move(fallback)]() mutable {
                     session->ArmFallback(self, after, std::move(fallback));
                   });
      }
    }
    bool answered() const override { return done_.load(); }
    void TrimHeapAfterAnswer() override { trim_.store(true); }

    // Set once by the session right after creation: ExpireAfter needs a strong reference to
    // this object for the timer, and PendingAnswer is not enable_shared_from_this.
    std::weak_ptr<Pending> self_{};

   private:
    bool Deliver(http::Response response) {
      if (done_.exchange(true)) {
        return false;
      }
      --engine_->parked;
      // Only the first Deliver gets here, so nothing else touches hold_.
      const std::shared_ptr<Session> session = std::move(hold_);
      asio::post(session->stream_.get_executor(),
                 [session, response = std::move(response), trim = trim_.load()]() mutable {
                   session->armed_.reset();
                   session->fallback_timer_.cancel();
                   session->OnHandled(std::move(response), trim);
                 });
      return true;
    }

    const std::weak_ptr<Session> session_;
    std::shared_ptr<Session> hold_;  // released by Deliver
    const std::shared_ptr<EngineState> engine_;
    std::atomic<bool> done_{false};
    std::atomic<bool> trim_{false};  // malloc_trim once the answer is written
  };

  enum class Phase { kHandshake, kIdle, kHeader, kBody, kHandling, kWriting, kClosed };

  tcp::socket& Socket() { return beast::get_lowest_layer(stream_).socket(); }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // Defined per stream type (listener_engine.cc, listener_session_tls.cc).
  void Handshake();
  void Shutdown();

  void ReadRequest(bool first) {
    if (engine_->stopping.load() || stop_requested_) {
      Close();
      return;
    }
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    // Set per route once the header is in: a Content-Length over the route's limit is then
    // answered 413 by our check, not failed inside the parser. Not boost::none: Beast 1.74
    // compares the Content-Length with the optional, and any length is "greater than" none.
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    admission_.reset();
    if (first || buffer_.size() > 0) {
      ReadHeader();
      return;
    }
    phase_ = Phase::kIdle;
    Lowest().expires_after(options_.keep_alive_timeout);
    Stream& stream = stream_;
    stream.async_read_some(buffer_.prepare(4096),
                           [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                             self->buffer_.commit(n);
                             if (ec) {
                               self->Close();
                               return;
                             }
                             self->ReadHeader();
                           });
  }

  void ReadHeader() {
    phase_ = Phase::kHeader;
    Lowest().expires_after(options_.header_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // The head of the request being parsed, for checks and for the fields parsed before an error.
  RequestHead TakeHead() {
    RequestHead head;
    auto& message = parser_->get();
    head.method = std::string(message.method_string());
    head.target = std::string(message.target());
    for (const auto& field : message) {
      head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    head.remote_addr = remote_addr_;
    head.remote_port = remote_port_;
    return head;
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      OnReadError(ec);
      return;
    }
    admission_ = std::make_shared<Admission>(core_.Admit(TakeHead()));
    keep_alive_ = parser_->get().keep_alive();
    if (admission_->answer) {
      Answer(std::move(*admission_->answer), admission_->close_after_answer);
      return;
    }
    if (admission_->framing.kind == Framing::Kind::kNone) {
      Dispatch(std::string());
      return;
    }
    if (!HoldBody()) {
      http::Response busy =
          http::ErrorResponse(503, "overloaded",
                              "the server is reading too many large request bodies; try again "
                              "shortly");
      busy.headers.emplace_back("Retry-After", "5");
      Answer(std::move(busy), true);  // the body is still on the wire
      return;
    }
    if (admission_->expect_continue) {
      phase_ = Phase::kWriting;
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      Lowest().expires_after(options_.write_timeout);
      asio::async_write(stream_, asio::buffer(kContinue, sizeof(kContinue) - 1),
                        [self = this->shared_from_this()](beast::error_code error, size_t) {
                          if (error) {
                            self->Close();
                            return;
                          }
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  // Counts the body about to be read against the listener's request body budget: its
  // announced length (a chunked one: its route's limit), and its route's limit again when it
  // is to be decompressed (raw and decoded bodies are both held for a moment). false when
  // there is no room beside the others.
  bool HoldBody() {
    const uint64_t limit = admission_->body_limit;
    uint64_t bytes = admission_->framing.kind == Framing::Kind::kContentLength
                         ? admission_->framing.content_length
                         : limit;
    if (!admission_->content_encoding.empty())
      bytes = limit > std::numeric_limits<uint64_t>::max() - bytes
                  ? std::numeric_limits<uint64_t>::max()
                  : bytes + limit;
    std::optional<RequestBodyBudget::Hold> hold = engine_->body_budget.TryHold(
        AddressKey(remote_addr_),
        static_cast<size_t>(std::min<uint64_t>(bytes, std::numeric_limits<size_t>::max())));
    if (!hold)
      return false;
    admission_->body_hold = std::move(*hold);
    return true;
  }

  void ReadBody() {
    if (stop_requested_) {
      Close();
      return;
    }
    phase_ = Phase::kBody;
    const uint64_t limit = admission_->body_limit;
    parser_->body_limit(limit);
    const uint64_t expected = admission_->framing.kind == Framing::Kind::kContentLength
                                  ? admission_->framing.content_length
                                  : limit;
    Lowest().expires_after(engine_->TransferDeadline(options_.body_timeout, expected));
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec) {
      OnReadError(ec);
      return;
    }
    std::string& raw = parser_->get().body();
    const std::string& encoding = admission_->content_encoding;
    BodyDecoder decoder = BodyDecoder::For(encoding, admission_->body_limit);
    if (encoding.empty()) {
      Dispatch(std::move(raw));
      return;
    }
    if (!decoder.Append(raw) || !decoder.Finish()) {
      raw.clear();
      raw.shrink_to_fit();
      admission_->body_hold.Release();  // no worker has the request: only this thread
      // The body was read whole, so the connection is still in step.
      Answer(*decoder.error(), false);
      return;
    }
    raw.clear();
    raw.shrink_to_fit();
    Dispatch(decoder.Take());
  }

  // A read failed: a parse error gets its JSON answer and the connection closes; a deadline,
  // the peer going away or a cancelled read just closes.
  void OnReadError(beast::error_code ec) {
    if (admission_) {
      // What was read of the body goes with its share of the budget (the connection may
      // linger for seconds); read on this thread only: no worker has the request.
      parser_->get().body().clear();
      parser_->get().body().shrink_to_fit();
      admission_->body_hold.Release();
    }
    if (ec.category() != bhttp::make_error_code(bhttp::error::end_of_stream).category() ||
        ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message) {
      Close();
      return;
    }
    const bool in_header = phase_ == Phase::kHeader;
    http::Response refusal;
    if (ec == bhttp::error::body_limit && admission_) {
      refusal = http::ErrorResponse(
          413, "body_too_large",
          "the request body is larger than " + std::to_string(admission_->body_limit) + " bytes");
    } else if (in_header && ec == bhttp::error::header_limit) {
      if (RequestLineIncomplete()) {
        refusal = http::ErrorResponse(414, "uri_too_long", "the request line is too long");
      } else {
        refusal = http::ErrorResponse(
            431, "headers_too_large",
            "the request header is larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
      }
    } else if (in_header && (ec == bhttp::error::bad_content_length ||
                             ec == bhttp::error::bad_transfer_encoding)) {
      // Beast refuses a second, different Content-Length, and either framing field after the
      // other, itself, before storing the field; the fields read so far and the kind refused
      // still say which of CheckFraming's reasons it is, in its order.
      size_t lengths = ec == bhttp::error::bad_content_length ? 1 : 0;
      size_t encodings = 1 - lengths;
      for (const auto& field : parser_->get()) {
        lengths += beast::iequals(field.name_string(), "Content-Length") ? 1 : 0;
        encodings += beast::iequals(field.name_string(), "Transfer-Encoding") ? 1 : 0;
      }
      std::string_view reason = "the Content-Length header is not a decimal number";
      if (lengths > 1) {
        reason = "the request has more than one Content-Length header";
      } else if (lengths == 0) {
        reason = "Transfer-Encoding other than chunked is not accepted";
      } else if (encodings > 0) {
        reason = "the request has both Content-Length and Transfer-Encoding";
      }
      refusal = http::ErrorResponse(400, "bad_request", reason);
    } else {
      refusal = http::ErrorResponse(
          400, "bad_request", std::string("the request is not valid HTTP (") + ec.message() + ")");
    }
    Answer(std::move(refusal), true);
  }

  bool RequestLineIncomplete() const {
    const auto data = buffer_.data();
    const std::string_view bytes(static_cast<const char*>(data.data()), data.size());
    return bytes.find("\r\n") == std::string_view::npos;
  }

  // Hands the complete request to the worker pool.
  void Dispatch(std::string body) {
    const bool deferred = admission_->deferred_id != 0;
    if (engine_->queued.load() >= options_.max_queued_requests ||
        (deferred && engine_->parked.load() >= options_.max_parked_requests)) {
      Answer(http::ErrorResponse(503, "overloaded",
                                 "the server has too many requests waiting; try again shortly"),
             false);
      return;
    }
    const size_t trim_after = options_.trim_heap_after_bytes;
    const bool large = trim_after != 0 && body.size() >= trim_after;
    admission_->request.body = std::move(body);
    phase_ = Phase::kHandling;
    ++engine_->queued;
    if (deferred) {
      ++engine_->parked;
      auto pending = std::make_shared<Pending>(this->shared_from_this(), engine_, large);
      pending->self_ = pending;
      pending_ = pending;
      asio::post(engine_->pool, [self = this->shared_from_this(), admission = admission_,
                                 pending = std::move(pending)]() mutable {
        --self->engine_->queued;
        self->core_.ServeDeferred(*admission, admission->request, std::move(pending));
        // The request is the handler's only while it runs (DeferredHandler): its memory goes
        // here, before an answer that may come much later.
        admission->request.body.clear();
        admission->request.body.shrink_to_fit();
        admission->body_hold.Release();
      });
      return;
    }
    asio::post(engine_->pool, [self = this->shared_from_this(), admission = admission_, large,
                               trim_after]() mutable {
      --self->engine_->queued;
      http::Response response = self->core_.Serve(*admission, admission->request);
      // A large answer's memory too (a segment, a stacks list: tens of MiB).
      const bool trim = ListenerCore::TakeHeapTrimRequest() || large ||
                        (trim_after != 0 && response.body.size() >= trim_after);
      // The request's memory goes here, on the worker, not on the I/O thread.
      admission->request.body.clear();
      admission->request.body.shrink_to_fit();
      admission->body_hold.Release();
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response), trim]() mutable {
                   self->OnHandled(std::move(response), trim);
                 });
    });
  }

  void ArmFallback(const std::shared_ptr<Pending>& pending, std::chrono::milliseconds after,
                   std::function<http::Response()> fallback) {
    if (pending->answered() || pending_.lock() != pending) {
      return;
    }
    armed_ = pending;
    fallback_ = std::move(fallback);
    if (stop_requested_) {
      RunFallback();
      return;
    }
    fallback_timer_.expires_after(after);
    fallback_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) {
        self->RunFallback();
      }
    });
  }

  // The parked request's time is up (or the listener stops): its fallback answers, computed
  // on a worker since it may read the store.
  void RunFallback() {
    std::shared_ptr<Pending> pending = pending_.lock();
    if (!pending || pending->answered()) {
      return;
    }
    std::function<http::Response()> fallback = std::move(fallback_);
    fallback_ = nullptr;
    if (!fallback) {
      pending->Respond(http::ErrorResponse(503, "unavailable", "the server is stopping"));
      return;
    }
    asio::post(engine_->pool, [pending, fallback = std::move(fallback)] {
      http::Response response;
      try {
        response = fallback();
      } catch (...) {
        response =
            http::ErrorResponse(500, "internal", "internal error while handling the request");
      }
      pending->Respond(std::move(response));
    });
  }

  void OnHandled(http::Response response, bool trim) {
    if (phase_ != Phase::kHandling) {
      return;  // closed meanwhile
    }
    trim_after_write_ = trim;
    Answer(std::move(response), false);
  }

  void Answer(http::Response response, bool close) {
    close = close || !keep_alive_ || stop_requested_ || engine_->stopping.load() ||
            served_ + 1 >= options_.keep_alive_max_requests;
    out_ = core_.Finish(admission_.get(), std::move(response), close);
    if (!ReserveAnswerBytes(out_.body.size())) {
      out_ = core_.Finish(admission_.get(),
                          http::ErrorResponse(503, "overloaded",
                                              "the server is sending too many large answers; try "
                                              "again shortly"),
                          close);
    }
    Write();
  }

  // Counts a large answer's body against max_answer_bytes_in_flight until it is written (or
  // the session ends); false when it would pass it beside the others.
  bool ReserveAnswerBytes(size_t bytes) {
    if (bytes <= kSmallBody)
      return true;
    const size_t before = engine_->answer_bytes.fetch_add(bytes);
    if (before != 0 && before + bytes > options_.max_answer_bytes_in_flight) {
      engine_->answer_bytes.fetch_sub(bytes);
      return false;
    }
    reserved_answer_bytes_ = bytes;
    return true;
  }
  void ReleaseAnswerBytes() {
    engine_->answer_bytes.fetch_sub(std::exchange(reserved_answer_bytes_, 0));
  }

  // An answer goes out as single buffers: its head with a small body copied behind it, then
  // pieces of at most kWriteChunk body bytes. Asio's TLS stream (under Beast's flat_stream)
  // reports a write of two buffers, or of one very large buffer (a 200 MB release archive),
  // as complete after only part of it, with no error, which ends asio::async_write early and
  // silently; single buffers of this size are written whole. The deadline covers the whole
  // answer.
  static constexpr size_t kWriteChunk = 256 << 10;

  void Write() {
    phase_ = Phase::kWriting;
    Lowest().expires_after(
        engine_->TransferDeadline(options_.write_timeout, out_.head.size() + out_.body_length));
    body_written_ = 0;
    if (out_.body_length <= kSmallBody) {
      out_.head.append(out_.body, out_.body_offset, out_.body_length);
      body_written_ = out_.body_length;
    }
    asio::async_write(stream_, asio::buffer(out_.head),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->OnWrotePiece(ec, 0);
                      });
  }
  static constexpr size_t kSmallBody = 64 << 10;

  void OnWrotePiece(beast::error_code ec, size_t piece) {
    body_written_ += piece;
    if (ec || body_written_ >= out_.body_length) {
      OnWritten(ec);
      return;
    }
    const size_t next = std::min(out_.body_length - body_written_, kWriteChunk);
    asio::async_write(stream_,
                      asio::buffer(out_.body.data() + out_.body_offset + body_written_, next),
                      [self = this->shared_from_this(), next](beast::error_code error, size_t) {
                        self->OnWrotePiece(error, next);
                      });
  }

  void OnWritten(beast::error_code ec) {
    ReleaseAnswerBytes();
    if (ec) {
      Close();
      return;
    }
    ++served_;
    if (std::exchange(trim_after_write_, false)) {
      // glibc hands freed memory back only on malloc_trim; a few ms, so on a worker, and the
      // next request is read only afterwards (tests count trims between requests).
      asio::post(engine_->pool, [self = this->shared_from_this()] {
        self->core_.TrimHeap();
        asio::post(self->stream_.get_executor(), [self] { self->AfterWrite(); });
      });
      return;
    }
    AfterWrite();
  }

  void AfterWrite() {
    if (out_.close || stop_requested_ || engine_->stopping.load()) {
      Shutdown();
      return;
    }
    out_ = Outgoing{};
    ReadRequest(false);
  }

  void OnStop() {
    stop_requested_ = true;
    switch (phase_) {
      case Phase::kHandshake:
      case Phase::kIdle:
      case Phase::kHeader:
      case Phase::kBody:
        Close();
        break;
      case Phase::kHandling:
        // A parked request's fallback answers it now. One without a fallback (yet) is its
        // handler's to answer, as a request on a worker is: ingest waiting for its group's
        // write gets the write's answer; a long-poll arming its fallback later runs it then
        // (ArmFallback sees stop_requested_). Stop waits for the answer either way.
        if (pending_.lock() && fallback_) {
          fallback_timer_.cancel();
          RunFallback();
        }
        break;
      case Phase::kWriting:  // closes once written
        break;
      case Phase::kClosed:  // maybe lingering: stop that too
        Close();
        break;
    }
  }

  // A lingering close (as nginx's lingering_close): after our last answer, stop sending and
  // read, and drop, what the client still sends, for up to kLingerTime. A client still
  // writing a body we refused early (413 before the body) then reads our answer; closing a
  // socket with unread data would send a reset that can destroy the answer in flight.
  void Linger() {
    static constexpr std::chrono::milliseconds kLingerTime{2000};
    if (stop_requested_ || engine_->stopping.load()) {
      Close();
      return;
    }
    phase_ = Phase::kClosed;
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().expires_after(kLingerTime);
    Drain();
  }

  void Drain() {
    buffer_.clear();
    Lowest().async_read_some(buffer_.prepare(16 << 10),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (ec || self->stop_requested_) {
                                 self->Close();
                                 return;
                               }
                               self->Drain();
                             });
  }

  void Close() {
    phase_ = Phase::kClosed;
    fallback_timer_.cancel();
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  const std::shared_ptr<EngineState> engine_;
  ListenerCore& core_;
  const http::ListenerOptions& options_;
  Stream stream_;
  ConnectionLimiter::Slot slot_;
  const std::string remote_addr_;
  const int remote_port_;
  uint64_t id_ = 0;

  beast::flat_buffer buffer_{};
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_{};
  std::shared_ptr<Admission> admission_{};  // the request being answered; shared with its worker
  Outgoing out_{};
  size_t body_written_ = 0;  // of out_'s body
  Phase phase_ = Phase::kHandshake;
  bool keep_alive_ = true;
  bool stop_requested_ = false;
  bool trim_after_write_ = false;
  size_t reserved_answer_bytes_ = 0;  // ReserveAnswerBytes
  size_t served_ = 0;

  // A deferred request: its answer, and the fallback armed by Responder::ExpireAfter.
  std::weak_ptr<Pending> pending_{};
  std::shared_ptr<Pending> armed_{};  // keeps the answer alive while its fallback waits
  std::function<http::Response()> fallback_{};
  asio::steady_timer fallback_timer_;
};

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_LISTENER_SESSION_H_
