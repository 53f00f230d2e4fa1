// The listener's engine against clients that misbehave at the socket level (docs/design-http-
// engine.md, "Test plan"): slow and idle clients, too many connections from one address,
// bodies refused before they are read, parked long-polls, a full worker queue, requests the
// parser refuses, and TLS below 1.2.
//
// Tests assert answers and states, never durations: deadlines are a few hundred ms and each
// test waits for an event (the server closing a socket, a handler reached); kSafetyLimit only
// bounds a wait that would otherwise hang a failing test.

#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/test_temp_dir.h"
#include "http/error.h"
#include "http/listener.h"
#include "http/self_signed.h"

namespace expanse::http {
namespace {

using ::expanse::testing::TempDir;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

using std::chrono::milliseconds;

// Only a safety net for waits that never end when a test fails; no test measures time.
constexpr milliseconds kSafetyLimit(20000);
// The deadlines under test.
constexpr milliseconds kShortDeadline(300);

constexpr std::string_view kPong = R"({"pong":true})";

// A client on a raw loopback socket, for requests no well-behaved client would send.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<uint16_t>(port));
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
      ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port << ": " << std::strerror(errno);
      Close();
    }
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  ~RawClient() { Close(); }

  int fd() const { return fd_; }
  bool closed_by_peer() const { return closed_by_peer_; }
  // Everything the server has written so far.
  const std::string& received() const { return received_; }

  // false once the server has closed its end (no SIGPIPE).
  bool Send(std::string_view bytes) {
    while (!bytes.empty() && fd_ >= 0) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return fd_ >= 0;
  }

  // Waits up to `wait` for bytes or the end of the connection and takes what came.
  // true once the server has closed the connection (EOF, or a reset after unread bytes).
  bool ReadSome(milliseconds wait) {
    if (fd_ < 0 || closed_by_peer_) {
      return closed_by_peer_;
    }
    pollfd readable{fd_, POLLIN, 0};
    if (::poll(&readable, 1, static_cast<int>(wait.count())) <= 0) {
      return false;
    }
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      received_.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      closed_by_peer_ = true;
    }
    return closed_by_peer_;
  }

  // Reads until the server closes; false when it has not within kSafetyLimit.
  bool ReadUntilClosed() {
    const auto give_up = std::chrono::steady_clock::now() + kSafetyLimit;
    while (!ReadSome(milliseconds(100))) {
      if (fd_ < 0 || std::chrono::steady_clock::now() > give_up) {
        return false;
      }
    }
    return true;
  }

  // Reads until `text` has arrived; false when the connection closed or kSafetyLimit passed.
  bool ReadUntil(std::string_view text) {
    const auto give_up = std::chrono::steady_clock::now() + kSafetyLimit;
    while (received_.find(text) == std::string::npos) {
      if (ReadSome(milliseconds(100)) || fd_ < 0 || std::chrono::steady_clock::now() > give_up) {
        return received_.find(text) != std::string::npos;
      }
    }
    return true;
  }

  void Close() {
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

 private:
  int fd_ = -1;
  bool closed_by_peer_ = false;
  std::string received_;
};

// Sends `request` on a new connection and returns all the server answers until it closes.
std::string Exchange(int port, std::string_view request) {
  RawClient client(port);
  client.Send(request);  // a refusal may close the connection before all of it is sent
  EXPECT_TRUE(client.ReadUntilClosed()) << "the server kept the connection open";
  return client.received();
}

// The answer's body: what follows the blank line after the head.
std::string_view BodyOf(std::string_view answer) {
  const size_t end = answer.find("\r\n\r\n");
  return end == std::string_view::npos ? std::string_view() : answer.substr(end + 4);
}

// Responders stored by a deferred route, for the test thread to answer.
class ParkedRequests {
 public:
  void Add(Responder responder) {
    const std::lock_guard<std::mutex> lock(mu_);
    responders_.push_back(std::move(responder));
    added_.notify_all();
  }

  // true once `count` requests are parked; false after kSafetyLimit.
  bool WaitFor(size_t count) {
    std::unique_lock<std::mutex> lock(mu_);
    return added_.wait_for(lock, kSafetyLimit, [&] { return responders_.size() >= count; });
  }

