// Test-only: a real VictoriaMetrics single-node server from Debian's package
// (victoria-metrics), started for the tests of one binary and stopped when it exits. Its data
// lives in a fresh temporary directory; it listens on a free loopback port. Flags as
// docs/scaling.md asks of a site's store: one sample per series and timestamp
// (-dedup.minScrapeInterval=1ms), and queries see the newest samples (-search.latencyOffset=0s).
// Header-only, like store/pg_test_server.h; a failure to start throws, which fails the test
// (never a skip).
#ifndef EXPANSE_PROMSTORE_VM_TEST_SERVER_H_
#define EXPANSE_PROMSTORE_VM_TEST_SERVER_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "net/http_client.h"

extern char** environ;

namespace expanse::testing {

class VictoriaMetricsTestServer {
 public:
  static VictoriaMetricsTestServer& Shared() {
    static VictoriaMetricsTestServer server;
    return server;
  }

  // http://127.0.0.1:<port>
  const std::string& url() const { return url_; }

  // Makes every sample accepted so far visible to queries (VictoriaMetrics buffers the newest
  // for up to a second or so).
  void ForceFlush() {
    const auto answer = Get("/internal/force_flush");
    if (!answer.ok() || answer->status != 200)
      throw std::runtime_error("VictoriaMetrics test server: force_flush failed");
  }

  // SIGKILL and start again on the same data and port: what a crash and restart look like.
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }
  void Start() {
    const std::string listen = "-httpListenAddr=127.0.0.1:" + std::to_string(port_);
    const std::string data = "-storageDataPath=" + dir_ + "/data";
    const std::string log = dir_ + "/log";
    std::vector<std::string> args = {"victoria-metrics",
                                     data,
                                     listen,
                                     "-retentionPeriod=100y",
                                     "-dedup.minScrapeInterval=1ms",
                                     "-search.latencyOffset=0s",
                                     "-loggerLevel=ERROR"};
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    const int rc = posix_spawnp(&pid_, "victoria-metrics", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      throw std::runtime_error(
          "VictoriaMetrics test server: cannot run victoria-metrics (scripts/setup installs "
          "Debian's victoria-metrics package)");
    }
    for (int i = 0; i < 300; ++i) {
      const auto health = Get("/health");
      if (health.ok() && health->status == 200)
        return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("VictoriaMetrics test server exited at start; see " + log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("VictoriaMetrics test server did not answer /health; see " + log);
  }

  VictoriaMetricsTestServer(const VictoriaMetricsTestServer&) = delete;
  VictoriaMetricsTestServer& operator=(const VictoriaMetricsTestServer&) = delete;
  ~VictoriaMetricsTestServer() {
    Kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

 private:
  VictoriaMetricsTestServer() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/expanse-vm.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    dir_ = pattern;
    port_ = FreePort();
    url_ = "http://127.0.0.1:" + std::to_string(port_);
    auto client = net::HttpClient::Create(net::HttpClientOptions{});
    if (!client.ok())
      throw std::runtime_error("VictoriaMetrics test server: " + client.status().message());
    client_ = std::move(*client);
    Start();
  }

  Result<net::HttpResponse> Get(const std::string& path) {
    net::HttpRequest request;
    request.url = url_ + path;
    return client_->Send(request);
  }

  // A loopback port nothing listens on now (the kernel's pick for port 0).
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
      throw std::system_error(errno, std::generic_category(), "picking a free port");
    }
    ::close(fd);
    return ntohs(addr.sin_port);
  }

  std::string dir_, url_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<net::HttpClient> client_;
};

}  // namespace expanse::testing

#endif  // EXPANSE_PROMSTORE_VM_TEST_SERVER_H_
