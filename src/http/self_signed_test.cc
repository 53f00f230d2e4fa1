#include "http/self_signed.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/test_temp_dir.h"

namespace expanse::http {
namespace {

using ::expanse::testing::TempDir;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

mode_t ModeOf(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;

X509Ptr LoadCertificate(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) {
    return nullptr;
  }
  X509Ptr cert(PEM_read_X509(file, nullptr, nullptr, nullptr));
  std::fclose(file);
  return cert;
}

class SelfSignedTest : public ::testing::Test {
 protected:
  SelfSignedOptions Options(std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"}) {
    SelfSignedOptions options;
    options.directory = dir_.path() + "/tls";
    options.hosts = std::move(hosts);
    options.clock = &clock_;
    return options;
  }
  SelfSignedFiles MustEnsure(const SelfSignedOptions& options) {
    Result<SelfSignedFiles> files = EnsureSelfSignedCertificate(options);
    EXPECT_TRUE(files.ok()) << files.status();
    return files.ok() ? *std::move(files) : SelfSignedFiles();
  }

  TempDir dir_;
  ManualClock clock_{SystemClock().NowMs()};
};

TEST_F(SelfSignedTest, WritesCaCertificateAndKey) {
  const SelfSignedFiles files = MustEnsure(Options());
  EXPECT_TRUE(files.generated);
  EXPECT_EQ(files.ca_file, dir_.path() + "/tls/ca.pem");
  EXPECT_EQ(files.cert_file, dir_.path() + "/tls/server.pem");
  EXPECT_EQ(files.key_file, dir_.path() + "/tls/server.key");
  EXPECT_THAT(ReadFile(files.ca_file), StartsWith("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(ReadFile(files.cert_file), StartsWith("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(ReadFile(files.key_file), StartsWith("-----BEGIN PRIVATE KEY-----"));
  EXPECT_EQ(ModeOf(files.key_file), 0600u);
  EXPECT_EQ(ModeOf(files.cert_file), 0644u);
  EXPECT_EQ(ModeOf(files.ca_file), 0644u);
  EXPECT_EQ(ModeOf(dir_.path() + "/tls"), 0755u);
}

TEST_F(SelfSignedTest, CertificateHasTheRequestedNamesAndRoles) {
  const SelfSignedFiles files = MustEnsure(Options({"Expanse.Example.org", "10.1.2.3", "fd00::5"}));
  const X509Ptr server = LoadCertificate(files.cert_file);
  const X509Ptr ca = LoadCertificate(files.ca_file);
  ASSERT_TRUE(server && ca);
  EXPECT_EQ(X509_check_host(server.get(), "expanse.example.org", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "10.1.2.3", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "fd00:0::5", 0), 1);
  EXPECT_NE(X509_check_host(server.get(), "other.example.org", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_ip_asc(server.get(), "10.1.2.4", 0), 1);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  EXPECT_EQ(X509_check_ca(server.get()), 0);
  EXPECT_EQ(X509_verify(server.get(), X509_get0_pubkey(ca.get())), 1);
  EXPECT_EQ(X509_check_purpose(server.get(), X509_PURPOSE_SSL_SERVER, 0), 1);
  EXPECT_EQ(X509_get_version(server.get()), X509_VERSION_3);
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(server.get())), EVP_PKEY_EC);
}

TEST_F(SelfSignedTest, ReusesValidFiles) {
  const SelfSignedFiles first = MustEnsure(Options());
  const std::string ca = ReadFile(first.ca_file);
  const std::string key = ReadFile(first.key_file);
  clock_.Advance(24LL * 3600 * 1000 * 365);  // a year later, still well within validity
  const SelfSignedFiles second = MustEnsure(Options({"127.0.0.1"}));  // a subset of the names
  EXPECT_FALSE(second.generated);
  EXPECT_THAT(second.reason, IsEmpty());
  EXPECT_EQ(ReadFile(second.ca_file), ca);
  EXPECT_EQ(ReadFile(second.key_file), key);
}

TEST_F(SelfSignedTest, RegeneratesWhenAHostIsMissing) {
  const SelfSignedFiles first = MustEnsure(Options());
  const std::string ca = ReadFile(first.ca_file);
  const SelfSignedFiles second = MustEnsure(Options({"localhost", "10.0.0.5"}));
  EXPECT_TRUE(second.generated);
  EXPECT_EQ(second.reason, "server.pem does not cover 10.0.0.5");
  EXPECT_NE(ReadFile(second.ca_file), ca);
  const X509Ptr server = LoadCertificate(second.cert_file);
  EXPECT_EQ(X509_check_ip_asc(server.get(), "10.0.0.5", 0), 1);
}

TEST_F(SelfSignedTest, RegeneratesNearExpiry) {
  SelfSignedOptions options = Options();
  options.validity = std::chrono::days(100);
  options.renew_before = std::chrono::days(30);
  MustEnsure(options);
  clock_.Advance(69LL * 24 * 3600 * 1000);
  EXPECT_FALSE(MustEnsure(options).generated);
  clock_.Advance(2LL * 24 * 3600 * 1000);
  const SelfSignedFiles renewed = MustEnsure(options);
  EXPECT_TRUE(renewed.generated);
  EXPECT_EQ(renewed.reason, "ca.pem expires within 30 days");
}

TEST_F(SelfSignedTest, RegeneratesExpiredAndNotYetValidFiles) {
  SelfSignedOptions options = Options();
  MustEnsure(options);
  clock_.Advance(-2LL * 24 * 3600 * 1000);  // before notBefore
  const SelfSignedFiles early = MustEnsure(options);
  EXPECT_TRUE(early.generated);
  EXPECT_THAT(early.reason, HasSubstr("certificate is not yet valid"));
  clock_.Advance(4LL * 365 * 24 * 3600 * 1000);
  const SelfSignedFiles late = MustEnsure(options);
  EXPECT_TRUE(late.generated);
  EXPECT_THAT(late.reason, HasSubstr("certificate has expired"));
}

TEST_F(SelfSignedTest, RegeneratesMismatchedOrCorruptFiles) {
  const SelfSignedOptions options = Options();
  const SelfSignedFiles files = MustEnsure(options);
  TempDir other_dir;
  SelfSignedOptions other = options;
  other.directory = other_dir.path();
  const SelfSignedFiles other_files = MustEnsure(other);

  WriteFile(files.key_file, ReadFile(other_files.key_file));
  EXPECT_EQ(MustEnsure(options).reason, "server.key does not belong to server.pem");

  WriteFile(files.ca_file, ReadFile(other_files.ca_file));
  EXPECT_THAT(MustEnsure(options).reason, StartsWith("server.pem does not verify against ca.pem"));

  WriteFile(files.cert_file, "garbage");
  EXPECT_EQ(MustEnsure(options).reason, "server.pem holds no PEM certificate");

  ASSERT_EQ(unlink(files.ca_file.c_str()), 0);
  EXPECT_EQ(MustEnsure(options).reason, "no complete set of ca.pem, server.pem and server.key");
  EXPECT_FALSE(MustEnsure(options).generated);
}

TEST_F(SelfSignedTest, RejectsBadHosts) {
  for (const char* host : {"", "bad host", "under_score.example", "-x.example", "a..b",
                           "x\n.example", "*.example.org"}) {
    const Result<SelfSignedFiles> files = EnsureSelfSignedCertificate(Options({host}));
    ASSERT_FALSE(files.ok()) << host;
    EXPECT_EQ(files.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(files.status().message(), HasSubstr("is neither an IP address nor a DNS name"));
  }
  EXPECT_NE(access((dir_.path() + "/tls").c_str(), F_OK), 0) << "nothing written";
}

TEST_F(SelfSignedTest, DefaultHostsIncludeLoopbackAndHostName) {
  const std::vector<std::string> hosts = DefaultCertificateHosts();
  EXPECT_THAT(hosts, Contains("localhost"));
  EXPECT_THAT(hosts, Contains("127.0.0.1"));
  EXPECT_THAT(hosts, Contains("::1"));
  SelfSignedOptions options = Options({});
  const SelfSignedFiles files = MustEnsure(options);
  const X509Ptr server = LoadCertificate(files.cert_file);
  for (const std::string& host : hosts) {
    EXPECT_TRUE(X509_check_host(server.get(), host.c_str(), 0, 0, nullptr) == 1 ||
                X509_check_ip_asc(server.get(), host.c_str(), 0) == 1)
        << host;
  }
}

TEST_F(SelfSignedTest, WriteSelfSignedCertificateReportsErrors) {
  EXPECT_TRUE(WriteSelfSignedCertificate(Options()).ok());
  WriteFile(dir_.path() + "/file", "x");
  SelfSignedOptions options = Options();
  options.directory = dir_.path() + "/file/tls";
  const Status status = WriteSelfSignedCertificate(options);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(dir_.path() + "/file"));
  options.directory.clear();
  EXPECT_EQ(WriteSelfSignedCertificate(options).code(), StatusCode::kInvalidArgument);
}

TEST_F(SelfSignedTest, UnreadableFileIsAnErrorNotOverwritten) {
  // A directory where the key should be cannot be read even by root (the test suite runs as
  // root, which reads files whatever their mode).
  const SelfSignedFiles files = MustEnsure(Options());
  ASSERT_EQ(unlink(files.key_file.c_str()), 0);
  ASSERT_EQ(mkdir(files.key_file.c_str(), 0700), 0);
  const Result<SelfSignedFiles> again = EnsureSelfSignedCertificate(Options());
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr(files.key_file));
  struct stat st {};
  ASSERT_EQ(stat(files.key_file.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << "the unreadable path was replaced";
}

}  // namespace
}  // namespace expanse::http
