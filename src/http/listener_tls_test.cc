// TLS listener tests: a certificate from EnsureSelfSignedCertificate, served over
// loopback, checked by clients that trust exactly one CA file.

#include <httplib.h>

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "http/listener.h"
#include "http/self_signed.h"

namespace expanse::http {
namespace {

using ::expanse::testing::TempDir;
using ::testing::HasSubstr;

class ListenerTlsTest : public ::testing::Test {
 protected:
  SelfSignedFiles Certificate(const std::string& directory) {
    SelfSignedOptions options;
    options.directory = directory;
    options.hosts = {"localhost", "127.0.0.1"};
    Result<SelfSignedFiles> files = EnsureSelfSignedCertificate(options);
    EXPECT_TRUE(files.ok()) << files.status();
    return files.ok() ? *std::move(files) : SelfSignedFiles();
  }

  ListenerOptions Options(const SelfSignedFiles& files) {
    ListenerOptions options;
    options.name = "data";
    options.host = "127.0.0.1";
    options.cert_file = files.cert_file;
    options.key_file = files.key_file;
    return options;
  }

  void Start(const SelfSignedFiles& files) {
    Result<std::unique_ptr<Listener>> listener = Listener::Create(Options(files));
    ASSERT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    listener_->Get("/hello", [](const Request&) { return JsonResponse(200, R"({"hello":1})"); });
    listener_->Get("/archive", [](const Request&) {
      Response response;
      response.content_type = "application/octet-stream";
      for (int i = 0; response.body.size() < (3u << 20) + 7; ++i) {
        response.body += std::to_string(i) + ",";
      }
      return response;
    });
    ASSERT_TRUE(listener_->Start().ok());
  }

  TempDir dir_;
  std::unique_ptr<Listener> listener_;
};

TEST_F(ListenerTlsTest, ClientTrustingOnlyCaPemConnects) {
  const SelfSignedFiles files = Certificate(dir_.path());
  Start(files);
  EXPECT_TRUE(listener_->tls());
  for (const char* host : {"127.0.0.1", "localhost"}) {
    httplib::SSLClient client(host, listener_->port());
    client.set_ca_cert_path(files.ca_file.c_str());
    client.enable_server_certificate_verification(true);
    const httplib::Result result = client.Get("/hello");
    ASSERT_TRUE(result) << host << ": " << result.error();
    EXPECT_EQ(result->status, 200);
    EXPECT_EQ(result->body, R"({"hello":1})");
  }
}

// Release archives are hundreds of MB: asio's TLS stream once reported a large write as done
// after its first buffer, and the client got the header and a closed connection.
TEST_F(ListenerTlsTest, LargeAnswerArrivesWhole) {
  const SelfSignedFiles files = Certificate(dir_.path());
  Start(files);
  httplib::SSLClient client("127.0.0.1", listener_->port());
  client.set_ca_cert_path(files.ca_file.c_str());
  client.enable_server_certificate_verification(true);
  const httplib::Result result = client.Get("/archive");
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->status, 200);
  ASSERT_GE(result->body.size(), (3u << 20) + 7);
  EXPECT_EQ(result->body.substr(0, 8), "0,1,2,3,");
  const std::string tail = result->body.substr(result->body.size() - 16);
  EXPECT_EQ(tail.back(), ',') << tail;
}

TEST_F(ListenerTlsTest, ClientTrustingAnotherCaFails) {
  const SelfSignedFiles files = Certificate(dir_.path() + "/server");
  const SelfSignedFiles other = Certificate(dir_.path() + "/other");
  Start(files);
  httplib::SSLClient client("127.0.0.1", listener_->port());
  client.set_ca_cert_path(other.ca_file.c_str());
  client.enable_server_certificate_verification(true);
  const httplib::Result result = client.Get("/hello");
  EXPECT_FALSE(result);
  EXPECT_EQ(result.error(), httplib::Error::SSLServerVerification);
}

TEST_F(ListenerTlsTest, ClientWithSystemTrustStoreFails) {
  const SelfSignedFiles files = Certificate(dir_.path());
  Start(files);
  httplib::SSLClient client("127.0.0.1", listener_->port());
  client.enable_server_certificate_verification(true);
  const httplib::Result result = client.Get("/hello");
  EXPECT_FALSE(result);
}

TEST_F(ListenerTlsTest, NameOutsideCertificateFails) {
  SelfSignedOptions options;
  options.directory = dir_.path();
  options.hosts = {"127.0.0.1"};  // not "localhost"
  const Result<SelfSignedFiles> files = EnsureSelfSignedCertificate(options);
  ASSERT_TRUE(files.ok()) << files.status();
  Start(*files);
  httplib::SSLClient client("localhost", listener_->port());
  client.set_ca_cert_path(files->ca_file.c_str());
  client.enable_server_certificate_verification(true);
  const httplib::Result result = client.Get("/hello");
  EXPECT_FALSE(result);
  EXPECT_EQ(result.error(), httplib::Error::SSLServerVerification);
}

TEST_F(ListenerTlsTest, PlainHttpClientGetsNoAnswer) {
  const SelfSignedFiles files = Certificate(dir_.path());
  Start(files);
  httplib::Client client("127.0.0.1", listener_->port());
  const httplib::Result result = client.Get("/hello");
  EXPECT_FALSE(result && result->status == 200);
}

TEST_F(ListenerTlsTest, TlsMayListenOffLoopback) {
  const SelfSignedFiles files = Certificate(dir_.path());
  ListenerOptions options = Options(files);
  options.host = "0.0.0.0";
  EXPECT_TRUE(Listener::Create(options).ok());
}

TEST_F(ListenerTlsTest, UnloadableCertificateOrKeyIsAClearError) {
  const SelfSignedFiles files = Certificate(dir_.path() + "/a");
  const SelfSignedFiles other = Certificate(dir_.path() + "/b");

  ListenerOptions options = Options(files);
  options.cert_file = dir_.path() + "/missing.pem";
  Result<std::unique_ptr<Listener>> listener = Listener::Create(options);
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(listener.status().message(),
              HasSubstr("data listener on 127.0.0.1:0: cannot load the TLS certificate chain from "
                        "\"" +
                        options.cert_file + "\": "));

  options = Options(files);
  options.key_file = other.key_file;
  listener = Listener::Create(options);
  ASSERT_FALSE(listener.ok());
  EXPECT_THAT(listener.status().message(), HasSubstr("cannot load the TLS private key"));

  options = Options(files);
  options.key_file = files.cert_file;
  listener = Listener::Create(options);
  ASSERT_FALSE(listener.ok());
  EXPECT_THAT(listener.status().message(), HasSubstr("cannot load the TLS private key"));
}

}  // namespace
}  // namespace expanse::http
