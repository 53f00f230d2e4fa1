// Listener tests over real loopback connections, with httplib's own client.

#include "http/listener.h"

#include <httplib.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/error.h"
#include "http/http_test_util.h"

namespace expanse::http {
namespace {

using testing::Gzip;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Response MakeResponse(int status, std::string content_type, std::string body,
                      HeaderList headers = {}) {
  Response response;
  response.status = status;
  response.content_type = std::move(content_type);
  response.body = std::move(body);
  response.headers = std::move(headers);
  return response;
}

class ListenerTest : public ::testing::Test {
 protected:
  ListenerOptions Options() {
    ListenerOptions options;
    options.name = "control";
    options.host = "127.0.0.1";
    options.max_body_bytes = 1024;
    options.error_log = [this](std::string_view message) {
      const std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(message);
    };
    return options;
  }

  // Creates listener_ (not started) trimming the heap after bodies of 4,096 bytes or more.
  void CreateTrimmingAt4096() {
    ListenerOptions options = Options();
    options.max_body_bytes = 64 * 1024;
    options.trim_heap_after_bytes = 4096;
    Result<std::unique_ptr<Listener>> created = Listener::Create(std::move(options));
    ASSERT_TRUE(created.ok()) << created.status();
    listener_ = *std::move(created);
  }

  // Creates listener_ with a few routes and starts it.
  void StartWithRoutes(ListenerOptions options) {
    Result<std::unique_ptr<Listener>> listener = Listener::Create(std::move(options));
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    listener_->Get("/jobs/:job_id", [](const Request& request) {
      nlohmann::json body = {{"job", std::string(request.PathParam("job_id"))},
                             {"method", request.method},
                             {"remote", request.remote_addr}};
      if (const auto state = request.QueryParam("state")) {
        body["state"] = std::string(*state);
      }
      if (const auto trace = request.Header("x-trace")) {
        body["trace"] = std::string(*trace);
      }
      return JsonResponse(200, body.dump());
    });
    listener_->Delete("/jobs/:job_id",
                      [](const Request&) { return MakeResponse(204, "application/json", ""); });
    listener_->Post("/echo", [](const Request& request) {
      return MakeResponse(200, "text/plain", request.body);
    });
    listener_->Post("/headers", [](const Request& request) {
      nlohmann::json names = nlohmann::json::array();
      for (const auto& [name, value] : request.headers) {
        names.push_back(name);
      }
      return JsonResponse(200, names.dump());
    });
    listener_->Get(
        "/throw", [](const Request&) -> Response { throw std::runtime_error("database on fire"); });
    listener_->Get("/status",
                   [](const Request&) { return ErrorResponse(NotFoundError("no job 9")); });
    listener_->Get("/empty-error",
                   [](const Request&) { return MakeResponse(503, "application/json", ""); });
    listener_->Get("/bad-header", [](const Request&) {
      return MakeResponse(200, "application/json", "{}", {{"X-Split", "a\r\nSet-Cookie: x"}});
    });
    listener_->Get("/cached", [](const Request&) {
      return MakeResponse(200, "application/json", "{}", {{"Cache-Control", "max-age=60"}});
    });
    const Status started = listener_->Start();
    ASSERT_TRUE(started.ok()) << started;
    ASSERT_GT(listener_->port(), 0);
  }

  httplib::Client Client() { return httplib::Client("127.0.0.1", listener_->port()); }

