// HttpClient against real loopback servers: the http module's Listener (plain and TLS with a
// self-signed CA) and, for the proxy rules, a raw socket that records what reaches it.
#include "net/http_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_loopback.h"
#include "core/test_temp_dir.h"
#include "http/listener.h"
#include "http/self_signed.h"

namespace expanse::net {
namespace {

using ::expanse::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "Bearer exp_cc_do-not-print-me";
// Bounds a wait that a passing test never reaches, so a broken one fails instead of hanging.
constexpr std::chrono::seconds kHangBound{10};

class HttpClientTest : public ::testing::Test {
 protected:
  void StartListener(const std::string& cert_file = "", const std::string& key_file = "") {
    http::ListenerOptions options;
    options.name = "test";
    options.host = "127.0.0.1";
    options.cert_file = cert_file;
    options.key_file = key_file;
    auto listener = http::Listener::Create(options);
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    listener_->Post("/echo", [](const http::Request& request) {
      http::Response response;
      response.status = 201;
      response.content_type = "text/plain";
      response.body = request.body;
      response.headers = {
          {"X-Seen-Type", std::string(request.Header("Content-Type").value_or(""))},
          {"X-Seen-Auth", std::string(request.Header("Authorization").value_or(""))},
          {"X-Seen-Expect", std::string(request.Header("Expect").value_or("none"))}};
      return response;
    });
    // What a signed request brings, for an object store: method, body and signing headers.
    const auto signed_echo = [](const http::Request& request) {
      http::Response response;
      response.status = request.method == "DELETE" ? 204 : 200;
      response.content_type = "text/plain";
      response.body = request.body;
      response.headers = {
          {"X-Seen-Method", request.method},
          {"X-Seen-Auth", std::string(request.Header("Authorization").value_or(""))},
          {"X-Seen-Date", std::string(request.Header("x-amz-date").value_or(""))},
          {"X-Seen-Expect", std::string(request.Header("Expect").value_or("none"))}};
      return response;
    };
    listener_->Put("/bucket/object", signed_echo);
    listener_->Delete("/bucket/object", signed_echo);
    listener_->Get("/big", [](const http::Request&) {
      return http::JsonResponse(200, "\"" + std::string(64 << 10, 'x') + "\"");
    });
    listener_->Get("/slow", [this](const http::Request&) {
      std::unique_lock lock(slow_mu_);
      slow_cv_.wait_for(lock, kHangBound, [this] { return slow_released_; });
      slow_answered_ = true;
      return http::JsonResponse(200, "{}");
    });
    listener_->Get("/fail", [](const http::Request&) {
      http::Response response = http::JsonResponse(503, R"({"error":{"code":"unavailable"}})");
      response.headers = {{"Retry-After", "7"}};
      return response;
    });
    listener_->Get("/many-headers", [](const http::Request&) {
      http::Response response = http::JsonResponse(200, "{}");
      for (int i = 0; i < 1000; ++i)
        response.headers.emplace_back("X-Header-" + std::to_string(i), std::to_string(i));
      return response;
    });
    ASSERT_TRUE(listener_->Start().ok());
  }

  std::string Url(const std::string& path, const std::string& scheme = "http") {
    return scheme + "://127.0.0.1:" + std::to_string(listener_->port()) + path;
  }

  // /slow answers only once the test releases it (or after kHangBound, so that a broken test
  // fails rather than hangs): a client that gave up did so while no answer could have come.
  void ReleaseSlow() {
    std::lock_guard lock(slow_mu_);
    slow_released_ = true;
    slow_cv_.notify_all();
  }
  bool SlowAnswered() {
    std::lock_guard lock(slow_mu_);
    return slow_answered_;
  }
  void TearDown() override { ReleaseSlow(); }  // the listener's Stop waits for its handlers