  std::vector<Responder> Take() {
    const std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(responders_, {});
  }

 private:
  std::mutex mu_;
  std::condition_variable added_;
  std::vector<Responder> responders_;
};

Response Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.content_type = "text/plain";
  response.body = std::move(body);
  return response;
}

class ListenerEngineTest : public ::testing::Test {
 protected:
  ListenerOptions Options() {
    ListenerOptions options;
    options.name = "data";
    options.host = "127.0.0.1";
    options.max_body_bytes = 1024;
    options.handshake_timeout = kShortDeadline;
    options.header_timeout = kShortDeadline;
    options.error_log = [this](std::string_view message) {
      const std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(message);
    };
    return options;
  }

  // Starts listener_ with GET /ping, POST /echo and whatever `routes` adds.
  void Start(ListenerOptions options, const std::function<void(Listener&)>& routes = {}) {
    Result<std::unique_ptr<Listener>> listener = Listener::Create(std::move(options));
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    listener_->Get("/ping", [](const Request&) { return JsonResponse(200, std::string(kPong)); });
    listener_->Post("/echo", [](const Request& request) { return Text(200, request.body); });
    if (routes) {
      routes(*listener_);
    }
    const Status started = listener_->Start();
    ASSERT_TRUE(started.ok()) << started;
    port_ = listener_->port();
  }

  // A TLS listener with GET /ping, on a fresh self-signed certificate.
  void StartTls() {
    SelfSignedOptions self_signed;
    self_signed.directory = dir_.path();
    self_signed.hosts = {"127.0.0.1"};
    Result<SelfSignedFiles> files = EnsureSelfSignedCertificate(self_signed);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    ListenerOptions options = Options();
    options.cert_file = files_.cert_file;
    options.key_file = files_.key_file;
    Start(std::move(options));
  }

  // GET /ping on a fresh connection with httplib's client, as an ordinary client would.
  int PingStatus() {
    if (listener_->tls()) {
      httplib::SSLClient client("127.0.0.1", port_);
      client.set_ca_cert_path(files_.ca_file.c_str());
      client.enable_server_certificate_verification(true);
      const httplib::Result result = client.Get("/ping");
      return result ? result->status : -1;
    }
    httplib::Client client("127.0.0.1", port_);
    const httplib::Result result = client.Get("/ping");
    return result ? result->status : -1;
  }