  std::vector<std::string> Log() {
    const std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  std::mutex log_mu_;
  std::vector<std::string> log_;
  std::unique_ptr<Listener> listener_;
};

nlohmann::json Json(const httplib::Result& result) {
  return result ? nlohmann::json::parse(result->body, nullptr, false) : nlohmann::json();
}

std::string ErrorCode(const httplib::Result& result) {
  const nlohmann::json body = Json(result);
  return body.contains("error") ? body["error"]["code"].get<std::string>() : "<no error body>";
}

TEST_F(ListenerTest, DispatchesWithPathQueryAndHeaders) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Get("/jobs/42?state=running%20now", {{"X-Trace", "abc"}});
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(result->get_header_value("Cache-Control"), "no-store");
  EXPECT_EQ(result->get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(Json(result), nlohmann::json({{"job", "42"},
                                          {"method", "GET"},
                                          {"remote", "127.0.0.1"},
                                          {"state", "running now"},
                                          {"trace", "abc"}}));
}

TEST_F(ListenerTest, HeadUsesGetRouteWithoutBody) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Head("/jobs/7");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_THAT(result->body, IsEmpty());
}

TEST_F(ListenerTest, PostBodyReachesHandler) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const std::string body(1024, 'b');  // exactly the limit
  const httplib::Result result = client.Post("/echo", body, "text/plain");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, body);
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/plain");
}

TEST_F(ListenerTest, ChunkedBodyReachesHandler) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Post(
      "/echo",
      [](size_t, httplib::DataSink& sink) {
        sink.write("hello ", 6);
        sink.write("world", 5);
        sink.done();
        return true;
      },
      "text/plain");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, "hello world");
}

TEST_F(ListenerTest, ClientCannotSpoofPeerAddressHeaders) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Post(
      "/headers", {{"REMOTE_ADDR", "10.9.9.9"}, {"X-Other", "1"}}, "{}", "application/json");
  ASSERT_TRUE(result) << result.error();
  const nlohmann::json names = Json(result);
  EXPECT_FALSE(names.dump().find("REMOTE_ADDR") != std::string::npos) << names.dump();
  EXPECT_TRUE(names.dump().find("X-Other") != std::string::npos) << names.dump();
}

TEST_F(ListenerTest, UnknownRouteIs404Json) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Get("/nope");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 404);
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(result->body,
            R"({"error":{"code":"not_found","message":"no route for GET \"/nope\""}})");
  const httplib::Result post = client.Post("/nope", "x", "text/plain");
  ASSERT_TRUE(post) << post.error();
  EXPECT_EQ(post->status, 404);
  EXPECT_EQ(ErrorCode(post), "not_found");
}

TEST_F(ListenerTest, WrongMethodIs405JsonWithAllow) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Put("/jobs/1", "{}", "application/json");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 405);
  EXPECT_EQ(result->get_header_value("Allow"), "DELETE, GET, HEAD");
  EXPECT_EQ(ErrorCode(result), "method_not_allowed");
  EXPECT_EQ(Json(result)["error"]["message"],
            "PUT is not allowed for \"/jobs/1\"; use DELETE, GET, HEAD");
  const httplib::Result options = client.Options("/jobs/1");
  ASSERT_TRUE(options) << options.error();
  EXPECT_EQ(options->status, 405);
  const httplib::Result deleted = client.Delete("/jobs/1");
  ASSERT_TRUE(deleted) << deleted.error();
  EXPECT_EQ(deleted->status, 204);
}

TEST_F(ListenerTest, OversizeBodyIs413Json) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Post("/echo", std::string(1025, 'x'), "text/plain");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(ErrorCode(result), "body_too_large");
  EXPECT_EQ(Json(result)["error"]["message"], "the request body is larger than 1024 bytes");
}

TEST_F(ListenerTest, OversizeChunkedBodyIs413Json) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const std::string chunk(600, 'x');
  const httplib::Result result = client.Post(
      "/echo",
      [&chunk](size_t, httplib::DataSink& sink) {
        sink.write(chunk.data(), chunk.size());
        sink.write(chunk.data(), chunk.size());
        sink.done();
        return true;
      },
      "text/plain");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(ErrorCode(result), "body_too_large");
}

