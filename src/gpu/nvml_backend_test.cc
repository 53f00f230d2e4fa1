#include "gpu/nvml_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/fake_nvml_test_util.h"

namespace expanse::gpu {
namespace nvml_backend_test {
namespace {

using testing::FakeNvmlCallCount;
using testing::FakeNvmlPath;
using testing::FakeNvmlScenario;
using ::testing::HasSubstr;
using testing::TwoGpuScenario;

TEST(NvmlBackendTest, InventoryKeepsMinorNumbersApartFromIndices) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto inventory = (*backend)->ReadInventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->backend, "nvml");
  EXPECT_EQ(inventory->driver_version, "580.159.04");
  EXPECT_EQ(inventory->library_version, "13.580.159.04");
  ASSERT_EQ(inventory->gpus.size(), 2u);
  const GpuInfo& first = inventory->gpus[0];
  EXPECT_EQ(first.index, 0u);
  EXPECT_EQ(first.minor, 3u);
  EXPECT_EQ(first.uuid, "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0");
  EXPECT_EQ(first.pci_bus_id, "00000000:00:06.0");
  EXPECT_EQ(first.name, "NVIDIA H200");
  EXPECT_EQ(first.memory_total_mib, 143771u);
  EXPECT_EQ(inventory->gpus[1].index, 1u);
  EXPECT_EQ(inventory->gpus[1].minor, 0u);
  EXPECT_THAT((*backend)->library().loaded_path(), HasSubstr("fakes/nvml/libnvidia-ml.so.1"));
}

TEST(NvmlBackendTest, FastReadingsConvertUnits) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto readings = (*backend)->ReadFast();
  ASSERT_TRUE(readings.ok()) << readings.status();
  ASSERT_EQ(readings->size(), 2u);
  const GpuReading& r = (*readings)[0];
  EXPECT_EQ(r.uuid, "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0");
  EXPECT_EQ(r.sm_util, 100);
  EXPECT_EQ(r.mem_util, 24);
  EXPECT_EQ(r.mem_used_mib, 31859);
  EXPECT_DOUBLE_EQ(*r.power_w, 694.77);
  EXPECT_EQ(r.temp_c, 53);
  EXPECT_EQ(r.sm_clock_mhz, 1455);
  EXPECT_EQ(r.mem_clock_mhz, 3201);
  EXPECT_EQ(r.clock_event_reasons, 4u);
  EXPECT_EQ(r.ecc_corrected, 2u);
  EXPECT_EQ(r.ecc_uncorrected, 0u);
}

TEST(NvmlBackendTest, UnsupportedValuesAreAbsentAndNotAskedAgain) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  const int64_t before = FakeNvmlCallCount("nvml", "nvmlDeviceGetPowerUsage");
  for (int i = 0; i < 5; ++i) {
    auto readings = (*backend)->ReadFast();
    ASSERT_TRUE(readings.ok()) << readings.status();
    const GpuReading& second = (*readings)[1];
    EXPECT_FALSE(second.power_w.has_value());
    EXPECT_FALSE(second.ecc_corrected.has_value());
    EXPECT_TRUE(second.temp_c.has_value());
  }
  // Five rounds: the first GPU is asked every time, the second only once.
  EXPECT_EQ(FakeNvmlCallCount("nvml", "nvmlDeviceGetPowerUsage") - before, 6);
}

TEST(NvmlBackendTest, ProcessesWithAndWithoutMemory) {
  auto json = TwoGpuScenario();
  json["gpus"][1]["processes"] = {{{"pid", 4242}}};  // memory withheld by the driver
  FakeNvmlScenario scenario(json);
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto processes = (*backend)->ReadProcesses();
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 2u);
  EXPECT_EQ((*processes)[0].pid, 521u);
  EXPECT_EQ((*processes)[0].gpu_uuid, "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0");
  EXPECT_EQ((*processes)[0].used_memory_mib, 31850u);
  EXPECT_EQ((*processes)[1].pid, 4242u);
  EXPECT_EQ((*processes)[1].gpu_uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_FALSE((*processes)[1].used_memory_mib.has_value());
}

// Under MPS the driver lists the MPS server as the GPU's compute process and the jobs'
// processes as its clients, apart: both are the GPU's, each pid once.
TEST(NvmlBackendTest, MpsClientsAreListedWithTheServer) {
  auto json = TwoGpuScenario();
  json["gpus"][0]["processes"] = {{{"pid", 900}, {"used_memory_mib", 30}}};  // the MPS server
  json["gpus"][0]["mps_processes"] = {
      {{"pid", 901}, {"used_memory_mib", 2000}}, {{"pid", 902}}, {{"pid", 900}}};
  json["gpus"][1]["processes"] = nlohmann::json::array();
  FakeNvmlScenario scenario(json);
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto processes = (*backend)->ReadProcesses();
  ASSERT_TRUE(processes.ok()) << processes.status();
  std::vector<unsigned> pids;
  for (const GpuProcess& p : *processes) {
    EXPECT_EQ(p.gpu_uuid, "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0");
    pids.push_back(p.pid);
  }
  EXPECT_EQ(pids, (std::vector<unsigned>{900, 901, 902}));
  EXPECT_EQ((*processes)[1].used_memory_mib, 2000u);

  // A GPU that cannot list MPS clients (older than Volta) has none; its own list stands.
  json["gpus"][0]["unsupported"] = {"mps_processes"};
  scenario.Write(json);
  processes = (*backend)->ReadProcesses();
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 1u);
  EXPECT_EQ((*processes)[0].pid, 900u);
}