  std::vector<std::string> Log() {
    const std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  TempDir dir_;
  SelfSignedFiles files_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
  // Before listener_, so that its handlers' responders outlive the listener.
  ParkedRequests parked_;
  std::unique_ptr<Listener> listener_;
  int port_ = 0;
};

// Sends `bytes` a byte every ~20 ms until the server closes the connection (or answers), and
// returns how many were sent. Bounded by kSafetyLimit only as a safety net.
size_t TrickleUntilCut(RawClient& client, std::string_view bytes) {
  size_t sent = 0;
  const auto give_up = std::chrono::steady_clock::now() + kSafetyLimit;
  while (sent < bytes.size() && std::chrono::steady_clock::now() < give_up) {
    if (!client.Send(bytes.substr(sent, 1))) {
      break;
    }
    ++sent;
    if (client.ReadSome(milliseconds(20))) {
      break;
    }
  }
  return sent;
}

// --- Slow and idle clients --------------------------------------------------------------

TEST_F(ListenerEngineTest, SlowlorisClientsDoNotStarveOthers) {
  ListenerOptions options = Options();
  options.worker_threads = 1;
  Start(options);
  std::vector<std::unique_ptr<RawClient>> tricklers;
  for (int i = 0; i < 20; ++i) {
    tricklers.push_back(std::make_unique<RawClient>(port_));
    EXPECT_TRUE(tricklers.back()->Send("GET /ping HTTP/1.1\r\nHost: x\r\n"));
  }
  EXPECT_EQ(PingStatus(), 200);
  for (const auto& trickler : tricklers) {
    EXPECT_TRUE(trickler->ReadUntilClosed());
    EXPECT_THAT(trickler->received(), IsEmpty());
  }
}

TEST_F(ListenerEngineTest, TrickledHeaderIsCutAtItsDeadline) {
  Start(Options());
  std::string header = "GET /ping HTTP/1.1\r\nHost: x\r\nX-Pad: ";
  header.resize(4096 - 4, 'p');
  header += "\r\n\r\n";
  RawClient client(port_);
  // Never idle long enough for an inactivity timeout; the whole header would take 80 s.
  const size_t bytes_sent = TrickleUntilCut(client, header);
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_LT(bytes_sent, header.size());
  EXPECT_THAT(client.received(), IsEmpty());
}

// The body's deadline is body_timeout plus its length at min_body_rate_bytes_per_s (here
// 300 ms + 1000 bytes at 64 KiB/s), from the end of the header: a body sent a byte every
// ~20 ms would take 20 s, and is cut unanswered; the handler never runs.
TEST_F(ListenerEngineTest, TrickledBodyIsCutAtItsDeadline) {
  ListenerOptions options = Options();
  options.body_timeout = kShortDeadline;
  std::atomic<int> handled{0};
  Start(options, [&handled](Listener& listener) {
    listener.Post("/count", [&handled](const Request&) {
      ++handled;
      return JsonResponse(200, "{}");
    });
  });
  const std::string body(1000, 'b');
  RawClient client(port_);
  ASSERT_TRUE(client.Send("POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
  const size_t bytes_sent = TrickleUntilCut(client, body);
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_LT(bytes_sent, body.size());
  EXPECT_THAT(client.received(), IsEmpty());
  EXPECT_EQ(handled.load(), 0);
  EXPECT_EQ(PingStatus(), 200);
}

TEST_F(ListenerEngineTest, IdleConnectionIsClosed) {
  Start(Options());
  RawClient idle(port_);
  EXPECT_EQ(PingStatus(), 200);
  EXPECT_TRUE(idle.ReadUntilClosed());
  EXPECT_THAT(idle.received(), IsEmpty());
}

// --- Per-address cap ----------------------------------------------------------------------

TEST_F(ListenerEngineTest, PerAddressCapRefusesAndFreesSlots) {
  ListenerOptions options = Options();
  options.max_connections_per_address = 2;
  options.keep_alive_timeout = kSafetyLimit;  // the first two stay open until closed here
  Start(options);
  const std::string ping = "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n";
  RawClient first(port_);
  RawClient second(port_);
  for (RawClient* client : {&first, &second}) {
    ASSERT_TRUE(client->Send(ping));
    ASSERT_TRUE(client->ReadUntil(kPong)) << client->received();
    EXPECT_THAT(client->received(), StartsWith("HTTP/1.1 200 "));
  }

  RawClient third(port_);
  EXPECT_TRUE(third.ReadUntilClosed());
  EXPECT_THAT(third.received(), IsEmpty());
  EXPECT_GE(listener_->refused_connections(), 1u);

  // The server notices the close on its own schedule: retry until the slot is free.
  first.Close();
  const auto give_up = std::chrono::steady_clock::now() + kSafetyLimit;
  std::string answer;
  while (std::chrono::steady_clock::now() < give_up) {
    answer = Exchange(port_, "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if (!answer.empty()) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 "));
  EXPECT_EQ(BodyOf(answer), kPong);
}

// --- Bodies refused before they are read --------------------------------------------------

TEST_F(ListenerEngineTest, ContentLengthOverLimitIs413WithoutReadingTheBody) {
  Start(Options());
  const std::string answer =
      Exchange(port_, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 413 "));
  EXPECT_THAT(answer, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(answer, HasSubstr(R"("code":"body_too_large")"));
}

TEST_F(ListenerEngineTest, ExpectContinueOverLimitGets413Only) {
  Start(Options());
  const std::string answer =
      Exchange(port_,
               "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n"
               "Expect: 100-continue\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 413 "));
  EXPECT_THAT(answer, Not(HasSubstr("100 Continue")));
  EXPECT_THAT(answer, HasSubstr(R"("code":"body_too_large")"));
}

TEST_F(ListenerEngineTest, ExpectContinueWithinLimitGetsContinueThenAnswer) {
  Start(Options());
  RawClient client(port_);
  ASSERT_TRUE(
      client.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
                  "Connection: close\r\n\r\n"));
  ASSERT_TRUE(client.ReadUntil("\r\n\r\n"));
  EXPECT_EQ(client.received(), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.Send("hello"));
  EXPECT_TRUE(client.ReadUntilClosed());
  const std::string answer =
      client.received().substr(std::string("HTTP/1.1 100 Continue\r\n\r\n").size());
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 "));
  EXPECT_EQ(BodyOf(answer), "hello");
}

// --- Long-polls ---------------------------------------------------------------------------

// GET /wait parks its request in parked_.
void AddParkingRoute(Listener& listener, ParkedRequests& parked) {
  listener.GetDeferred("/wait", [&parked](const Request&, Responder responder) {
    parked.Add(std::move(responder));
  });
}

constexpr std::string_view kWaitRequest =
    "GET /wait HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST_F(ListenerEngineTest, ParkedLongPollsHoldNoWorker) {
  constexpr size_t kClients = 100;
  ListenerOptions options = Options();
  options.worker_threads = 1;
  options.max_connections_per_address = 2 * kClients;
  Start(options, [this](Listener& listener) { AddParkingRoute(listener, parked_); });
  std::vector<std::unique_ptr<RawClient>> clients;
  for (size_t i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->Send(kWaitRequest));
  }
  ASSERT_TRUE(parked_.WaitFor(kClients));
  EXPECT_EQ(PingStatus(), 200);

  size_t delivered = 0;
  for (const Responder& responder : parked_.Take()) {
    delivered += responder.Respond(JsonResponse(200, R"({"enrolled":true})")) ? 1 : 0;
  }
  EXPECT_EQ(delivered, kClients);
  for (const auto& client : clients) {
    EXPECT_TRUE(client->ReadUntilClosed());
    EXPECT_THAT(client->received(), StartsWith("HTTP/1.1 200 "));
    EXPECT_EQ(BodyOf(client->received()), R"({"enrolled":true})");
  }
}

TEST_F(ListenerEngineTest, ParkedRequestsOverTheCapAre503) {
  ListenerOptions options = Options();
  options.max_parked_requests = 5;
  Start(options, [this](Listener& listener) { AddParkingRoute(listener, parked_); });
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->Send(kWaitRequest));
  }
  ASSERT_TRUE(parked_.WaitFor(5));

  const std::string refused = Exchange(port_, kWaitRequest);
  EXPECT_THAT(refused, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(refused, HasSubstr(R"("code":"overloaded")"));

  for (const Responder& responder : parked_.Take()) {
    responder.Respond(JsonResponse(200, "{}"));
  }
  for (const auto& client : clients) {
    EXPECT_TRUE(client->ReadUntilClosed());
    EXPECT_THAT(client->received(), StartsWith("HTTP/1.1 200 "));
  }
}

