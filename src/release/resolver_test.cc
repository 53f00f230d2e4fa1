// The installer's side against a real expanse-server release mirror on loopback: fetch and
// verify the manifest, pick release and CUPTI variant, download with every check, extract.
#include "release/resolver.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/clock.h"
#include "crypto/ecdsa.h"
#include "release/archive_extract.h"
#include "release/archive_pack.h"
#include "release/embedded_key.h"
#include "release/manifest_build.h"
#include "release/release_test_util.h"
#include "server/server_app.h"

namespace expanse::release {
namespace resolver_test {
namespace {

using ::testing::HasSubstr;

class MirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    keys_ = crypto::GenerateSigningKey().value();
    std::filesystem::create_directories(releases());
    testing::WriteFile(dir_ / "daemon/bin/expanse-daemon",
                       "\x7f"
                       "ELF daemon",
                       0755);
    testing::WriteFile(dir_ / "cupti/bin/expanse-cupti-helper",
                       "\x7f"
                       "ELF helper",
                       0755);
    testing::WriteFile(dir_ / "cupti/lib/cupti/versions.tsv", "cupti\t13.0\n");
    Publish("1.2.0");
    Publish("1.10.0");
    PublishCupti("1.10.0", "cuda1280", "570.124.06");
    PublishCupti("1.10.0", "cuda1300", "580.65.06");