  std::unique_ptr<HttpClient> Client(HttpClientOptions options = {}) {
    auto client = HttpClient::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  TempDir dir_;
  std::mutex slow_mu_;
  std::condition_variable slow_cv_;
  bool slow_released_ = false;
  bool slow_answered_ = false;
  std::unique_ptr<http::Listener> listener_;  // last: stopped before what its handlers use
};

TEST_F(HttpClientTest, PostsHeadersAndBodyAndReadsTheAnswer) {
  StartListener();
  HttpClientOptions options;
  options.max_response_bytes = 4 << 20;
  auto client = Client(options);
  HttpRequest request{.method = "POST",
                      .url = Url("/echo"),
                      .headers = {{"Content-Type", "application/zstd"}, {"Authorization", kSecret}},
                      .body = std::string(3 << 20, 'b')};  // large enough for libcurl's Expect
  Result<HttpResponse> response = client->Send(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(response->body, request.body);
  EXPECT_EQ(response->Header("x-seen-type"), "application/zstd");
  EXPECT_EQ(response->Header("X-SEEN-AUTH"), kSecret);
  EXPECT_EQ(response->Header("X-Seen-Expect"), "none");
  EXPECT_EQ(response->Header("Content-Type"), "text/plain");
  EXPECT_FALSE(response->Header("X-Missing").has_value());
}

TEST_F(HttpClientTest, PutAndDeleteSignedWithAwsSigV4) {
  StartListener();
  auto client = Client({.max_response_bytes = 4 << 20});
  const AwsSigV4 key{.region = "eu-west-3", .access_key = "AKIDEXAMPLE", .secret_key = kSecret};
  HttpRequest put{.method = "PUT",
                  .url = Url("/bucket/object"),
                  .headers = {{"x-amz-content-sha256", std::string(64, 'a')},
                              {"Content-Type", "application/json"}},
                  .body = std::string(2 << 20, 'j'),
                  .aws_sigv4 = key};
  Result<HttpResponse> response = client->Send(put);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->Header("X-Seen-Method"), "PUT");
  EXPECT_EQ(response->body, put.body);
  const std::string auth(response->Header("X-Seen-Auth").value_or(""));
  EXPECT_EQ(auth.rfind("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/", 0), 0u) << auth;
  EXPECT_NE(auth.find("/eu-west-3/s3/aws4_request"), std::string::npos) << auth;
  EXPECT_NE(auth.find("x-amz-content-sha256"), std::string::npos) << auth;
  EXPECT_EQ(auth.find("expect"), std::string::npos) << auth;  // what it signs, it sends
  EXPECT_EQ(auth.find(kSecret), std::string::npos);
  EXPECT_FALSE(response->Header("X-Seen-Date").value_or("").empty());

  HttpRequest del{.method = "DELETE", .url = Url("/bucket/object"), .aws_sigv4 = key};
  response = client->Send(del);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 204);
  EXPECT_EQ(response->Header("X-Seen-Method"), "DELETE");
  // The same handle, unsigned again: no leftover signing.
  HttpRequest plain{.method = "PUT", .url = Url("/bucket/object"), .body = "x"};
  response = client->Send(plain);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->Header("X-Seen-Auth"), "");
  EXPECT_EQ(
      client->Send(HttpRequest{.method = "PATCH", .url = Url("/bucket/object")}).status().reason(),
      "invalid_method");
}

TEST_F(HttpClientTest, ErrorStatusesAreAnswersNotFailures) {
  StartListener();
  Result<HttpResponse> response = Client()->Send({.url = Url("/fail")});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->Header("Retry-After"), "7");
  Result<HttpResponse> missing = Client()->Send({.url = Url("/nothing")});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
}

// A server could send millions of header lines (libcurl bounds each line, not their number);
// the response used to keep every one of them.
TEST_F(HttpClientTest, ResponseHeadersAreCapped) {
  StartListener();
  Result<HttpResponse> response = Client()->Send({.url = Url("/many-headers")});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->headers.size(), kMaxResponseHeaders);
  EXPECT_EQ(response->Header("X-Header-0"), "0");
  EXPECT_EQ(response->Header("X-Header-999"), std::nullopt);
}

TEST(HttpHeadersTest, OnlyTheFinalResponsesNamedHeadersAreKept) {
  HeaderList headers;
  for (const char* line : {"HTTP/1.1 100 Continue\r\n", "X-Interim: 1\r\n", "\r\n",
                           "HTTP/1.1 503 Service Unavailable\r\n", "Retry-After: \t 7 \r\n",
                           "no colon\r\n", ": no name\r\n", "Empty:\r\n", "\r\n"})
    AddResponseHeaderLine(headers, line);
  EXPECT_EQ(headers, (HeaderList{{"Retry-After", "7"}, {"Empty", ""}}));
  for (size_t i = 0; i < kMaxResponseHeaders + 10; ++i)
    AddResponseHeaderLine(headers, "X-More: " + std::to_string(i));
  EXPECT_EQ(headers.size(), kMaxResponseHeaders);
  EXPECT_EQ(headers.back().second, std::to_string(kMaxResponseHeaders - 3));
  AddResponseHeaderLine(headers, "HTTP/2 200");
  EXPECT_TRUE(headers.empty()) << "a new response starts a new list";
}