TEST_F(ListenerEngineTest, UnansweredLongPollGetsItsFallback) {
  Start(Options(), [this](Listener& listener) {
    listener.GetDeferred("/wait", [this](const Request&, Responder responder) {
      responder.ExpireAfter(milliseconds(200),
                            [] { return JsonResponse(200, R"({"enrolled":false})"); });
      parked_.Add(std::move(responder));
    });
  });
  RawClient client(port_);
  ASSERT_TRUE(client.Send(kWaitRequest));
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_THAT(client.received(), StartsWith("HTTP/1.1 200 "));
  EXPECT_EQ(BodyOf(client.received()), R"({"enrolled":false})");
  // The fallback answered: a late answer is refused.
  std::vector<Responder> responders = parked_.Take();
  ASSERT_EQ(responders.size(), 1u);
  EXPECT_TRUE(responders[0].answered());
  EXPECT_FALSE(responders[0].Respond(JsonResponse(200, "{}")));
}

TEST_F(ListenerEngineTest, StopAnswersParkedRequestsWithTheirFallback) {
  Start(Options(), [this](Listener& listener) {
    listener.GetDeferred("/wait", [this](const Request&, Responder responder) {
      responder.ExpireAfter(kSafetyLimit, [] { return JsonResponse(200, R"({"stopped":1})"); });
      parked_.Add(std::move(responder));
    });
  });
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<RawClient>(port_));
    ASSERT_TRUE(clients.back()->Send(kWaitRequest));
  }
  ASSERT_TRUE(parked_.WaitFor(3));
  listener_->Stop();  // returns only once every parked request is answered
  for (const auto& client : clients) {
    EXPECT_TRUE(client->ReadUntilClosed());
    EXPECT_THAT(client->received(), StartsWith("HTTP/1.1 200 "));
    EXPECT_EQ(BodyOf(client->received()), R"({"stopped":1})");
  }
}