    server::ServerOptions options;
    options.db_path = dir_ / "db.sqlite";
    options.control_listen = "127.0.0.1:0";
    options.releases_dir = releases();
    auto app = server::ServerApp::Create(options, clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = std::move(*app);
    ASSERT_TRUE(app_->Start().ok());
    releases_url_ = "http://127.0.0.1:" + std::to_string(app_->control_port()) + "/releases";

    auto manifest = BuildManifest({.dir = releases(), .base_url = releases_url_, .now_ms = 7});
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    SignFile(releases() + "/manifest.json");
    auto client = net::HttpClient::Create(ReleaseHttpClientOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  void TearDown() override {
    client_.reset();  // closes its keep-alive connection, so Stop() need not wait it out
    app_->Stop();
  }

  std::string releases() const { return dir_ / "releases"; }

  void SignFile(const std::string& path) {
    testing::WriteFile(
        path + ".sig",
        crypto::SignBlob(keys_.private_key_pem, testing::ReadFile(path)).value() + "\n");
  }

  void Publish(const std::string& version) {
    PackOptions options{.name = "expanse-daemon",
                        .version = version,
                        .files = FilesUnder(dir_ / "daemon").value(),
                        .output_dir = releases()};
    SignFile(PackArchive(options).value());
  }

  void PublishCupti(const std::string& version, const std::string& variant,
                    const std::string& min_driver) {
    PackOptions options{.name = "expanse-cupti",
                        .version = version,
                        .variant = variant,
                        .min_driver = min_driver,
                        .files = FilesUnder(dir_ / "cupti").value(),
                        .output_dir = releases()};
    SignFile(PackArchive(options).value());
  }

  Result<VerifiedManifest> Fetch() {
    return FetchManifest(*client_, releases_url_, keys_.public_key_pem);
  }

  testing::TempDir dir_;
  crypto::SigningKeyPair keys_;
  ManualClock clock_{1'800'000'000'000};
  std::unique_ptr<server::ServerApp> app_;
  std::unique_ptr<net::HttpClient> client_;
  std::string releases_url_;
};

TEST_F(MirrorTest, InstallsTheDaemonAndTheDriverCompatibleCuptiVariant) {
  Result<VerifiedManifest> manifest = Fetch();
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->url, releases_url_ + "/manifest.json");
  EXPECT_EQ(manifest->bytes, testing::ReadFile(releases() + "/manifest.json"));

  Result<SelectedRelease> selected = SelectRelease(manifest->manifest, "1.10.0", "amd64");
  ASSERT_TRUE(selected.ok()) << selected.status();
  std::string daemon = DownloadVerified(*client_, selected->archive.ref, keys_.public_key_pem,
                                        dir_ / "daemon.tar.gz")
                           .value();
  EXPECT_TRUE(std::filesystem::exists(daemon + ".sig"));
  Result<ExtractedRelease> extracted = ExtractArchive(daemon, dir_ / "installed");
  ASSERT_TRUE(extracted.ok()) << extracted.status();
  EXPECT_EQ(extracted->info.version, "1.10.0");
  EXPECT_EQ(testing::ReadFile(dir_ / "installed/bin/expanse-daemon"),
            "\x7f"
            "ELF daemon");

  Result<CuptiSelection> cupti = SelectCuptiVariant(selected->release, "amd64", "580.95.05", "");
  ASSERT_TRUE(cupti.ok()) << cupti.status();
  ASSERT_TRUE(cupti->variant.has_value());
  EXPECT_EQ(cupti->variant->variant, "cuda1300");
  EXPECT_EQ(cupti->explanation, "cuda1300 (driver 580.95.05 >= 580.65.06)");
  std::string cupti_path =
      DownloadVerified(*client_, cupti->variant->ref, keys_.public_key_pem, dir_ / "cupti.tar.gz")
          .value();
  Result<StagedBinary> staged = InspectStagedBinary(cupti_path, keys_.public_key_pem);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_TRUE(staged->verified);
  EXPECT_EQ(staged->info->variant, "cuda1300");
}

TEST_F(MirrorTest, UnsignedOrTamperedManifestIsRefused) {
  std::filesystem::remove(releases() + "/manifest.json.sig");
  Status unsigned_manifest = Fetch().status();
  EXPECT_EQ(unsigned_manifest.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(unsigned_manifest.reason(), "manifest_unsigned");

  SignFile(releases() + "/manifest.json");
  ASSERT_TRUE(Fetch().ok());
  std::string text = testing::ReadFile(releases() + "/manifest.json");
  testing::WriteFile(releases() + "/manifest.json", text + " ");
  EXPECT_EQ(Fetch().status().reason(), "signature_mismatch");

  crypto::SigningKeyPair other = crypto::GenerateSigningKey().value();
  testing::WriteFile(releases() + "/manifest.json", text);
  EXPECT_EQ(FetchManifest(*client_, releases_url_, other.public_key_pem).status().reason(),
            "signature_mismatch");
  // The embedded key did not sign this test mirror either.
  EXPECT_EQ(FetchManifest(*client_, releases_url_, EmbeddedReleasePublicKey()).status().reason(),
            "signature_mismatch");

  EXPECT_EQ(
      FetchManifest(*client_, releases_url_ + "/nowhere", keys_.public_key_pem).status().reason(),
      "manifest_not_found");
  EXPECT_FALSE(FetchManifest(*client_, "releases", keys_.public_key_pem).ok());
}

// The client is made for archives (up to 1 GiB): a manifest or signature larger than it may be
// is refused as it arrives, not held whole in memory and measured afterwards.
TEST_F(MirrorTest, AnOversizedManifestIsRefusedWhileItArrives) {
  testing::WriteFile(releases() + "/manifest.json", std::string(kMaxManifestBytes + 4096, ' '));
  Status big = Fetch().status();
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted) << big;
  EXPECT_EQ(big.reason(), "response_too_large") << big;
}

TEST_F(MirrorTest, DownloadChecksSizeChecksumAndSignature) {
  Manifest manifest = Fetch().value().manifest;
  ArchiveRef ref = SelectRelease(manifest, "1.2.0", "amd64").value().archive.ref;
  const std::string file = releases() + "/expanse-daemon_1.2.0_linux_amd64.tar.gz";
  const std::string original = testing::ReadFile(file);
  const std::string dest = dir_ / "download.tar.gz";

  // Bytes of the published size that are not the published bytes: only the checksum tells.
  std::string other = testing::ReadFile(releases() + "/expanse-daemon_1.10.0_linux_amd64.tar.gz");
  ArchiveRef same_size = ref;
  testing::WriteFile(file, original.substr(0, 10) + std::string(original.size() - 10, 'x'));
  EXPECT_EQ(DownloadVerified(*client_, same_size, keys_.public_key_pem, dest).status().reason(),
            "archive_checksum_mismatch");
  testing::WriteFile(file, other);
  Status size = DownloadVerified(*client_, ref, keys_.public_key_pem, dest).status();
  if (other.size() != original.size())
    EXPECT_EQ(size.reason(), "archive_size_mismatch");
  else
    EXPECT_EQ(size.reason(), "archive_checksum_mismatch");
  EXPECT_FALSE(std::filesystem::exists(dest));

  testing::WriteFile(file, original);
  std::filesystem::remove(file + ".sig");
  EXPECT_EQ(DownloadVerified(*client_, ref, keys_.public_key_pem, dest).status().reason(),
            "archive_unsigned");
  crypto::SigningKeyPair other_key = crypto::GenerateSigningKey().value();
  testing::WriteFile(file + ".sig", crypto::SignBlob(other_key.private_key_pem, original).value());
  EXPECT_EQ(DownloadVerified(*client_, ref, keys_.public_key_pem, dest).status().reason(),
            "signature_mismatch");
  EXPECT_FALSE(std::filesystem::exists(dest));

  SignFile(file);
  EXPECT_TRUE(DownloadVerified(*client_, ref, keys_.public_key_pem, dest).ok());
  EXPECT_EQ(testing::ReadFile(dest), original);

  auto small = net::HttpClient::Create({});  // the default 1 MiB cap is fine here...
  ArchiveRef huge = ref;
  huge.size = 2 << 20;  // ...but not for an archive over it
  EXPECT_EQ(DownloadVerified(**small, huge, keys_.public_key_pem, dest).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(SelectReleaseTest, PicksVersionsAndArchitectures) {
  auto archive = [](const std::string& name, const std::string& arch) {
    return ManifestArchive{name, "linux", arch, {}};
  };
  Manifest manifest{{
      {"1.9.2", 0, {archive("expanse-daemon", "amd64")}, {}},
      {"1.10.0", 0, {archive("expanse-daemon", "amd64"), archive("expanse-daemon", "arm64")}, {}},
      {"1.11.0-rc.1", 0, {archive("expanse-daemon", "amd64")}, {}},
  }};
  EXPECT_EQ(SelectRelease(manifest, "", "amd64")->release.version, "1.10.0");
  EXPECT_EQ(SelectRelease(manifest, "latest", "amd64")->release.version, "1.10.0");
  EXPECT_EQ(SelectRelease(manifest, "1.11.0-rc.1", "amd64")->release.version, "1.11.0-rc.1");
  EXPECT_EQ(SelectRelease(manifest, "1.9.2", "amd64")->archive.arch, "amd64");
  Status missing = SelectRelease(manifest, "2.0.0", "amd64").status();
  EXPECT_EQ(missing.reason(), "release_not_found");
  EXPECT_THAT(missing.message(), HasSubstr("versions: 1.9.2, 1.10.0, 1.11.0-rc.1"));
  Status arch = SelectRelease(manifest, "1.9.2", "arm64").status();
  EXPECT_EQ(arch.reason(), "arch_not_released");
  EXPECT_THAT(arch.message(), HasSubstr("it has: linux/amd64"));
  EXPECT_EQ(SelectRelease(manifest, "", "riscv64").status().reason(), "release_not_found");
}

TEST(SelectCuptiVariantTest, NewestCompatibleOrPinnedOrNone) {
  std::vector<ManifestCupti> variants = {{"cuda1280", "amd64", "570.124.06", {}},
                                         {"cuda1300", "amd64", "580.65.06", {}},
                                         {"cuda1300", "arm64", "580.65.06", {}}};
  auto pick = [&](std::optional<std::string> driver, std::string pinned = "") {
    return SelectCuptiVariant(variants, "amd64", driver, pinned);
  };
  EXPECT_EQ(pick("580.159.04")->variant->variant, "cuda1300");  // 159 > 65 numerically
  EXPECT_EQ(pick("575.57.08")->variant->variant, "cuda1280");
  EXPECT_EQ(pick("570.124.06")->variant->variant, "cuda1280");  // equal to the minimum
  EXPECT_EQ(pick("580.95.05", "cuda1280")->variant->variant, "cuda1280");
  EXPECT_THAT(pick("580.95.05", "cuda1280")->explanation, HasSubstr("pinned"));

  Result<CuptiSelection> old = pick("535.104.05");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->variant.has_value());
  EXPECT_THAT(old->explanation, HasSubstr("none: NVIDIA driver 535.104.05 is older than every"));
  EXPECT_EQ(pick(std::nullopt)->explanation, "none: no NVIDIA driver found on this node");
  EXPECT_EQ(pick("")->explanation, "none: no NVIDIA driver found on this node");
  EXPECT_THAT(pick("N/A")->explanation, HasSubstr("none: NVIDIA driver version \"N/A\""));
  EXPECT_FALSE(pick(std::nullopt, "cuda1300")->variant.has_value());  // no driver: never blocks

  Status incompatible = pick("575.57.08", "cuda1300").status();
  EXPECT_EQ(incompatible.reason(), "cupti_variant_incompatible");
  EXPECT_EQ(incompatible.message(),
            "CUPTI variant cuda1300 needs NVIDIA driver >= 580.65.06, but this node has driver "
            "575.57.08");
  Status absent = pick("580.95.05", "cuda1100").status();
  EXPECT_EQ(absent.reason(), "cupti_variant_not_found");
  EXPECT_THAT(absent.message(), HasSubstr("\"cuda1100\""));
  EXPECT_THAT(absent.message(), HasSubstr("cuda1280 (driver >= 570.124.06), cuda1300"));
}

// A daemon release archive 1.2.0 of one stand-in binary (dir/staging/bin/expanse-daemon), unsigned.
std::string PackDaemonArchive(const testing::TempDir& dir) {
  testing::WriteFile(dir / "staging/bin/expanse-daemon",
                     "\x7f"
                     "ELF",
                     0755);
  return PackArchive({.name = "expanse-daemon",
                      .version = "1.2.0",
                      .files = FilesUnder(dir / "staging").value(),
                      .output_dir = dir.path()})
      .value();
}

TEST(InspectStagedBinaryTest, ArchivesNeedTheirSignatureBareBinariesAreUnverified) {
  testing::TempDir dir;
  crypto::SigningKeyPair keys = crypto::GenerateSigningKey().value();
  std::string archive = PackDaemonArchive(dir);
  Status unsigned_archive = InspectStagedBinary(archive, keys.public_key_pem).status();
  EXPECT_EQ(unsigned_archive.reason(), "archive_unsigned");
  EXPECT_THAT(unsigned_archive.message(), HasSubstr(archive + ".sig"));

  testing::WriteFile(archive + ".sig",
                     crypto::SignBlob(keys.private_key_pem, testing::ReadFile(archive)).value());
  Result<StagedBinary> staged = InspectStagedBinary(archive, keys.public_key_pem);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->kind, StagedBinary::Kind::kArchive);
  EXPECT_TRUE(staged->verified);
  EXPECT_EQ(staged->info->version, "1.2.0");
  EXPECT_EQ(InspectStagedBinary(archive, EmbeddedReleasePublicKey()).status().reason(),
            "signature_mismatch");

  Result<StagedBinary> bare = InspectStagedBinary(dir / "staging/bin/expanse-daemon", "");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->kind, StagedBinary::Kind::kBareBinary);
  EXPECT_FALSE(bare->verified);
  EXPECT_THAT(bare->message, HasSubstr("cannot be verified"));