TEST_F(ListenerTest, LimitAppliesToDecompressedBody) {
  StartWithRoutes(Options());
  // 64 KiB of zeros gzip to well under the 1 KiB limit.
  std::string compressed;
  const std::string plain(64 * 1024, '\0');
  httplib::detail::gzip_compressor compressor;
  ASSERT_TRUE(compressor.compress(plain.data(), plain.size(), /*last=*/true,
                                  [&](const char* data, size_t n) {
                                    compressed.append(data, n);
                                    return true;
                                  }));
  ASSERT_LT(compressed.size(), 1024u);
  httplib::Client client = Client();
  const httplib::Result result =
      client.Post("/echo", {{"Content-Encoding", "gzip"}}, compressed, "text/plain");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 413);
  EXPECT_EQ(ErrorCode(result), "body_too_large");
}

// A route's own limit replaces the listener's (1 KiB here), larger or smaller, and holds for
// Content-Length, chunked and gzip bodies alike.
TEST_F(ListenerTest, RouteBodyLimitReplacesTheListeners) {
  Result<std::unique_ptr<Listener>> created = Listener::Create(Options());
  ASSERT_TRUE(created.ok()) << created.status();
  listener_ = *std::move(created);
  const Handler echo = [](const Request& request) {
    return MakeResponse(200, "text/plain", request.body);
  };
  listener_->Post("/small", echo, {.max_body_bytes = 100});
  listener_->Post("/large", echo, {.max_body_bytes = 64 * 1024});
  listener_->Post("/default", echo);
  ASSERT_TRUE(listener_->Start().ok());
  httplib::Client client = Client();

  auto status_of = [&](const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) {
    const httplib::Result result = client.Post(path, headers, body, "text/plain");
    EXPECT_TRUE(result) << path;
    return result ? result->status : 0;
  };
  EXPECT_EQ(status_of("/small", std::string(100, 's')), 200);
  EXPECT_EQ(status_of("/small", std::string(101, 's')), 413);
  EXPECT_EQ(status_of("/large", std::string(64 * 1024, 'l')), 200);
  EXPECT_EQ(status_of("/large", std::string(64 * 1024 + 1, 'l')), 413);
  EXPECT_EQ(status_of("/default", std::string(1024, 'd')), 200);
  EXPECT_EQ(status_of("/default", std::string(1025, 'd')), 413);
  // 64 KiB of '[' gzip to a few hundred bytes; the route's 100-byte limit still decides.
  const std::string bomb = Gzip(std::string(64 * 1024, '['));
  ASSERT_LT(bomb.size(), 1024u);
  EXPECT_EQ(status_of("/small", bomb, {{"Content-Encoding", "gzip"}}), 413);
  EXPECT_EQ(status_of("/large", bomb, {{"Content-Encoding", "gzip"}}), 200);

  const httplib::Result refused = client.Post("/small", std::string(101, 's'), "text/plain");
  ASSERT_TRUE(refused);
  EXPECT_EQ(ErrorCode(refused), "body_too_large");
  EXPECT_EQ(Json(refused)["error"]["message"], "the request body is larger than 100 bytes");
}

// malloc_trim runs after a request whose body reached trim_heap_after_bytes, or whose handler
// asked for it, and not after the others. The count is read after a second request on the same
// keep-alive connection, which the same worker thread serves only after the first one's
// response (and trim) is done.
TEST_F(ListenerTest, HeapIsTrimmedAfterLargeRequestsOnly) {
  ASSERT_NO_FATAL_FAILURE(CreateTrimmingAt4096());
  listener_->Post("/echo", [](const Request& request) {
    return MakeResponse(200, "text/plain", request.body);
  });
  listener_->Get("/built-something-large", [](const Request&) {
    RequestHeapTrim();
    return JsonResponse(200, "{}");
  });
  listener_->Get("/large-answer", [](const Request&) {
    return MakeResponse(200, "text/plain", std::string(4096, 'a'));
  });
  listener_->Get("/ping", [](const Request&) { return JsonResponse(200, "{}"); });
  ASSERT_TRUE(listener_->Start().ok());
  httplib::Client client = Client();
  client.set_keep_alive(true);
  auto trims_after = [&](const httplib::Result& result) {
    EXPECT_TRUE(result && result->status == 200);
    EXPECT_TRUE(client.Get("/ping"));
    return listener_->heap_trims();
  };

  EXPECT_EQ(trims_after(client.Post("/echo", std::string(4095, 'x'), "text/plain")), 0u);
  EXPECT_EQ(trims_after(client.Post("/echo", std::string(4096, 'x'), "text/plain")), 1u);
  EXPECT_EQ(trims_after(client.Get("/built-something-large")), 2u);
  // Decoded bytes count: a small gzip body that inflates past the threshold.
  EXPECT_EQ(trims_after(client.Post("/echo", {{"Content-Encoding", "gzip"}},
                                    Gzip(std::string(8192, 'z')), "text/plain")),
            3u);
  EXPECT_EQ(trims_after(client.Get("/large-answer")), 4u);  // an answer as large counts too
}

