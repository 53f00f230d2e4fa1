// Test-only: a temporary directory, a log that collects lines, and file surgery that stands in
// for crashes and disk damage.
#ifndef EXPANSE_OUTBOX_OUTBOX_TEST_UTIL_H_
#define EXPANSE_OUTBOX_OUTBOX_TEST_UTIL_H_

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"

namespace expanse::outbox::testing {

using TempDir = ::expanse::testing::TempDir;

// Collects log lines; safe to call from any thread.
class LogLines {
 public:
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    };
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  std::string joined() {
    std::string all;
    for (const std::string& line : lines())
      all += line + "\n";
    return all;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// The segment files in `directory`, sorted by name (= by first sequence).
inline std::vector<std::string> SegmentFiles(const std::string& directory) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("seg-") && name.ends_with(".log"))
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace expanse::outbox::testing

#endif  // EXPANSE_OUTBOX_OUTBOX_TEST_UTIL_H_
