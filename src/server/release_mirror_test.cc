// The release mirror (GET /releases/<name>) of a real ServerApp on loopback: it serves the
// regular files directly inside --releases-dir and nothing else.
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/clock.h"
#include "server/routes.h"
#include "server/server_app.h"

namespace expanse::server {
namespace release_mirror_test {
namespace {

class ReleaseMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("expanse-mirror-test-" + std::to_string(getpid()) + "-" + info->name());
    releases_ = root_ / "releases";
    std::filesystem::create_directories(releases_ / "sub");
    Write(releases_ / "manifest.json", R"({"format":1,"releases":[]})");
    Write(releases_ / "expanse-daemon_1.2.0_linux_amd64.tar.gz", std::string("\x1f\x8b\0\xff", 4));
    Write(releases_ / "expanse-daemon_1.2.0_linux_amd64.tar.gz.sig", "MEUCIQ==\n");
    Write(releases_ / ".hidden", "dotfile");
    Write(releases_ / "sub" / "inner.json", "{}");
    Write(root_ / "secret.txt", "outside the mirror");
    std::filesystem::create_symlink(root_ / "secret.txt", releases_ / "link.txt");
    ASSERT_EQ(mkfifo((releases_ / "fifo").c_str(), 0644), 0);
    Start(releases_.string());
  }

  void TearDown() override {
    if (app_)
      app_->Stop();
    std::filesystem::remove_all(root_);
  }

  static void Write(const std::filesystem::path& path, const std::string& contents) {
    std::ofstream(path, std::ios::binary) << contents;
  }

  void Start(const std::string& releases_dir) {
    ServerOptions options;
    options.db_path = (root_ / "db.sqlite").string();
    options.control_listen = "127.0.0.1:0";
    options.releases_dir = releases_dir;
    auto app = ServerApp::Create(options, clock_);
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = std::move(*app);
    ASSERT_TRUE(app_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", app_->control_port());
  }

  httplib::Result Get(const std::string& path) { return client_->Get(path); }

  ManualClock clock_{1'800'000'000'000};
  std::filesystem::path root_, releases_;
  std::unique_ptr<ServerApp> app_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ReleaseMirrorTest, ServesFilesWithTheirContentType) {
  auto manifest = Get("/releases/manifest.json");
  ASSERT_TRUE(manifest);
  EXPECT_EQ(manifest->status, 200);
  EXPECT_EQ(manifest->body, R"({"format":1,"releases":[]})");
  EXPECT_EQ(manifest->get_header_value("Content-Type"), "application/json");

  auto archive = Get("/releases/expanse-daemon_1.2.0_linux_amd64.tar.gz");
  ASSERT_TRUE(archive);
  EXPECT_EQ(archive->status, 200);
  EXPECT_EQ(archive->body, std::string("\x1f\x8b\0\xff", 4));  // bytes as they are
  EXPECT_EQ(archive->get_header_value("Content-Type"), "application/octet-stream");

  auto signature = Get("/releases/expanse-daemon_1.2.0_linux_amd64.tar.gz.sig");
  ASSERT_TRUE(signature);
  EXPECT_EQ(signature->body, "MEUCIQ==\n");
  EXPECT_EQ(signature->get_header_value("Content-Type"), "application/octet-stream");
}

TEST_F(ReleaseMirrorTest, RefusesEverythingButRegularFilesDirectlyInTheDirectory) {
  for (const char* path : {"/releases/missing.json", "/releases/.hidden", "/releases/link.txt",
                           "/releases/fifo", "/releases/sub", "/releases/sub/inner.json",
                           "/releases/sub%2Finner.json", "/releases/..%2Fsecret.txt",
                           "/releases/%2E%2E", "/releases/a%20b", "/releases/", "/releases"}) {
    auto reply = Get(path);
    ASSERT_TRUE(reply) << path;
    EXPECT_EQ(reply->status, 404) << path;
    EXPECT_EQ(reply->body.find("outside the mirror"), std::string::npos) << path;
  }
}

TEST_F(ReleaseMirrorTest, FilesAddedLaterAreServed) {
  Write(releases_ / "expanse-cupti_1.2.0_cuda1300_linux_amd64.tar.gz", "new");
  auto reply = Get("/releases/expanse-cupti_1.2.0_cuda1300_linux_amd64.tar.gz");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "new");
}

TEST_F(ReleaseMirrorTest, NoMirrorWithoutReleasesDir) {
  app_->Stop();
  app_.reset();
  std::filesystem::remove(root_ / "db.sqlite");
  Start("");
  auto reply = Get("/releases/manifest.json");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 404);
}

TEST_F(ReleaseMirrorTest, AMissingReleasesDirIsAStartupError) {
  ServerOptions options;
  options.db_path = (root_ / "other.sqlite").string();
  options.control_listen = "127.0.0.1:0";
  options.releases_dir = (root_ / "nope").string();
  auto app = ServerApp::Create(options, clock_);
  ASSERT_FALSE(app.ok());
  EXPECT_NE(app.status().message().find("--releases-dir"), std::string::npos);
  options.releases_dir = (releases_ / "manifest.json").string();
  EXPECT_FALSE(ServerApp::Create(options, clock_).ok());
}

// GET /install: the CLI installer for this mirror, only once it has a signed CLI archive and
// the public key that signs it; the script names the server's public URL, the archive and
// carries the key.
TEST_F(ReleaseMirrorTest, ServesTheCliInstallerOnceTheMirrorHasACliAndItsKey) {
  app_->control().mutable_options().control_plane_url = "https://expanse.example:8443";
  auto none = Get("/install");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_NE(none->body.find("no_release_key"), std::string::npos) << none->body;

  const std::string key =
      "-----BEGIN PUBLIC KEY-----\n"
      "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEmjF7ae0cRW+8BZvtUwMGd/DdNhPz\n"
      "uPFY4Yh9WpxDxoKKJWH6jdMQjUzDMg0qDAx3gXCwHTbS50pytGpyxUbibw==\n"
      "-----END PUBLIC KEY-----\n";
  // A link is never followed, even to a real key.
  Write(root_ / "elsewhere.pub", key);
  std::filesystem::create_symlink(root_ / "elsewhere.pub", releases_ / "release.pub");
  EXPECT_EQ(Get("/install")->status, 404);
  std::filesystem::remove(releases_ / "release.pub");
  Write(releases_ / "release.pub", key);
  auto no_cli = Get("/install");
  EXPECT_EQ(no_cli->status, 404);
  EXPECT_NE(no_cli->body.find("no_cli_archive"), std::string::npos) << no_cli->body;

  Write(releases_ / "expanse_1.2.0_linux_amd64.tar.gz", "archive");
  Write(releases_ / "expanse_1.2.0_linux_amd64.tar.gz.sig", "MEUCIQ==\n");
  auto script = Get("/install");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/x-shellscript; charset=utf-8");
  EXPECT_EQ(script->body.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(script->body.find("amd64) file='expanse_1.2.0_linux_amd64.tar.gz'"), std::string::npos);
  EXPECT_NE(script->body.find("default_base='https://expanse.example:8443'"), std::string::npos);
  EXPECT_NE(script->body.find("uPFY4Yh9WpxDxoKKJWH6jdMQjUzDMg0qDAx3gXCwHTbS50pytGpyxUbibw=="),
            std::string::npos);
  EXPECT_EQ(CliInstallLineFor(releases_.string(), app_->control()),
            "curl -fsSL https://expanse.example:8443/install | sh");
}

}  // namespace
}  // namespace release_mirror_test
}  // namespace expanse::server