// Large answers held while clients read them are bounded together: a client that reads
// nothing holds its answer, and another large answer beside it is 503 until it goes; small
// answers go on.
TEST_F(ListenerTest, LargeAnswersHeldForSlowReadersAreBoundedTogether) {
  ListenerOptions options = Options();
  options.max_answer_bytes_in_flight = 48 << 20;
  options.write_timeout = std::chrono::seconds(60);
  Result<std::unique_ptr<Listener>> created = Listener::Create(std::move(options));
  ASSERT_TRUE(created.ok()) << created.status();
  listener_ = *std::move(created);
  listener_->Get("/large", [](const Request&) {
    return MakeResponse(200, "application/octet-stream", std::string(40 << 20, 'x'));
  });
  listener_->Get("/ping", [](const Request&) { return JsonResponse(200, "{}"); });
  ASSERT_TRUE(listener_->Start().ok());

  // A reader of nothing, with a small receive window: the answer stays in the server.
  const int slow = ::socket(AF_INET, SOCK_STREAM, 0);
  const int window = 4096;
  ASSERT_EQ(::setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &window, sizeof window), 0);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(listener_->port()));
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(slow, reinterpret_cast<sockaddr*>(&server), sizeof server), 0);
  const std::string request = "GET /large HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(slow, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  // Its answer is being written once its status line arrives (read alone: the rest stays).
  std::string status_line;
  char c = 0;
  while (status_line.size() < 12 && ::recv(slow, &c, 1, 0) == 1)
    status_line += c;
  ASSERT_EQ(status_line, "HTTP/1.1 200");

  httplib::Client client = Client();
  // Until an answer with `status` (the slow reader's bytes are released after its close).
  const auto get_until = [&](int status) {
    httplib::Result result = client.Get("/large");
    for (int i = 0; i < 100 && !(result && result->status == status); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      result = client.Get("/large");
    }
    return result;
  };
  const httplib::Result refused = get_until(503);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(ErrorCode(refused), "overloaded");
  const httplib::Result small = client.Get("/ping");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200);

  ::close(slow);  // its write fails, and its bytes are released
  const httplib::Result served = get_until(200);
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
  EXPECT_EQ(served->body.size(), size_t{40} << 20);
}

