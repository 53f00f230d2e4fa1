// Test helpers for the attribution module: scratch directories standing in for /proc and
// /sys/fs/cgroup, and a small inventory whose minor numbers differ from its indices.
#ifndef EXPANSE_ATTRIBUTION_ATTRIBUTION_TEST_UTIL_H_
#define EXPANSE_ATTRIBUTION_ATTRIBUTION_TEST_UTIL_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/test_temp_dir.h"
#include "gpu/backend.h"

namespace expanse::attribution::testing {

using TempDir = ::expanse::testing::TempDir;

// Writes `contents` to `path`, creating the parent directories.
inline void WriteFile(const std::string& path, std::string_view contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(file.good()) << "cannot write " << path;
}

// The bytes of /proc/<pid>/environ: every entry followed by a NUL.
inline std::string Environ(std::initializer_list<std::string_view> entries) {
  std::string bytes;
  for (const std::string_view entry : entries) {
    bytes += entry;
    bytes += '\0';
  }
  return bytes;
}

// A fake /proc: <root>/<pid>/cgroup and <root>/<pid>/environ.
class FakeProc {
 public:
  const std::string& root() const { return dir_.path(); }
  void AddProcess(uint32_t pid, std::string_view cgroup, std::string_view environ) const {
    WriteFile(root() + "/" + std::to_string(pid) + "/cgroup", cgroup);
    WriteFile(root() + "/" + std::to_string(pid) + "/environ", environ);
  }

 private:
  TempDir dir_;
};

constexpr std::string_view kUuid0 = "GPU-00000000-aaaa-0000-0000-000000000000";
constexpr std::string_view kUuid1 = "GPU-11111111-bbbb-0000-0000-000000000001";
constexpr std::string_view kUuid2 = "GPU-22222222-cccc-0000-0000-000000000002";
constexpr std::string_view kUuid3 = "GPU-33333333-dddd-0000-0000-000000000003";

// Four GPUs whose /dev/nvidiaN minors run opposite to their NVML indices (index 0 has minor 3),
// as on a node where PCI order and driver probe order differ.
inline std::vector<gpu::GpuInfo> ReversedMinorInventory() {
  const std::string_view uuids[] = {kUuid0, kUuid1, kUuid2, kUuid3};
  std::vector<gpu::GpuInfo> inventory;
  for (uint32_t index = 0; index < 4; ++index) {
    gpu::GpuInfo info;
    info.index = index;
    info.minor = 3 - index;
    info.uuid = std::string(uuids[index]);
    info.pci_bus_id = "00000000:0" + std::to_string(index + 1) + ":00.0";
    info.name = "NVIDIA H200";
    inventory.push_back(info);
  }
  return inventory;
}

}  // namespace expanse::attribution::testing

#endif  // EXPANSE_ATTRIBUTION_ATTRIBUTION_TEST_UTIL_H_