// A parked request without a fallback is its handler's to answer, also while the listener
// stops (ingest waiting for its group's write): Stop waits for that answer and sends it.
TEST_F(ListenerEngineTest, StopWaitsForAParkedPostsOwnAnswer) {
  Start(Options(), [this](Listener& listener) {
    listener.PostDeferred("/write", [this](const Request&, Responder responder) {
      parked_.Add(std::move(responder));
    });
  });
  RawClient client(port_);
  ASSERT_TRUE(
      client.Send("POST /write HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                  "Connection: close\r\n\r\nab"));
  ASSERT_TRUE(parked_.WaitFor(1));
  auto stopped = std::async(std::launch::async, [this] { listener_->Stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Stop under way meanwhile
  for (const Responder& responder : parked_.Take())
    responder.Respond(JsonResponse(200, R"({"written":true})"));
  stopped.get();
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_THAT(client.received(), StartsWith("HTTP/1.1 200 "));
  EXPECT_EQ(BodyOf(client.received()), R"({"written":true})");
}

TEST_F(ListenerEngineTest, DroppedResponderIs500) {
  Start(Options(), [](Listener& listener) {
    listener.GetDeferred("/wait", [](const Request&, Responder) {});
  });
  const std::string answer = Exchange(port_, kWaitRequest);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 500 "));
  EXPECT_THAT(answer, HasSubstr(R"("code":"internal")"));
  EXPECT_THAT(Log(), ::testing::Contains(HasSubstr("dropped unanswered")));
}

// --- Worker pool --------------------------------------------------------------------------

TEST_F(ListenerEngineTest, FullHandlerQueueIs503) {
  std::promise<void> entered;
  std::atomic<int> calls{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ListenerOptions options = Options();
  options.worker_threads = 1;
  options.max_queued_requests = 1;
  Start(options, [&](Listener& listener) {
    listener.Get("/block", [&entered, &calls, released](const Request&) {
      if (calls++ == 0) {
        entered.set_value();
      }
      released.wait();
      return JsonResponse(200, R"({"done":true})");
    });
  });
  const std::string block = "GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  RawClient running(port_);
  ASSERT_TRUE(running.Send(block));
  entered.get_future().wait();  // the only worker is busy

  // One of the next two waits in the queue, the other finds it full. Which is which depends
  // on the order the I/O thread reads them, so the test takes whichever answers first.
  RawClient second(port_);
  ASSERT_TRUE(second.Send(block));
  RawClient third(port_);
  ASSERT_TRUE(third.Send(block));
  RawClient* refused = nullptr;
  RawClient* queued = nullptr;
  const auto give_up = std::chrono::steady_clock::now() + kSafetyLimit;
  while (refused == nullptr && std::chrono::steady_clock::now() < give_up) {
    if (third.ReadSome(milliseconds(20))) {
      refused = &third;
      queued = &second;
    } else if (second.ReadSome(milliseconds(20))) {
      refused = &second;
      queued = &third;
    }
  }
  ASSERT_NE(refused, nullptr) << "neither request was refused";
  EXPECT_THAT(refused->received(), StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(refused->received(), HasSubstr(R"("code":"overloaded")"));
  EXPECT_THAT(queued->received(), IsEmpty());

  release.set_value();
  for (RawClient* client : {&running, queued}) {
    EXPECT_TRUE(client->ReadUntilClosed());
    EXPECT_THAT(client->received(), StartsWith("HTTP/1.1 200 "));
  }
  EXPECT_EQ(calls.load(), 2);
}

// --- Requests refused after the header ----------------------------------------------------

TEST_F(ListenerEngineTest, TransferEncodingOtherThanChunkedIs400) {
  Start(Options());
  const std::string answer =
      Exchange(port_, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(answer, HasSubstr("Transfer-Encoding other than chunked is not accepted"));
  EXPECT_THAT(answer, HasSubstr("\r\nConnection: close\r\n"));
}

TEST_F(ListenerEngineTest, ChunkedWithContentLengthIs400InEitherOrder) {
  Start(Options());
  for (const char* fields : {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                             "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"}) {
    const std::string answer = Exchange(port_, std::string("POST /echo HTTP/1.1\r\nHost: x\r\n") +
                                                   fields + "\r\n5\r\nhello\r\n0\r\n\r\n");
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 400 ")) << fields;
    EXPECT_THAT(answer, HasSubstr("the request has both Content-Length and Transfer-Encoding"))
        << fields;
  }
}

TEST_F(ListenerEngineTest, OverlongRequestLineIs414) {
  Start(Options());
  const std::string answer =
      Exchange(port_, "GET /" + std::string(20 << 10, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 414 "));
  EXPECT_THAT(answer, HasSubstr(R"("code":"uri_too_long")"));
}

TEST_F(ListenerEngineTest, OverlongHeaderIs431) {
  Start(Options());
  std::string request = "GET /ping HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; request.size() < (20 << 10); ++i) {
    request += "X-Filler-" + std::to_string(i) + ": " + std::string(100, 'f') + "\r\n";
  }
  request += "\r\n";
  const std::string answer = Exchange(port_, request);
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 431 "));
  EXPECT_THAT(answer, HasSubstr(R"("code":"headers_too_large")"));
}

TEST_F(ListenerEngineTest, BrotliBodyIs415) {
  Start(Options());
  const std::string answer = Exchange(
      port_,
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 415 "));
  EXPECT_THAT(answer, HasSubstr(R"("code":"unsupported_media_type")"));
}

// Boost 1.74's parse_chunk_header asserts that the last chunk is parsed again with at least 5
// bytes; a chunked body that starts "0\r\n" and then arrives a byte at a time is parsed again
// with 4, and a remote client could abort any build without NDEBUG. The code after the assert
// handles it (boostorg/beast#2861, fixed upstream in 2024), so the http module builds with
// BOOST_DISABLE_ASSERTS and this must answer 200 in every build. The sleeps only make each
// byte its own read; nothing is timed.
TEST_F(ListenerEngineTest, ChunkedTrailerArrivingByteByByteIsParsed) {
  Start(Options());
  RawClient client(port_);
  ASSERT_TRUE(client.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "0\r\n"));
  // Each byte in its own read: the parser sees the last chunk with 1, 2, ... bytes after it.
  for (const char byte : std::string("X-T: 1\r\n\r\n")) {
    std::this_thread::sleep_for(milliseconds(30));
    ASSERT_TRUE(client.Send(std::string(1, byte)));
  }
  EXPECT_TRUE(client.ReadUntilClosed());
  EXPECT_THAT(client.received(), StartsWith("HTTP/1.1 200 "));
}

// --- Ordinary requests on raw connections -------------------------------------------------

TEST_F(ListenerEngineTest, ClientConnectionCloseIsHonoured) {
  Start(Options());
  RawClient client(port_);
  ASSERT_TRUE(client.Send("GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(client.ReadUntilClosed());  // the server closed: no keep-alive
  EXPECT_THAT(client.received(), StartsWith("HTTP/1.1 200 "));
  EXPECT_THAT(client.received(), HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_EQ(BodyOf(client.received()), kPong);
}

TEST_F(ListenerEngineTest, HeadOnGetRouteHasTheLengthButNoBody) {
  Start(Options());
  const std::string answer =
      Exchange(port_, "HEAD /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 "));
  EXPECT_THAT(answer, HasSubstr("\r\nContent-Length: " + std::to_string(kPong.size()) + "\r\n"));
  EXPECT_THAT(answer, ::testing::EndsWith("\r\n\r\n"));
  EXPECT_THAT(BodyOf(answer), IsEmpty());
}

TEST_F(ListenerEngineTest, RefusedHeadHasNoBodyAndKeepsTheConnectionInStep) {
  Start(Options());
  RawClient client(port_);
  // A 404 (and a 416) to HEAD carries no body bytes: any would be read as the start of the
  // next answer on this connection.
  ASSERT_TRUE(client.Send("HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.Send("HEAD /ping HTTP/1.1\r\nHost: x\r\nRange: bytes=oops\r\n\r\n"));
  ASSERT_TRUE(client.Send("GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(client.ReadUntilClosed());
  const std::string_view answers = client.received();
  EXPECT_THAT(answers, StartsWith("HTTP/1.1 404 "));
  const std::string_view second = BodyOf(answers);
  EXPECT_THAT(second, StartsWith("HTTP/1.1 416 "));
  const std::string_view third = BodyOf(second);
  EXPECT_THAT(third, StartsWith("HTTP/1.1 200 "));
  EXPECT_EQ(BodyOf(third), kPong);
}

// --- TLS ----------------------------------------------------------------------------------

// A TLS client over a raw socket that trusts anything (these tests are about the protocol),
// limited to TLS versions up to `max_version`.
class RawTlsClient {
 public:
  RawTlsClient(int port, int max_version) : tcp_(port) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    // Security level 0 and no minimum, so that the client itself would speak TLS 1.0/1.1
    // and any refusal comes from the server.
    SSL_CTX_set_security_level(ctx_, 0);
    SSL_CTX_set_min_proto_version(ctx_, TLS1_VERSION);
    SSL_CTX_set_max_proto_version(ctx_, max_version);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, tcp_.fd());
    // Blocking reads, bounded only as a safety net.
    timeval limit{static_cast<time_t>(kSafetyLimit.count() / 1000), 0};
    setsockopt(tcp_.fd(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  RawTlsClient(const RawTlsClient&) = delete;
  RawTlsClient& operator=(const RawTlsClient&) = delete;
  ~RawTlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }

  // true when the handshake completes; else `reason` gets OpenSSL's first error.
  bool Handshake(std::string* reason) {
    ERR_clear_error();
    if (SSL_connect(ssl_) == 1) {
      return true;
    }
    char text[256] = "";
    ERR_error_string_n(ERR_peek_error(), text, sizeof text);
    *reason = text;
    return false;
  }

  // Reads until the server ends the connection; false when the read timed out instead.
  bool ReadUntilClosed() {
    char buffer[256];
    while (true) {
      const int n = SSL_read(ssl_, buffer, sizeof buffer);
      if (n > 0) {
        received_.append(buffer, static_cast<size_t>(n));
        continue;
      }
      return SSL_get_error(ssl_, n) != SSL_ERROR_WANT_READ;
    }
  }

  const std::string& received() const { return received_; }

 private:
  RawClient tcp_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string received_;
};

TEST_F(ListenerEngineTest, TlsClientThatNeverHandshakesIsClosed) {
  StartTls();
  RawClient silent(port_);
  EXPECT_EQ(PingStatus(), 200);
  EXPECT_TRUE(silent.ReadUntilClosed());
  EXPECT_THAT(silent.received(), IsEmpty());
}

TEST_F(ListenerEngineTest, TlsClientThatSendsNothingIsClosed) {
  StartTls();
  RawTlsClient idle(port_, TLS1_3_VERSION);
  std::string reason;
  ASSERT_TRUE(idle.Handshake(&reason)) << reason;
  EXPECT_EQ(PingStatus(), 200);
  EXPECT_TRUE(idle.ReadUntilClosed());
  EXPECT_THAT(idle.received(), IsEmpty());
}

TEST_F(ListenerEngineTest, TlsBelow12FailsTheHandshake) {
  StartTls();
  std::string reason;
  RawTlsClient tls12(port_, TLS1_2_VERSION);
  EXPECT_TRUE(tls12.Handshake(&reason)) << reason;  // the same client, allowed TLS 1.2
  RawTlsClient tls11(port_, TLS1_1_VERSION);
  EXPECT_FALSE(tls11.Handshake(&reason));
  EXPECT_THAT(reason, AnyOf(HasSubstr("protocol version"), HasSubstr("unsupported protocol")));
  EXPECT_EQ(PingStatus(), 200);
}

}  // namespace
}  // namespace expanse::http