// Request bodies are bounded together before they are read: a client that announced a large
// body and sends it slowly holds its bytes, and another large body from its address is 503
// (closed, since its body is unread) until it is done; other addresses and small bodies go on.
TEST_F(ListenerTest, LargeRequestBodiesAreBoundedPerAddressBeforeTheyAreRead) {
  ListenerOptions options = Options();
  options.max_request_body_bytes_in_flight = 8 << 20;
  options.max_request_body_bytes_per_address = 3 << 20;
  options.max_body_bytes = 4 << 20;
  options.body_timeout = std::chrono::seconds(60);
  ASSERT_NO_FATAL_FAILURE(StartWithRoutes(std::move(options)));
  const std::string body(2 << 20, 'b');

  // Announces 2 MiB and sends one byte of it.
  const int slow = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(listener_->port()));
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(slow, reinterpret_cast<sockaddr*>(&server), sizeof server), 0);
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\nb";
  ASSERT_EQ(::send(slow, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));

  httplib::Client client = Client();
  httplib::Result refused = client.Post("/echo", body, "text/plain");
  for (int i = 0; i < 100 && !(refused && refused->status == 503); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    refused = client.Post("/echo", body, "text/plain");
  }
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(ErrorCode(refused), "overloaded");
  EXPECT_EQ(refused->get_header_value("Retry-After"), "5");
  const httplib::Result small = client.Post("/echo", std::string(1000, 's'), "text/plain");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200);
  // A chunked body's length is not known before it is read: it counts as its route's limit.
  const std::string chunked =
      testing::SendRawRequest(listener_->port(),
                              "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.rfind("HTTP/1.1 503", 0), 0u) << chunked.substr(0, 200);
  // Another address has its own share.
  const std::string other = testing::SendRawRequest(
      listener_->port(),
      "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: text/plain\r\n"
      "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body,
      "127.0.0.2");
  EXPECT_EQ(other.rfind("HTTP/1.1 200", 0), 0u) << other.substr(0, 200);

  // The slow body completes: its bytes are given back once it is answered.
  for (size_t sent = 1; sent < body.size();) {
    const ssize_t n = ::send(slow, body.data() + sent, body.size() - sent, 0);
    ASSERT_GT(n, 0);
    sent += static_cast<size_t>(n);
  }
  std::string status_line;
  char c = 0;
  while (status_line.size() < 12 && ::recv(slow, &c, 1, 0) == 1)
    status_line += c;
  EXPECT_EQ(status_line, "HTTP/1.1 200");
  ::close(slow);
  httplib::Result served = client.Post("/echo", body, "text/plain");
  for (int i = 0; i < 100 && !(served && served->status == 200); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    served = client.Post("/echo", body, "text/plain");
  }
  ASSERT_TRUE(served);
  EXPECT_EQ(served->status, 200);
  EXPECT_EQ(served->body.size(), body.size());
}

// A deferred POST reads its body like any route and is answered from another thread; it
// trims the heap as the others do: for a large body, for a RequestHeapTrim in its handler,
// and for Responder::TrimHeapAfterAnswer.
TEST_F(ListenerTest, DeferredPostsAnswerFromAnotherThreadAndTrimAsOthers) {
  ASSERT_NO_FATAL_FAILURE(CreateTrimmingAt4096());
  std::mutex mu;
  std::vector<std::thread> answering;
  // Answers on a thread of its own, after the handler returned.
  auto later = [&](Responder responder, std::string body) {
    std::lock_guard lock(mu);
    answering.emplace_back([responder = std::move(responder), body = std::move(body)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      responder.Respond(MakeResponse(200, "text/plain", body));
    });
  };
  listener_->PostDeferred("/echo-later", [&](const Request& request, Responder responder) {
    later(std::move(responder), request.body);
  });
  listener_->PostDeferred("/asks-trim", [&](const Request&, Responder responder) {
    RequestHeapTrim();
    later(std::move(responder), "asked");
  });
  listener_->PostDeferred("/trims-later", [&](const Request&, Responder responder) {
    responder.TrimHeapAfterAnswer();
    later(std::move(responder), "trims");
  });
  listener_->Get("/ping", [](const Request&) { return JsonResponse(200, "{}"); });
  ASSERT_TRUE(listener_->Start().ok());
  httplib::Client client = Client();
  client.set_keep_alive(true);
  auto trims_after = [&](const httplib::Result& result, const std::string& body) {
    EXPECT_TRUE(result && result->status == 200 && result->body == body);
    EXPECT_TRUE(client.Get("/ping"));
    return listener_->heap_trims();
  };
  const std::string small(4095, 'x'), large(4096, 'x');
  EXPECT_EQ(trims_after(client.Post("/echo-later", small, "text/plain"), small), 0u);
  EXPECT_EQ(trims_after(client.Post("/echo-later", large, "text/plain"), large), 1u);
  EXPECT_EQ(trims_after(client.Post("/asks-trim", "", "text/plain"), "asked"), 2u);
  EXPECT_EQ(trims_after(client.Post("/trims-later", "", "text/plain"), "trims"), 3u);
  listener_->Stop();
  std::lock_guard lock(mu);
  for (std::thread& t : answering)
    t.join();
}

