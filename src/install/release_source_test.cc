#include "install/release_source.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/file_util.h"
#include "crypto/ecdsa.h"
#include "release/archive_pack.h"
#include "release/manifest.h"
#include "release/release_test_util.h"

namespace expanse::install {
namespace release_source_test {
namespace {

using release::testing::TempDir;
using release::testing::WriteFile;

class StagedReleaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto keys = crypto::GenerateSigningKey();
    ASSERT_TRUE(keys.ok());
    keys_ = *keys;
    WriteFile(src_.path() + "/expanse-daemon", "#!/bin/sh\n", 0755);
    WriteFile(staged_.path() + "/release.pub", keys_.public_key_pem);
  }
  // Packs and signs an archive into the staged directory; returns its path.
  std::string Stage(const std::string& name, const std::string& version,
                    const std::string& variant = "") {
    release::PackOptions pack;
    pack.name = name;
    pack.version = version;
    pack.variant = variant;
    pack.min_driver = variant.empty() ? "" : "570.124.06";
    pack.files = {{src_.path() + "/expanse-daemon",
                   variant.empty() ? "bin/expanse-daemon" : "bin/expanse-cupti-helper"}};
    pack.output_dir = staged_.path();
    auto path = release::PackArchive(pack);
    EXPECT_TRUE(path.ok()) << path.status();
    auto bytes = fs::ReadSmallFile(*path, 1 << 20);
    auto sig = crypto::SignBlob(keys_.private_key_pem, **bytes);
    EXPECT_TRUE(sig.ok());
    WriteFile(*path + ".sig", *sig);
    return *path;
  }

  TempDir src_, staged_, scratch_;
  crypto::SigningKeyPair keys_;
};

// The CUPTI archives staged beside a --daemon-binary archive: only the daemon's own release's,
// and installed from copies of the bytes verified (with their signatures) in the private
// staging directory, never from the operator's directory again.
TEST_F(StagedReleaseTest, OnlyTheReleasesOwnCuptiArchivesAreTakenFromVerifiedCopies) {
  InstallOptions o;
  o.daemon_binary = Stage("expanse", "1.2.0");
  o.cosign_key = staged_.path() + "/release.pub";
  const std::string own = Stage(std::string(release::kCuptiPackage), "1.2.0", "cuda1300");
  Stage(std::string(release::kCuptiPackage), "1.1.0", "cuda1280");  // an older release's
  std::vector<std::string> log;
  const std::string staging = scratch_.path() + "/staging";
  Result<ResolvedRelease> resolved =
      ResolveRelease(o, staging, "", [&](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->version, "1.2.0");
  ASSERT_EQ(resolved->cupti_archives.size(), 1u);
  const std::string& taken = resolved->cupti_archives[0];
  EXPECT_EQ(std::filesystem::path(taken).parent_path(), staging);
  EXPECT_EQ(std::filesystem::path(taken).filename(), std::filesystem::path(own).filename());
  EXPECT_EQ(release::testing::ReadFile(taken), release::testing::ReadFile(own));
  EXPECT_EQ(release::testing::ReadFile(taken + ".sig"), release::testing::ReadFile(own + ".sig"));
  std::string said;
  for (const std::string& line : log)
    said += line + "\n";
  EXPECT_NE(said.find("1.1.0, not"), std::string::npos) << said;
}

}  // namespace
}  // namespace release_source_test
}  // namespace expanse::install