TEST_F(HttpClientTest, ResponseBodyIsCapped) {
  StartListener();
  HttpClientOptions options;
  options.max_response_bytes = 1024;
  Result<HttpResponse> response = Client(options)->Send({.url = Url("/big")});
  EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(response.status().reason(), "response_too_large");
}

TEST_F(HttpClientTest, TotalTimeout) {
  StartListener();
  HttpClientOptions options;
  options.total_timeout = std::chrono::milliseconds(100);
  Result<HttpResponse> response = Client(options)->Send({.url = Url("/slow")});
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(response.status().reason(), "timeout");
  EXPECT_FALSE(SlowAnswered());  // the client gave up while the server still held the answer
  ReleaseSlow();
}

TEST_F(HttpClientTest, RefusedConnectionIsRetryableAndNeverShowsTheCredential) {
  StartListener();
  const std::string url = Url("/echo");
  listener_->Stop();
  Result<HttpResponse> response = Client()->Send(
      {.method = "POST", .url = url, .headers = {{"Authorization", kSecret}}, .body = "secret"});
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(response.status().reason(), "network_error");
  EXPECT_THAT(response.status().message(), HasSubstr("POST \"http://127.0.0.1:"));
  EXPECT_THAT(response.status().message(), Not(HasSubstr("exp_cc_")));
}

