#include "release/cupti_node.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/file_util.h"
#include "crypto/ecdsa.h"
#include "release/archive_pack.h"
#include "release/release_test_util.h"

namespace expanse::release {
namespace cupti_node_test {
namespace {

using testing::TempDir;
using testing::WriteFile;

class NodeCuptiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto keys = crypto::GenerateSigningKey();
    ASSERT_TRUE(keys.ok());
    keys_ = *keys;
    artifacts_ = prefix_.path() + "/" + kCuptiArtifactsDir;
    std::filesystem::create_directories(artifacts_);
    WriteFile(src_ / "helper", "#!/bin/sh\n", 0755);
    for (auto [variant, min_driver] :
         {std::pair{"cuda1280", "570.124.06"}, std::pair{"cuda1300", "580.65.06"}}) {
      PackOptions pack;
      pack.name = kCuptiPackage;
      pack.version = "1.0.0";
      pack.variant = variant;
      pack.min_driver = min_driver;
      pack.files = {{src_ / "helper", "bin/expanse-cupti-helper"}};
      pack.output_dir = artifacts_;
      auto path = PackArchive(pack);
      ASSERT_TRUE(path.ok()) << path.status();
      auto bytes = fs::ReadSmallFile(*path, 1 << 20);
      auto sig = crypto::SignBlob(keys_.private_key_pem, **bytes);
      ASSERT_TRUE(sig.ok());
      WriteFile(*path + ".sig", *sig);
    }
  }
  NodeCupti Ensure(std::optional<std::string> driver, std::string_view pinned = "") {
    return EnsureNodeCupti(prefix_.path(), "node1", driver, pinned, keys_.public_key_pem);
  }

  TempDir prefix_, src_;
  crypto::SigningKeyPair keys_;
  std::string artifacts_;
};

TEST_F(NodeCuptiTest, EachDriverGetsTheNewestBuildItSupports) {
  NodeCupti older = Ensure("575.51.03");
  EXPECT_EQ(older.variant, "cuda1280") << older.note;
  EXPECT_TRUE(older.changed);
  EXPECT_TRUE(std::filesystem::exists(older.dir + "/bin/expanse-cupti-helper"));

  NodeCupti newer = Ensure("580.95.05");  // the driver was upgraded
  EXPECT_EQ(newer.variant, "cuda1300") << newer.note;
  EXPECT_TRUE(newer.changed);
  auto info = fs::ReadSmallFile(newer.dir + "/release.json", 1 << 20);
  ASSERT_TRUE(info.ok() && *info);
  EXPECT_NE((**info).find("cuda1300"), std::string::npos);

  NodeCupti again = Ensure("580.95.05");
  EXPECT_FALSE(again.changed) << "the same build is not unpacked twice";
}

TEST_F(NodeCuptiTest, NoDriverMeansNoCuptiAndNoError) {
  NodeCupti none = Ensure(std::nullopt);
  EXPECT_EQ(none.variant, "");
  EXPECT_FALSE(none.note.empty());
  EXPECT_FALSE(std::filesystem::exists(prefix_.path() + "/" + kCuptiNodesDir + "/node1"));
}

TEST_F(NodeCuptiTest, APinnedVariantTheDriverCannotRunIsRefused) {
  NodeCupti pinned = Ensure("575.51.03", "cuda1300");
  EXPECT_EQ(pinned.variant, "");
  EXPECT_NE(pinned.note.find("cuda1300"), std::string::npos) << pinned.note;
}

TEST_F(NodeCuptiTest, ArchivesWithoutAValidSignatureAreNeverUsed) {
  for (const auto& entry : std::filesystem::directory_iterator(artifacts_)) {
    if (entry.path().string().ends_with(".sig"))
      WriteFile(entry.path(), "MEUCIQDtampered");
  }
  NodeCupti none = Ensure("580.95.05");
  EXPECT_EQ(none.variant, "");
  EXPECT_NE(none.note.find("no signed CUPTI archives"), std::string::npos) << none.note;
}

}  // namespace
}  // namespace cupti_node_test
}  // namespace expanse::release
