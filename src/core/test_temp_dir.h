// Test-only: a fresh directory under $TMPDIR (or /tmp), removed with everything in it when the
// object goes away. Header-only so that any module's tests can use it without linking more.
#ifndef EXPANSE_CORE_TEST_TEMP_DIR_H_
#define EXPANSE_CORE_TEST_TEMP_DIR_H_

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace expanse::testing {

class TempDir {
 public:
  // The directory is named "<prefix>.XXXXXX". Failing to make it throws, which GoogleTest
  // reports as a failure of the test that wanted it (an abort would hide which one).
  explicit TempDir(std::string_view prefix = "expanse_test") {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" +
                          std::string(prefix) + ".XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  const std::string& path() const { return path_; }

  // path()/name, without touching the disk.
  std::string operator/(std::string_view name) const { return path_ + "/" + std::string(name); }

  // Writes path()/name (making missing directories) with permissions `mode`; returns its path.
  std::string Write(std::string_view name, std::string_view contents,
                    std::filesystem::perms mode = std::filesystem::perms::owner_read |
                                                  std::filesystem::perms::owner_write) const {
    const std::filesystem::path file = std::filesystem::path(path_) / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out)
      throw std::system_error(EIO, std::generic_category(), "write " + file.string());
    std::filesystem::permissions(file, mode);
    return file.string();
  }

 private:
  std::string path_;
};

}  // namespace expanse::testing

#endif  // EXPANSE_CORE_TEST_TEMP_DIR_H_