TEST_F(HttpClientTest, RefusesPlainHttpOffLoopbackBeforeConnecting) {
  auto client = Client();
  Result<HttpResponse> response = client->Send({.method = "POST",
                                                .url = "http://192.0.2.1/dp/v1/ingest",
                                                .headers = {{"Authorization", kSecret}}});
  EXPECT_EQ(response.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(response.status().reason(), "insecure_url");
  EXPECT_EQ(client->Send({.method = "PATCH", .url = "https://x.example/"}).status().reason(),
            "invalid_method");
  Result<HttpResponse> injected =
      client->Send({.url = "https://x.example/", .headers = {{"Authorization", "a\r\nX: y"}}});
  EXPECT_EQ(injected.status().reason(), "invalid_header");
  EXPECT_THAT(injected.status().message(), Not(HasSubstr("X: y")));
}

TEST_F(HttpClientTest, TlsVerifiesAgainstTheGivenCaFile) {
  http::SelfSignedOptions cert_options;
  cert_options.directory = dir_.path();
  cert_options.hosts = {"127.0.0.1", "localhost"};
  auto files = http::EnsureSelfSignedCertificate(cert_options);
  ASSERT_TRUE(files.ok()) << files.status();
  StartListener(files->cert_file, files->key_file);

  HttpClientOptions trusting;
  trusting.ca_file = files->ca_file;
  Result<HttpResponse> ok =
      Client(trusting)->Send({.method = "POST", .url = Url("/echo", "https"), .body = "hi"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->body, "hi");

  // The system bundle does not know the self-signed CA: verification is on.
  Result<HttpResponse> refused = Client()->Send({.url = Url("/big", "https")});
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().reason(), "tls_error");

  // Why ca_file exists: libcurl itself ignores SSL_CERT_FILE (only the curl tool reads it).
  const char* saved = std::getenv("SSL_CERT_FILE");
  const std::string saved_value = saved != nullptr ? saved : "";
  ::setenv("SSL_CERT_FILE", files->ca_file.c_str(), 1);
  Result<HttpResponse> still_refused = Client()->Send({.url = Url("/big", "https")});
  if (saved != nullptr)
    ::setenv("SSL_CERT_FILE", saved_value.c_str(), 1);
  else
    ::unsetenv("SSL_CERT_FILE");
  EXPECT_EQ(still_refused.status().reason(), "tls_error");
}

TEST(HttpClientOptionsTest, AnUnreadableCaFileIsRefusedAtCreation) {
  HttpClientOptions options;
  options.ca_file = "/nonexistent/ca.pem";
  auto client = HttpClient::Create(options);
  EXPECT_EQ(client.status().reason(), "ca_file_unreadable");
  EXPECT_THAT(client.status().message(), HasSubstr("\"/nonexistent/ca.pem\""));
}

// A TCP socket on loopback that accepts one connection at a time, records the request
// line, and refuses with 403: enough to see whether libcurl went through a proxy.
class RecordingProxy {
 public:
  RecordingProxy() {
    fd_ = expanse::testing::ListenOnLoopback(8, &port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RecordingProxy() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string first_line() {
    std::lock_guard lock(mu_);
    return first_line_;
  }

 private:
  void Serve() {
    while (true) {
      const int connection = ::accept(fd_, nullptr, nullptr);
      if (connection < 0)
        return;
      char buffer[1024];
      const ssize_t n = ::recv(connection, buffer, sizeof buffer, 0);
      if (n > 0) {
        std::string text(buffer, static_cast<size_t>(n));
        std::lock_guard lock(mu_);
        first_line_ = text.substr(0, text.find("\r\n"));
      }
      constexpr char kRefusal[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
      (void)::send(connection, kRefusal, sizeof kRefusal - 1, MSG_NOSIGNAL);
      ::close(connection);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string first_line_;
};

// libcurl reads the proxy variables itself; this pins down the behaviour http_client.h
// documents. The test changes the process environment, so it restores it on exit.
class ProxyEnvironmentTest : public HttpClientTest {
 protected:
  void SetUp() override {
    for (const char* name : {"https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
                             "NO_PROXY", "http_proxy"}) {
      if (const char* value = std::getenv(name))
        saved_[name] = value;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : {"https_proxy", "HTTPS_PROXY", "NO_PROXY", "http_proxy"})
      ::unsetenv(name);
    for (const auto& [name, value] : saved_)
      ::setenv(name.c_str(), value.c_str(), 1);
  }
  std::map<std::string, std::string> saved_;
};

TEST_F(ProxyEnvironmentTest, HttpsProxyAndNoProxyAreHonoured) {
  RecordingProxy proxy;
  HttpClientOptions options;
  options.connect_timeout = std::chrono::seconds(5);
  auto client = Client(options);
  ::setenv("HTTPS_PROXY", proxy.url().c_str(), 1);
  Result<HttpResponse> via_proxy = client->Send({.url = "https://expanse-test.invalid/x"});
  EXPECT_FALSE(via_proxy.ok());
  EXPECT_EQ(via_proxy.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(proxy.first_line(), "CONNECT expanse-test.invalid:443 HTTP/1.1");

  RecordingProxy second;
  ::setenv("NO_PROXY", "expanse-test.invalid", 1);
  ::setenv("HTTPS_PROXY", second.url().c_str(), 1);
  Result<HttpResponse> direct = client->Send({.url = "https://expanse-test.invalid/x"});
  EXPECT_EQ(direct.status().reason(), "network_error");  // .invalid does not resolve
  EXPECT_EQ(second.first_line(), "");
}

// The daemon takes its proxy from daemon.env and passes it in the options, leaving the process
// environment alone.
TEST_F(ProxyEnvironmentTest, ProxyOptionsWorkWithoutTheEnvironment) {
  RecordingProxy proxy;
  HttpClientOptions options;
  options.connect_timeout = std::chrono::seconds(5);
  options.https_proxy = proxy.url();
  Result<HttpResponse> via_proxy = Client(options)->Send({.url = "https://expanse-test.invalid/x"});
  EXPECT_EQ(via_proxy.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(proxy.first_line(), "CONNECT expanse-test.invalid:443 HTTP/1.1");

  RecordingProxy second;
  options.https_proxy = second.url();
  options.no_proxy = "expanse-test.invalid";
  Result<HttpResponse> direct = Client(options)->Send({.url = "https://expanse-test.invalid/x"});
  EXPECT_EQ(direct.status().reason(), "network_error");  // .invalid does not resolve
  EXPECT_EQ(second.first_line(), "");
}

TEST_F(ProxyEnvironmentTest, LoopbackNeverUsesAProxy) {
  StartListener();
  RecordingProxy proxy;
  ::setenv("http_proxy", proxy.url().c_str(), 1);
  ::setenv("HTTPS_PROXY", proxy.url().c_str(), 1);
  Result<HttpResponse> response =
      Client()->Send({.method = "POST", .url = Url("/echo"), .body = "x"});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 201);
  EXPECT_EQ(proxy.first_line(), "");
}

}  // namespace
}  // namespace expanse::net