  testing::WriteFile(dir / "notes.txt", "text", 0644);
  EXPECT_EQ(InspectStagedBinary(dir / "notes.txt", "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(InspectStagedBinary(dir / "missing", "").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(InspectStagedBinary(dir.path(), "").status().code(), StatusCode::kInvalidArgument);
}

// With a copy path, what is checked and returned is a private copy of the very bytes the
// signature covered: replacing the staged archive afterwards changes nothing that is installed.
TEST(InspectStagedBinaryTest, TheVerifiedBytesAreKeptInACopy) {
  testing::TempDir dir;
  crypto::SigningKeyPair keys = crypto::GenerateSigningKey().value();
  const std::string archive = PackDaemonArchive(dir);
  const std::string signed_bytes = testing::ReadFile(archive);
  testing::WriteFile(archive + ".sig",
                     crypto::SignBlob(keys.private_key_pem, signed_bytes).value());
  const std::string copy = dir / "private/daemon.tar.gz";
  std::filesystem::create_directories(dir / "private");
  Result<StagedBinary> staged = InspectStagedBinary(archive, keys.public_key_pem, copy);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(staged->path, copy);
  EXPECT_EQ(testing::ReadFile(copy), signed_bytes);
  struct stat st {};
  ASSERT_EQ(stat(copy.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  testing::WriteFile(archive, "replaced after the check", 0644);
  EXPECT_EQ(testing::ReadFile(staged->path), signed_bytes);
  EXPECT_THAT(staged->message, HasSubstr(archive + ": signature verified"));
}

}  // namespace
}  // namespace resolver_test
}  // namespace expanse::release