TEST_F(ListenerTest, MultipartBodyIs415Json) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::MultipartFormDataItems items = {{"file", "content", "a.txt", "text/plain"}};
  const httplib::Result result = client.Post("/echo", items);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 415);
  EXPECT_EQ(ErrorCode(result), "unsupported_media_type");
}

TEST_F(ListenerTest, ThrowingHandlerIs500JsonAndLogged) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Get("/throw");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 500);
  EXPECT_EQ(
      result->body,
      R"({"error":{"code":"internal","message":"internal error while handling the request"}})");
  EXPECT_THAT(Log(), ElementsAre("control listener: handler for GET \"/throw\" threw: \"database "
                                 "on fire\""));
}

TEST_F(ListenerTest, StatusErrorsAndEmptyErrorsAreJson) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result status = client.Get("/status");
  ASSERT_TRUE(status) << status.error();
  EXPECT_EQ(status->status, 404);
  EXPECT_EQ(status->body, R"({"error":{"code":"not_found","message":"no job 9"}})");
  const httplib::Result empty = client.Get("/empty-error");
  ASSERT_TRUE(empty) << empty.error();
  EXPECT_EQ(empty->status, 503);
  EXPECT_EQ(ErrorCode(empty), "http_error");
}

TEST_F(ListenerTest, ResponseHeaderWithLineBreakIsDroppedAndLogged) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Get("/bad-header");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_FALSE(result->has_header("X-Split"));
  EXPECT_FALSE(result->has_header("Set-Cookie"));
  EXPECT_THAT(Log(), ElementsAre(HasSubstr("dropped response header \"X-Split\"")));
  const httplib::Result cached = client.Get("/cached");
  ASSERT_TRUE(cached) << cached.error();
  EXPECT_EQ(cached->get_header_value("Cache-Control"), "max-age=60");
  EXPECT_EQ(cached->get_header_value_count("Cache-Control"), 1u);
}

TEST_F(ListenerTest, MalformedRequestGetsJsonFromHttplib) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Get("/jobs/1", {{"Range", "bytes=oops"}});
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 416);
  EXPECT_EQ(ErrorCode(result), "range_not_satisfiable");
}

TEST_F(ListenerTest, OverlongPathIs414Json) {
  StartWithRoutes(Options());
  httplib::Client client = Client();
  const httplib::Result result = client.Post("/" + std::string(3000, 'a'), "x", "text/plain");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 414);
  EXPECT_EQ(ErrorCode(result), "uri_too_long");
}

TEST_F(ListenerTest, RefusesPlainHttpOffLoopback) {
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "example.org"}) {
    ListenerOptions options = Options();
    options.host = host;
    options.port = 8080;
    const Result<std::unique_ptr<Listener>> listener = Listener::Create(options);
    ASSERT_FALSE(listener.ok()) << host;
    EXPECT_EQ(listener.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(listener.status().message(),
              "control listener on " + std::string(host) +
                  ":8080: plain HTTP is only allowed on loopback; give --tls-cert/--tls-key or "
                  "--tls-self-signed");
  }
}

TEST_F(ListenerTest, AllowsPlainHttpOnLoopbackNames) {
  for (const char* host : {"localhost", "::1", "127.0.0.2"}) {
    ListenerOptions options = Options();
    options.host = host;
    Result<std::unique_ptr<Listener>> listener = Listener::Create(options);
    ASSERT_TRUE(listener.ok()) << host << ": " << listener.status();
    const Result<int> port = (*listener)->Bind();
    EXPECT_TRUE(port.ok()) << host << ": " << port.status();
  }
}

