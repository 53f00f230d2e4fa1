// Test-only: a fresh directory under $TMPDIR (or /tmp), removed with its contents
// when the object goes away.

#ifndef EXPANSE_HTTP_TEST_TEMP_DIR_H_
#define EXPANSE_HTTP_TEST_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace expanse::http {

class TestTempDir {
 public:
  TestTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/expanse_http_test.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    path_ = pattern;
  }
  TestTempDir(const TestTempDir&) = delete;
  TestTempDir& operator=(const TestTempDir&) = delete;
  ~TestTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_TEST_TEMP_DIR_H_
