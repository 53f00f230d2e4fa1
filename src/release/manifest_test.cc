#include "release/manifest.h"

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "crypto/ecdsa.h"
#include "release/archive_pack.h"
#include "release/manifest_build.h"
#include "release/release_test_util.h"

namespace expanse::release {
namespace manifest_test {
namespace {

using ::testing::HasSubstr;

constexpr char kSha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kBase[] = "https://releases.example.com/expanse";

ArchiveRef Ref(const std::string& file) {
  return ArchiveRef{std::string(kBase) + "/" + file, kSha, 1234,
                    std::string(kBase) + "/" + file + ".sig"};
}

Manifest Sample() {
  ManifestRelease release{.version = "1.2.0",
                          .published_ms = 1'760'000'000'000,
                          .archives = {{"expanse-daemon", "linux", "amd64", Ref("d.tar.gz")}},
                          .cupti = {{"cuda1280", "amd64", "570.124.06", Ref("c12.tar.gz")},
                                    {"cuda1300", "amd64", "580.65.06", Ref("c13.tar.gz")}}};
  ManifestRelease older{.version = "1.1.0",
                        .published_ms = 1'750'000'000'000,
                        .archives = {{"expanse-daemon", "linux", "amd64", Ref("old.tar.gz")}},
                        .cupti = {}};
  return Manifest{{release, older}};
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

TEST(ManifestTest, RenderParseRoundTrip) {
  std::string text = RenderManifest(Sample());
  Result<Manifest> parsed = ParseManifest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, Sample());
  EXPECT_EQ(RenderManifest(*parsed), text);
  EXPECT_TRUE(ParseManifest(R"({"format":1,"releases":[],"future":true})").ok());
}

TEST(ManifestTest, StrictParserNamesTheField) {
  std::string good = RenderManifest(Sample());
  auto refused = [](const std::string& text) { return ParseManifest(text).status(); };

  Status relative = refused(Replace(good, std::string(kBase) + "/d.tar.gz", "d.tar.gz"));
  EXPECT_EQ(relative.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(relative.message(),
            "releases[0].archives[0].url \"d.tar.gz\" is not an absolute http(s) URL");
  EXPECT_THAT(
      refused(Replace(good, std::string(kBase) + "/c13.tar.gz.sig", "/c13.tar.gz.sig")).message(),
      HasSubstr("releases[0].cupti[1].signature_url"));
  EXPECT_THAT(
      refused(Replace(good, std::string(kBase) + "/d.tar.gz", "ftp://h/d.tar.gz")).message(),
      HasSubstr("absolute http(s)"));
  EXPECT_THAT(refused(Replace(good, kSha, "abc")).message(),
              HasSubstr("releases[0].archives[0].sha256 \"abc\" is not 64 lowercase hex digits"));
  EXPECT_THAT(refused(Replace(good, kSha, std::string(64, 'A'))).message(), HasSubstr("sha256"));

  Status format = refused(Replace(good, "\"format\": 1", "\"format\": 2"));
  EXPECT_EQ(format.reason(), "unsupported_format");
  EXPECT_THAT(format.message(), HasSubstr("manifest.json: format is 2; this build reads format 1"));
  EXPECT_THAT(refused(R"({"releases":[]})").message(), HasSubstr("format is required"));

  EXPECT_THAT(refused(Replace(good, "\"size\": 1234", "\"size\": 0")).message(),
              HasSubstr("releases[0].archives[0].size must be from 1"));
  EXPECT_THAT(refused(Replace(good, "\"size\": 1234", "\"size\": \"1234\"")).message(),
              HasSubstr("size must be an integer"));
  EXPECT_THAT(refused(Replace(good, "\"1.1.0\"", "\"1.2.0\"")).message(),
              HasSubstr("version 1.2.0 is listed twice"));
  EXPECT_THAT(refused(Replace(good, "\"1.1.0\"", "\"1.2\"")).message(), HasSubstr("twice"));
  EXPECT_THAT(refused(Replace(good, "\"cuda1280\"", "\"cuda1300\"")).message(),
              HasSubstr("cuda1300 for amd64 is listed twice"));
  EXPECT_THAT(refused(Replace(good, "\"570.124.06\"", "\"latest\"")).message(),
              HasSubstr("releases[0].cupti[0].min_driver"));
  EXPECT_THAT(refused(Replace(good, "\"1.1.0\"", "\"v1\"")).message(),
              HasSubstr("releases[1].version"));
  EXPECT_THAT(refused("{\"format\":1}").message(), HasSubstr("releases is required"));
  EXPECT_THAT(refused("{\"format\":1,\"releases\":[1]}").message(),
              HasSubstr("releases[0] must be an object"));
  EXPECT_THAT(refused("nope").message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(refused(std::string(kMaxManifestBytes + 1, ' ')).message(), HasSubstr("larger"));
}

TEST(ManifestTest, AbsoluteUrls) {
  EXPECT_TRUE(IsAbsoluteHttpUrl("https://releases.expanse.sh/x.tar.gz"));
  EXPECT_TRUE(IsAbsoluteHttpUrl("http://127.0.0.1:8443/releases/x"));
  for (const char* bad : {"", "x.tar.gz", "/releases/x", "//host/x", "file:///etc/passwd",
                          "https://user:pw@host/x", "https://host/a b", "HTTPS://host/x"})
    EXPECT_FALSE(IsAbsoluteHttpUrl(bad)) << bad;
}

class BuildManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    keys_ = crypto::GenerateSigningKey().value();
    testing::WriteFile(dir_ / "staging/bin/expanse-daemon", "daemon", 0755);
    std::filesystem::create_directories(releases());
  }

  std::string releases() const { return dir_ / "releases"; }

  std::string Pack(const std::string& version, const std::string& name = "expanse-daemon",
                   const std::string& variant = "", const std::string& min_driver = "") {
    PackOptions options{.name = name,
                        .version = version,
                        .variant = variant,
                        .min_driver = min_driver,
                        .files = FilesUnder(dir_ / "staging").value(),
                        .output_dir = releases()};
    Result<std::string> path = PackArchive(options);
    EXPECT_TRUE(path.ok()) << path.status();
    return path.ok() ? *path : "";
  }

  void Sign(const std::string& path, const std::string& private_key) {
    testing::WriteFile(path + ".sig",
                       crypto::SignBlob(private_key, testing::ReadFile(path)).value());
  }

  Result<Manifest> Build(int64_t now_ms = 1000) {
    return BuildManifest({.dir = releases(),
                          .base_url = "http://127.0.0.1:9/releases/",
                          .now_ms = now_ms,
                          .public_key_pem = keys_.public_key_pem});
  }

  testing::TempDir dir_;
  crypto::SigningKeyPair keys_;
};

TEST_F(BuildManifestTest, ListsSignedArchivesWithAbsoluteUrls) {
  Sign(Pack("1.9.2"), keys_.private_key_pem);
  Sign(Pack("1.10.0"), keys_.private_key_pem);
  Sign(Pack("1.10.0", "expanse-cupti", "cuda1300", "580.65.06"), keys_.private_key_pem);
  Sign(Pack("1.10.0", "expanse-cupti", "cuda1280", "570.124.06"), keys_.private_key_pem);
  Result<Manifest> manifest = Build();
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  ASSERT_EQ(manifest->releases.size(), 2u);
  const ManifestRelease& newest = manifest->releases[0];
  EXPECT_EQ(newest.version, "1.10.0");  // numeric order, newest first
  EXPECT_EQ(newest.published_ms, 1000);
  ASSERT_EQ(newest.archives.size(), 1u);
  const std::string file = "expanse-daemon_1.10.0_linux_amd64.tar.gz";
  EXPECT_EQ(newest.archives[0].ref.url, "http://127.0.0.1:9/releases/" + file);
  EXPECT_EQ(newest.archives[0].ref.signature_url, "http://127.0.0.1:9/releases/" + file + ".sig");
  std::string bytes = testing::ReadFile(releases() + "/" + file);
  EXPECT_EQ(newest.archives[0].ref.size, bytes.size());
  EXPECT_EQ(newest.archives[0].ref.sha256, crypto::Sha256Hex(bytes));
  ASSERT_EQ(newest.cupti.size(), 2u);
  EXPECT_EQ(newest.cupti[0].variant, "cuda1280");
  EXPECT_EQ(newest.cupti[1].min_driver, "580.65.06");
  EXPECT_EQ(manifest->releases[1].version, "1.9.2");

  // What was written is what was returned.
  EXPECT_EQ(ParseManifest(testing::ReadFile(releases() + "/manifest.json")).value(), *manifest);

  // A rebuild keeps the publication date of versions already listed.
  Sign(Pack("1.11.0"), keys_.private_key_pem);
  Result<Manifest> rebuilt = Build(5000);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->releases[0].version, "1.11.0");
  EXPECT_EQ(rebuilt->releases[0].published_ms, 5000);
  EXPECT_EQ(rebuilt->releases[1].published_ms, 1000);
}

TEST_F(BuildManifestTest, RefusesUnsignedWronglySignedRenamedOrCorruptArchives) {
  std::string path = Pack("1.2.0");
  Status unsigned_archive = Build().status();
  EXPECT_EQ(unsigned_archive.reason(), "archive_unsigned");
  EXPECT_THAT(unsigned_archive.message(), HasSubstr("expanse-daemon_1.2.0_linux_amd64.tar.gz.sig"));

  crypto::SigningKeyPair other = crypto::GenerateSigningKey().value();
  Sign(path, other.private_key_pem);
  EXPECT_EQ(Build().status().reason(), "signature_mismatch");

  Sign(path, keys_.private_key_pem);
  ASSERT_TRUE(Build().ok());
  std::filesystem::rename(path, releases() + "/expanse-daemon_1.3.0_linux_amd64.tar.gz");
  std::filesystem::rename(path + ".sig",
                          releases() + "/expanse-daemon_1.3.0_linux_amd64.tar.gz.sig");
  EXPECT_THAT(Build().status().message(), HasSubstr("keep the name they were packed under"));
  std::filesystem::remove(releases() + "/expanse-daemon_1.3.0_linux_amd64.tar.gz");

  testing::WriteFile(releases() + "/expanse-daemon_1.4.0_linux_amd64.tar.gz", "not gzip");
  EXPECT_EQ(Build().status().reason(), "archive_corrupt");
}

TEST_F(BuildManifestTest, RefusesBadBaseUrlAndUnreadableOldManifest) {
  EXPECT_THAT(BuildManifest({.dir = releases(), .base_url = "releases/"}).status().message(),
              HasSubstr("not an absolute http(s) URL"));
  testing::WriteFile(releases() + "/manifest.json", "garbage");
  EXPECT_THAT(Build().status().message(), HasSubstr("publication dates"));
}

}  // namespace
}  // namespace manifest_test
}  // namespace expanse::release