TEST_F(ListenerTest, RejectsBadOptions) {
  ListenerOptions options = Options();
  options.cert_file = "/etc/ssl/cert.pem";
  EXPECT_THAT(Listener::Create(options).status().message(),
              HasSubstr("TLS needs both a certificate and a key"));
  options = Options();
  options.host.clear();
  EXPECT_THAT(Listener::Create(options).status().message(), HasSubstr("no host to listen on"));
  options = Options();
  options.port = 70000;
  EXPECT_THAT(Listener::Create(options).status().message(), HasSubstr("outside 0..65535"));
  options = Options();
  options.max_body_bytes = 0;
  EXPECT_EQ(Listener::Create(options).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ListenerTest, BadRoutePatternFailsBind) {
  Result<std::unique_ptr<Listener>> listener = Listener::Create(Options());
  ASSERT_TRUE(listener.ok()) << listener.status();
  (*listener)->Get("no-slash", [](const Request&) { return Response(); });
  const Status status = (*listener)->Start();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "control listener: GET route \"no-slash\": pattern must start with '/'");
}

TEST_F(ListenerTest, PortInUseIsUnavailable) {
  StartWithRoutes(Options());
  ListenerOptions options = Options();
  options.port = listener_->port();
  Result<std::unique_ptr<Listener>> second = Listener::Create(options);
  ASSERT_TRUE(second.ok()) << second.status();
  const Result<int> port = (*second)->Bind();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(port.status().message(),
            "control listener: cannot listen on 127.0.0.1:" + std::to_string(listener_->port()) +
                ": the address is already in use");
}

TEST_F(ListenerTest, BindThenStopWithoutStartReleasesPort) {
  Result<std::unique_ptr<Listener>> listener = Listener::Create(Options());
  ASSERT_TRUE(listener.ok()) << listener.status();
  const Result<int> port = (*listener)->Bind();
  ASSERT_TRUE(port.ok()) << port.status();
  (*listener)->Stop();
  ListenerOptions options = Options();
  options.port = *port;
  Result<std::unique_ptr<Listener>> again = Listener::Create(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->Bind().ok());
  EXPECT_EQ((*listener)->Start().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ListenerTest, StopWaitsForInFlightRequest) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  Result<std::unique_ptr<Listener>> created = Listener::Create(Options());
  ASSERT_TRUE(created.ok()) << created.status();
  listener_ = *std::move(created);
  listener_->Get("/slow", [&entered, released](const Request&) {
    entered.set_value();
    released.wait();
    return JsonResponse(200, R"({"done":true})");
  });
  ASSERT_TRUE(listener_->Start().ok());
  const int port = listener_->port();

  std::future<httplib::Result> response = std::async(std::launch::async, [port] {
    httplib::Client client("127.0.0.1", port);
    return client.Get("/slow");
  });
  entered.get_future().wait();
  std::future<void> stopped = std::async(std::launch::async, [this] { listener_->Stop(); });
  // Stop() must not return while the handler is still running.
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  release.set_value();
  stopped.get();

  const httplib::Result result = response.get();
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, R"({"done":true})");

  httplib::Client late("127.0.0.1", port);
  const httplib::Result refused = late.Get("/slow");
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.error(), httplib::Error::Connection);
}

TEST_F(ListenerTest, StopIsIdempotentAndStartAfterStopFails) {
  StartWithRoutes(Options());
  listener_->Stop();
  listener_->Stop();
  EXPECT_EQ(listener_->Start().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ListenerTest, ConcurrentRequests) {
  ListenerOptions options = Options();
  options.worker_threads = 4;
  StartWithRoutes(options);
  std::vector<std::future<int>> results;
  for (int i = 0; i < 16; ++i) {
    results.push_back(std::async(std::launch::async, [this, i] {
      httplib::Client client = Client();
      const httplib::Result result = client.Get("/jobs/" + std::to_string(i));
      return result ? result->status : -1;
    }));
  }
  for (auto& result : results) {
    EXPECT_EQ(result.get(), 200);
  }
}

}  // namespace
}  // namespace expanse::http
