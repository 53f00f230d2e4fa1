// The listener against hostile requests that httplib 0.11.4 would otherwise honour: many
// byte ranges (one answer repeating the content once per range), ranges on API answers,
// and duplicate Content-Length headers.
#include <httplib.h>

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/error.h"
#include "http/http_test_util.h"
#include "http/listener.h"

namespace expanse::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ListenerHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 1000; ++i)
      file_ += static_cast<char>('a' + i % 26);
    ListenerOptions options;
    options.name = "console";
    options.host = "127.0.0.1";
    options.max_body_bytes = 1024;
    options.error_log = [](std::string_view) {};
    Result<std::unique_ptr<Listener>> listener = Listener::Create(std::move(options));
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    listener_->Get("/file", [this](const Request&) {
      Response response;
      response.content_type = "application/octet-stream";
      response.body = file_;
      response.headers.emplace_back("Accept-Ranges", "bytes");
      return response;
    });
    listener_->Get("/json", [this](const Request&) {
      return JsonResponse(200, nlohmann::json({{"text", file_}}).dump());
    });
    listener_->Post("/echo", [](const Request& request) {
      Response response;
      response.content_type = "text/plain";
      response.body = request.body;
      response.headers.emplace_back("Accept-Ranges", "bytes");
      return response;
    });
    ASSERT_TRUE(listener_->Start().ok());
  }

  httplib::Result Get(const std::string& path, const std::string& range) {
    httplib::Client client("127.0.0.1", listener_->port());
    return client.Get(path, {{"Range", range}});
  }

  // Sends `request` as it is and returns everything the server answers until it closes.
  // Requests here ask for Connection: close, since httplib 0.11.4 keeps a connection open
  // whatever the answer's Connection header says (the listener's own
  // "Connection: close" only tells the client).
  std::string Raw(const std::string& request) {
    return testing::SendRawRequest(listener_->port(), request);
  }

  static std::string ManyRanges(int count) {
    std::string header = "bytes=0-";
    for (int i = 1; i < count; ++i)
      header += ",0-";
    return header;
  }

  std::string file_;
  std::unique_ptr<Listener> listener_;
};

TEST_F(ListenerHostileTest, ManyRangesGetTheWholeContentOnce) {
  const httplib::Result result = Get("/file", ManyRanges(2000));
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, file_);
  EXPECT_FALSE(result->has_header("Content-Range"));
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/octet-stream");
  // Two ranges are already too many: no multipart answer at all.
  const httplib::Result two = Get("/file", "bytes=0-9,20-29");
  ASSERT_TRUE(two);
  EXPECT_EQ(two->status, 200);
  EXPECT_EQ(two->body, file_);
}

TEST_F(ListenerHostileTest, OneRangeOfARangeableAnswerIsServed) {
  httplib::Result result = Get("/file", "bytes=10-19");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 206);
  EXPECT_EQ(result->body, file_.substr(10, 10));
  EXPECT_EQ(result->get_header_value("Content-Range"), "bytes 10-19/1000");
  result = Get("/file", "bytes=990-5000");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 206);
  EXPECT_EQ(result->body, file_.substr(990));
  EXPECT_EQ(result->get_header_value("Content-Range"), "bytes 990-999/1000");
  result = Get("/file", "bytes=-5");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 206);
  EXPECT_EQ(result->body, file_.substr(995));
  result = Get("/file", "bytes=995-");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 206);
  EXPECT_EQ(result->body, file_.substr(995));
}

TEST_F(ListenerHostileTest, RangePastTheEndIs416Json) {
  for (const char* range : {"bytes=1000-", "bytes=5000-6000", "bytes=-0"}) {
    const httplib::Result result = Get("/file", range);
    ASSERT_TRUE(result) << range;
    EXPECT_EQ(result->status, 416) << range;
    EXPECT_EQ(result->get_header_value("Content-Range"), "bytes */1000") << range;
    const nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << result->body;
    EXPECT_EQ(body["error"]["code"], "range_not_satisfiable");
  }
}

TEST_F(ListenerHostileTest, ApiAnswersAndErrorsAreNeverRanged) {
  httplib::Result result = Get("/json", "bytes=0-9");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_TRUE(nlohmann::json::parse(result->body, nullptr, false).is_object()) << result->body;
  EXPECT_FALSE(result->has_header("Content-Range"));
  result = Get("/json", ManyRanges(2000));
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_LT(result->body.size(), 2 * file_.size());
  result = Get("/nothing-here", "bytes=0-3");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 404);
  EXPECT_TRUE(nlohmann::json::parse(result->body, nullptr, false).is_object()) << result->body;
  // Range means nothing for POST (RFC 9110 §14.2), even on an answer marked range-able.
  httplib::Client client("127.0.0.1", listener_->port());
  result = client.Post("/echo", {{"Range", "bytes=0-1"}}, "hello world", "text/plain");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, "hello world");
}

TEST_F(ListenerHostileTest, IfRangeGetsTheWholeContent) {
  httplib::Client client("127.0.0.1", listener_->port());
  const httplib::Result result =
      client.Get("/file", {{"Range", "bytes=0-9"}, {"If-Range", "\"some-etag\""}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, file_);
}

TEST_F(ListenerHostileTest, DuplicateContentLengthIs400AndClosesTheConnection) {
  const std::string answer =
      Raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 11\r\n"
          "Content-Type: text/plain\r\nConnection: close\r\n\r\nhello world");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(answer, HasSubstr("Connection: close"));
  EXPECT_THAT(answer, HasSubstr("more than one Content-Length header"));
  EXPECT_THAT(answer, HasSubstr(R"("code":"bad_request")"));
  // The same value twice is refused too; so is one on a GET.
  EXPECT_THAT(Raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n"
                  "Connection: close\r\n\r\nhello"),
              StartsWith("HTTP/1.1 400 "));
  EXPECT_THAT(Raw("GET /file HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n"
                  "Connection: close\r\n\r\n"),
              StartsWith("HTTP/1.1 400 "));
}

TEST_F(ListenerHostileTest, ContentLengthThatIsNotANumberIs400) {
  for (const char* value : {"5, 5", "+5", "0x5", "-1"}) {
    const std::string answer =
        Raw(std::string("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: ") + value +
            "\r\nConnection: close\r\n\r\nhello");
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 400 ")) << value;
    EXPECT_THAT(answer, HasSubstr("not a decimal number")) << value;
  }
  // A single, plain Content-Length still works.
  const std::string answer =
      Raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200 "));
  EXPECT_THAT(answer, HasSubstr("\r\n\r\nhello"));
}

}  // namespace
}  // namespace expanse::http