TEST(NvmlBackendTest, ManyProcessesGrowTheBuffer) {
  auto json = TwoGpuScenario();
  nlohmann::json many = nlohmann::json::array();
  for (int pid = 1000; pid < 1100; ++pid)
    many.push_back({{"pid", pid}, {"used_memory_mib", 1}});
  json["gpus"][0]["processes"] = many;
  FakeNvmlScenario scenario(json);
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto processes = (*backend)->ReadProcesses();
  ASSERT_TRUE(processes.ok()) << processes.status();
  EXPECT_EQ(processes->size(), 100u);
  EXPECT_EQ(processes->back().pid, 1099u);
}

TEST(NvmlBackendTest, SlowReadings) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto energy = (*backend)->ReadEnergy();
  ASSERT_TRUE(energy.ok()) << energy.status();
  ASSERT_EQ(energy->size(), 2u);
  EXPECT_EQ((*energy)[0].energy_mj, 123456789u);
  auto util = (*backend)->ReadProcessUtilization(0);
  ASSERT_TRUE(util.ok()) << util.status();
  // Only the first GPU has a process; the second answers NOT_FOUND, which means "none".
  ASSERT_EQ(util->size(), 1u);
  EXPECT_EQ((*util)[0].pid, 521u);
  EXPECT_EQ((*util)[0].sm_util, 98u);
  EXPECT_EQ((*util)[0].mem_util, 23u);
  EXPECT_GT((*util)[0].timestamp_us, 0u);
}

TEST(NvmlBackendTest, MissingLibraryIsNamed) {
  auto backend = NvmlBackend::Create("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().reason(), "nvml_not_found");
  EXPECT_THAT(backend.status().message(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
}

TEST(NvmlBackendTest, MissingRequiredSymbolIsRefused) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath("nvml-broken"));
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().reason(), "nvml_symbol_missing");
  EXPECT_THAT(backend.status().message(), HasSubstr("nvmlDeviceGetUtilizationRates"));
}

TEST(NvmlBackendTest, MissingOptionalSymbolsLeaveValuesEmpty) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath("nvml-minimal"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_THAT((*backend)->library().missing_optional(),
              ::testing::Contains("nvmlDeviceGetTotalEnergyConsumption"));
  auto inventory = (*backend)->ReadInventory();
  ASSERT_TRUE(inventory.ok());
  EXPECT_FALSE(inventory->gpus[0].minor.has_value());
  auto readings = (*backend)->ReadFast();
  ASSERT_TRUE(readings.ok()) << readings.status();
  EXPECT_EQ((*readings)[0].sm_util, 100);
  EXPECT_FALSE((*readings)[0].power_w.has_value());
  auto processes = (*backend)->ReadProcesses();
  EXPECT_EQ(processes.status().reason(), "nvml_symbol_missing");
  auto energy = (*backend)->ReadEnergy();
  ASSERT_TRUE(energy.ok());
  EXPECT_FALSE((*energy)[0].energy_mj.has_value());
}

TEST(NvmlBackendTest, InitFailureExplainsDriverState) {
  auto json = TwoGpuScenario();
  json["init_error"] = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  FakeNvmlScenario scenario(json);
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().reason(), "nvml_init_failed");
  EXPECT_THAT(backend.status().message(), HasSubstr("NVML_ERROR_DRIVER_NOT_LOADED"));
  EXPECT_THAT(backend.status().message(), HasSubstr("kernel module"));
}

TEST(NvmlBackendTest, OneLostGpuDoesNotHideTheOther) {
  FakeNvmlScenario scenario(TwoGpuScenario());
  auto backend = NvmlBackend::Create(FakeNvmlPath());
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto json = TwoGpuScenario();
  json["gpus"][1]["processes"] = {{{"pid", 777}}};
  json["gpus"][0]["error"] = 15;  // NVML_ERROR_GPU_IS_LOST
  scenario.Write(json);
  auto readings = (*backend)->ReadFast();
  ASSERT_TRUE(readings.ok()) << readings.status();
  EXPECT_FALSE((*readings)[0].sm_util.has_value());
  EXPECT_TRUE((*readings)[1].sm_util.has_value());
  // A lost GPU runs nothing: the other's processes are still listed.
  auto processes = (*backend)->ReadProcesses();
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 1u);
  EXPECT_EQ((*processes)[0].pid, 777u);
  // Any other failure to list a GPU's processes makes the node's listing unknown, not one GPU
  // shorter (which would say no job runs there).
  json["gpus"][0]["error"] = 999;  // NVML_ERROR_UNKNOWN
  scenario.Write(json);
  processes = (*backend)->ReadProcesses();
  ASSERT_FALSE(processes.ok());
  EXPECT_THAT(processes.status().message(), HasSubstr("nvmlDeviceGetComputeRunningProcesses"));

  json["gpus"][1]["error"] = 15;
  scenario.Write(json);
  readings = (*backend)->ReadFast();
  ASSERT_FALSE(readings.ok());
  EXPECT_EQ(readings.status().reason(), "gpu_lost");
  EXPECT_THAT(readings.status().message(), HasSubstr("NVML_ERROR_GPU_IS_LOST"));
}

}  // namespace
}  // namespace nvml_backend_test
}  // namespace expanse::gpu
