// Internal to the http module: everything a Listener does with one request that is not I/O.
// The engine's sessions (listener_session.h) read and write bytes with Boost.Beast; between
// "header parsed" and "bytes to write" they call ListenerCore, which has no Boost type, so
// the policy (framing, limits, routing, ranges, the JSON errors, response headers) is plain
// code in listener_handlers.cc, and the fuzz target drives the same path without a socket.

#ifndef EXPANSE_HTTP_LISTENER_CORE_H_
#define EXPANSE_HTTP_LISTENER_CORE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/listener.h"
#include "http/message.h"
#include "http/request_body_budget.h"
#include "http/request_checks.h"
#include "http/router.h"

namespace expanse::http_internal {

// One request's header as the parser gave it.
struct RequestHead {
  std::string method{};
  std::string target{};
  http::HeaderList headers{};  // as sent, in order
  std::string remote_addr{};   // the peer, IPv4-mapped addresses unmapped
  int remote_port = 0;
};

// What the listener does with a request once its header is in.
struct Admission {
  // Set: send this without reading the body (a refusal, or a 404/405). The connection closes
  // after it when the request announced a body (its bytes are still unread) or was malformed.
  std::optional<http::Response> answer{};
  bool close_after_answer = false;

  // Otherwise: the request (body still to come) and where it goes.
  http::Request request{};
  const http::Handler* handler = nullptr;
  size_t deferred_id = 0;  // > 0: a deferred route (GetDeferred, PostDeferred)
  size_t body_limit = 0;   // decoded bytes
  Framing framing{};
  std::string content_encoding{};
  bool expect_continue = false;
  // GET/HEAD with a valid Range header and no If-Range: the ranges asked for.
  std::optional<std::vector<ByteRange>> ranges{};
  // The body's share of max_request_body_bytes_in_flight, given back once the handler is done
  // with the body (or the request fails).
  RequestBodyBudget::Hold body_hold{};
};

// An answer, serialized: `head` is the status line and headers with the blank line;
// body[body_offset, body_offset + body_length) follows it (nothing for HEAD).
struct Outgoing {
  std::string head{};
  std::string body{};
  size_t body_offset = 0;
  size_t body_length = 0;
  bool close = false;  // close the connection once written
};

// The state behind a Responder: implemented by the sessions.
class PendingAnswer {
 public:
  virtual ~PendingAnswer() = default;
  virtual bool Respond(http::Response response) = 0;
  virtual void ExpireAfter(std::chrono::milliseconds after,
                           std::function<http::Response()> fallback) = 0;
  virtual bool answered() const = 0;
  virtual void TrimHeapAfterAnswer() = 0;
};

class ListenerCore {
 public:
  explicit ListenerCore(http::ListenerOptions options);

  const http::ListenerOptions& options() const { return options_; }
  http::Router& router() { return router_; }
  std::vector<http::DeferredHandler>& deferred_handlers() { return deferred_handlers_; }

  // Decides from the header alone: see Admission. `head` is consumed.
  Admission Admit(RequestHead head) const;

  // Runs the route's handler on the calling (worker) thread. A throw becomes a logged 500.
  http::Response Serve(const Admission& admission, const http::Request& request) const;
  // Runs a deferred route's handler; it answers through a Responder of `pending`. A throw is
  // answered 500.
  void ServeDeferred(const Admission& admission, const http::Request& request,
                     const std::shared_ptr<PendingAnswer>& pending) const;

  // The answer to `admission`'s request (or, with admission null, to a request that could
  // not be parsed), serialized, with our response headers applied: an out-of-range status
  // becomes a logged 500; headers with CR/LF are dropped and logged; Cache-Control: no-store
  // unless the handler set one; X-Content-Type-Options: nosniff; one Range applied to a
  // range-able 200. `close`: say Connection: close. `head_only`: HEAD, no body bytes.
  Outgoing Finish(const Admission* admission, http::Response response, bool close) const;

  // The answer for a request that failed to parse; close is always set.
  Outgoing FinishRefusal(http::Response response) const { return Finish(nullptr, response, true); }

  void LogError(std::string_view message) const;

  // malloc_trim(0) and count it; see ListenerOptions::trim_heap_after_bytes.
  void TrimHeap();
  uint64_t heap_trims() const { return heap_trims_.load(); }

  // The handler thread's RequestHeapTrim() flag, read and cleared.
  static bool TakeHeapTrimRequest();

 private:
  const http::ListenerOptions options_;
  http::Router router_;
  std::vector<http::DeferredHandler> deferred_handlers_;
  std::atomic<uint64_t> heap_trims_{0};
};

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_LISTENER_CORE_H_
