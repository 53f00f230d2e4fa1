#include "release/cupti_node.h"

#include <sys/stat.h>
#include <unistd.h>

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
         {std::pair{"cuda1280", "570.124.06"}, std::pair{"cuda1300", "580.65.06"}})
      ASSERT_NO_FATAL_FAILURE(Stage("1.0.0", variant, min_driver));
  }
  NodeCupti Ensure(std::optional<std::string> driver, std::string_view pinned = "") {
    return EnsureNodeCupti(prefix_.path(), "node1", driver, pinned, keys_.public_key_pem);
  }
  // Packs and signs a CUPTI archive of `version` for `variant` into the artifacts.
  void Stage(const std::string& version, const std::string& variant,
             const std::string& min_driver) {
    PackOptions pack;
    pack.name = kCuptiPackage;
    pack.version = version;
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

// The note of each choice is left in the node's directory, for its sampler's cupti capability:
// why there is no build, or which build it is.
std::string NoteOf(const std::string& prefix) {
  auto note = fs::ReadSmallFile(prefix + "/" + kCuptiNodesDir + "/node1/" + kNodeCuptiNoteName,
                                kMaxNodeCuptiNoteBytes);
  return note.ok() && *note ? **note : "(none)";
}

TEST_F(NodeCuptiTest, NoDriverMeansNoCuptiAndNoError) {
  NodeCupti none = Ensure(std::nullopt);
  EXPECT_EQ(none.variant, "");
  EXPECT_FALSE(none.note.empty());
  const std::string dir = prefix_.path() + "/" + kCuptiNodesDir + "/node1";
  EXPECT_FALSE(std::filesystem::exists(dir + "/bin"));
  EXPECT_EQ(NoteOf(prefix_.path()), none.note + "\n");
  EXPECT_NE(none.note.find("no NVIDIA driver found"), std::string::npos) << none.note;
  // As the sampler's capability reads it, for the helper it would run.
  EXPECT_EQ(NodeCuptiNoteFor(dir + "/bin/expanse-cupti-helper"), none.note);
  EXPECT_EQ(NodeCuptiNoteFor(dir + "/expanse-cupti-helper"), "") << "not the installed layout";

  NodeCupti some = Ensure("580.95.05");  // a driver installed since
  EXPECT_EQ(some.variant, "cuda1300") << some.note;
  EXPECT_TRUE(std::filesystem::exists(dir + "/bin/expanse-cupti-helper"));
  EXPECT_EQ(NoteOf(prefix_.path()), some.note + "\n");
  NodeCupti again = Ensure("580.95.05");
  EXPECT_FALSE(again.changed) << "the note does not make the build look different";
  EXPECT_EQ(NoteOf(prefix_.path()), again.note + "\n");
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

// Prologs (as root) take the key the controller's install left beside the archives only when
// nobody but root could have put it there: whoever could replace it could sign archives of
// their own, unpacked into every node and injected into every job.
TEST_F(NodeCuptiTest, TheKeyBesideTheArchivesIsTrustedOnlyWhenRootsAlone) {
  ASSERT_EQ(geteuid(), 0u) << "ownership checks need root, as Prologs run";
  WriteFile(artifacts_ + "/" + kArtifactsKeyName, keys_.public_key_pem, 0644);
  NodeCupti trusted = EnsureNodeCupti(prefix_.path(), "node1", "580.95.05", "", "");
  EXPECT_EQ(trusted.variant, "cuda1300") << trusted.note;

  std::filesystem::permissions(artifacts_, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::add);
  NodeCupti refused = EnsureNodeCupti(prefix_.path(), "node2", "580.95.05", "", "");
  EXPECT_EQ(refused.variant, "") << "the embedded key verifies none of these archives";
  EXPECT_NE(refused.note.find("key beside the archives is ignored"), std::string::npos)
      << refused.note;
  EXPECT_FALSE(std::filesystem::exists(prefix_.path() + "/" + kCuptiNodesDir + "/node2/bin"));
}

// A FIFO for a signature (or an archive) on the mount is refused at once: reading it would hang
// every Prolog that starts a sampler.
TEST_F(NodeCuptiTest, AFifoOnTheMountIsRefusedNotWaitedOn) {
  for (const auto& entry : std::filesystem::directory_iterator(artifacts_)) {
    const std::string path = entry.path().string();
    if (path.find("cuda1300") != std::string::npos && path.ends_with(".sig")) {
      std::filesystem::remove(path);
      ASSERT_EQ(mkfifo(path.c_str(), 0644), 0) << path;
    }
  }
  NodeCupti other = Ensure("580.95.05");
  EXPECT_EQ(other.variant, "cuda1280") << other.note;
}

// An older release's archives left beside the newer ones: each variant's newest is used (by
// version, not by name: 1.10.0 after 1.9.0), with its own driver minimum.
TEST_F(NodeCuptiTest, EachVariantsNewestArchiveIsUsed) {
  ASSERT_NO_FATAL_FAILURE(Stage("1.9.0", "cuda1300", "580.65.06"));
  ASSERT_NO_FATAL_FAILURE(Stage("1.10.0", "cuda1300", "580.95.05"));
  NodeCupti newest = Ensure("580.95.05");
  EXPECT_EQ(newest.variant, "cuda1300") << newest.note;
  auto info = fs::ReadSmallFile(newest.dir + "/release.json", 1 << 20);
  ASSERT_TRUE(info.ok() && *info);
  EXPECT_NE((**info).find("\"1.10.0\""), std::string::npos) << **info;
  // A driver too old for 1.10.0's cuda1300 is not given it on 1.9.0's minimum.
  NodeCupti older = EnsureNodeCupti(prefix_.path(), "node2", "580.76.05", "", keys_.public_key_pem);
  EXPECT_EQ(older.variant, "cuda1280") << older.note;
}

}  // namespace
}  // namespace cupti_node_test
}  // namespace expanse::release
