#include "gpu/nvidia_smi_backend.h"

#include <sys/stat.h>

#include <chrono>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/nvidia_smi_test_util.h"

namespace expanse::gpu {
namespace nvidia_smi_backend_test {
namespace {

using ::testing::ElementsAre;
using testing::FixtureOutput;
using ::testing::IsEmpty;
using ::testing::Optional;
using testing::ReadFile;
using testing::WriteFile;

constexpr std::string_view kUuid = "GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0";
constexpr std::string_view kQueryArgs =
    "--query-gpu=index,uuid,name,pci.bus_id,driver_version,memory.total,memory.used,"
    "utilization.gpu,utilization.memory,temperature.gpu,power.draw,clocks.sm,clocks.mem,"
    "clocks_throttle_reasons.active,ecc.errors.uncorrected.volatile.total,"
    "ecc.errors.corrected.volatile.total --format=csv,noheader,nounits";
constexpr std::string_view kDriverFailure =
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.";

// A fake nvidia-smi in a scratch directory: a shell script that logs its arguments and answers
// from files the test writes (query.out, apps.out, pmon.out, xml.out). A test may replace the
// script's body to fail or hang instead.
class FakeNvidiaSmi {
 public:
  FakeNvidiaSmi() {
    WriteScript(
        "case \"$1\" in\n"
        "  --query-gpu=*) cat \"$dir/query.out\" ;;\n"
        "  --query-compute-apps=*) cat \"$dir/apps.out\" ;;\n"
        "  pmon) cat \"$dir/pmon.out\" ;;\n"
        "  -q) cat \"$dir/xml.out\" ;;\n"
        "  *) echo \"unexpected arguments: $*\" >&2; exit 2 ;;\n"
        "esac\n");
    // The busy capture, as the backend's --format=csv,noheader,nounits query would print it.
    Write(
        "query.out",
        testing::ToNoHeaderNoUnits(
            FixtureOutput("nvsmi_query_busy.csv"),
            {"index", "uuid", "name", "pci.bus_id", "driver_version", "memory.total", "memory.used",
             "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw",
             "clocks.current.sm", "clocks.current.memory", "clocks_event_reasons.active",
             "ecc.errors.uncorrected.volatile.total", "ecc.errors.corrected.volatile.total"}));
    Write("apps.out", testing::ToNoHeaderNoUnits(FixtureOutput("nvsmi_apps_busy.csv"),
                                                 {"pid", "gpu_uuid", "used_gpu_memory"}));
    Write("pmon.out", FixtureOutput("nvsmi_pmon_busy.txt"));
    Write("xml.out", FixtureOutput("nvsmi_q.xml"));
  }

  void WriteScript(const std::string& body) {
    const std::string path = bin_.path() + "/nvidia-smi";
    WriteFile(path,
              "#!/bin/sh\ndir='" + data_.path() + "'\necho \"$*\" >> \"$dir/args.log\"\n" + body);
    chmod(path.c_str(), 0755);
  }
  void Write(const std::string& name, std::string_view text) {
    WriteFile(data_.path() + "/" + name, text);
  }
  // One line per run: the arguments it got.
  std::string Calls() const { return ReadFile(data_.path() + "/args.log"); }
  std::string ProcRoot() const { return data_.path() + "/proc"; }

  NvidiaSmiOptions Options() const {
    NvidiaSmiOptions options;
    options.search_path = bin_.path();
    options.proc_root = ProcRoot();
    return options;
  }

 private:
  testing::TempDir bin_;
  testing::TempDir data_;
};

TEST(NvidiaSmiBackendTest, InventoryWithMinorFromProcfs) {
  FakeNvidiaSmi fake;
  WriteFile(fake.ProcRoot() + "/driver/nvidia/gpus/0000:00:06.0/information",
            "Bus Location: \t 0000:00:06.0\nDevice Minor: \t 5\n");
  NvidiaSmiBackend backend(fake.Options());
  EXPECT_EQ(backend.Name(), "nvidia-smi");
  const Result<Inventory> inventory = backend.ReadInventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->backend, "nvidia-smi");
  EXPECT_EQ(inventory->driver_version, "580.159.04");
  EXPECT_EQ(inventory->library_version, "");
  ASSERT_EQ(inventory->gpus.size(), 1u);
  const GpuInfo& gpu = inventory->gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.minor, Optional(5u));
  EXPECT_EQ(gpu.uuid, kUuid);
  EXPECT_EQ(gpu.pci_bus_id, "00000000:00:06.0");
  EXPECT_EQ(gpu.name, "NVIDIA H200");
  EXPECT_THAT(gpu.memory_total_mib, Optional(143771u));
  EXPECT_EQ(fake.Calls(), std::string(kQueryArgs) + "\n");  // procfs sufficed: no -q -x
}

TEST(NvidiaSmiBackendTest, InventoryFallsBackToXmlForMinors) {
  FakeNvidiaSmi fake;
  NvidiaSmiBackend backend(fake.Options());
  const Result<Inventory> inventory = backend.ReadInventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  ASSERT_EQ(inventory->gpus.size(), 1u);
  EXPECT_THAT(inventory->gpus[0].minor, Optional(0u));
  EXPECT_EQ(fake.Calls(), std::string(kQueryArgs) + "\n-q -x\n");

  NvidiaSmiOptions options = fake.Options();
  options.minor_from_xml = false;
  NvidiaSmiBackend no_xml(options);
  EXPECT_EQ(no_xml.ReadInventory()->gpus[0].minor, std::nullopt);
}

TEST(NvidiaSmiBackendTest, ReadFast) {
  FakeNvidiaSmi fake;
  NvidiaSmiBackend backend(fake.Options());
  const Result<std::vector<GpuReading>> readings = backend.ReadFast();
  ASSERT_TRUE(readings.ok()) << readings.status();
  ASSERT_EQ(readings->size(), 1u);
  const GpuReading& r = (*readings)[0];
  EXPECT_EQ(r.uuid, kUuid);
  EXPECT_THAT(r.sm_util, Optional(100.0));
  EXPECT_THAT(r.mem_util, Optional(24.0));
  EXPECT_THAT(r.mem_used_mib, Optional(31859.0));
  EXPECT_THAT(r.power_w, Optional(694.77));
  EXPECT_THAT(r.temp_c, Optional(53.0));
  EXPECT_THAT(r.sm_clock_mhz, Optional(1455.0));
  EXPECT_THAT(r.mem_clock_mhz, Optional(3201.0));
  EXPECT_THAT(r.clock_event_reasons, Optional(0x4u));
  EXPECT_THAT(r.ecc_corrected, Optional(0u));
  EXPECT_THAT(r.ecc_uncorrected, Optional(0u));
  EXPECT_EQ(fake.Calls(), std::string(kQueryArgs) + "\n");
}

TEST(NvidiaSmiBackendTest, ReadProcesses) {
  FakeNvidiaSmi fake;
  NvidiaSmiBackend backend(fake.Options());
  const Result<std::vector<GpuProcess>> processes = backend.ReadProcesses();
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 1u);
  EXPECT_EQ((*processes)[0].pid, 521u);
  EXPECT_EQ((*processes)[0].gpu_uuid, kUuid);
  EXPECT_THAT((*processes)[0].used_memory_mib, Optional(31850u));
  EXPECT_EQ(fake.Calls(),
            "--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits\n");

  fake.Write("apps.out", "No running processes found\n");
  EXPECT_THAT(backend.ReadProcesses().value(), IsEmpty());
  fake.Write("apps.out", "");
  EXPECT_THAT(backend.ReadProcesses().value(), IsEmpty());
}

TEST(NvidiaSmiBackendTest, ReadProcessUtilizationMapsIndexToUuid) {
  FakeNvidiaSmi fake;
  NvidiaSmiBackend backend(fake.Options());
  // No inventory yet: the unknown GPU index makes the backend ask for one.
  const Result<std::vector<ProcessUtilization>> util = backend.ReadProcessUtilization(0);
  ASSERT_TRUE(util.ok()) << util.status();
  ASSERT_EQ(util->size(), 1u);  // the fixture's two samples of pid 521: the newer one is kept
  EXPECT_EQ((*util)[0].pid, 521u);
  EXPECT_EQ((*util)[0].gpu_uuid, kUuid);
  EXPECT_EQ((*util)[0].sm_util, 99u);
  EXPECT_EQ((*util)[0].mem_util, 24u);
  EXPECT_EQ(fake.Calls(), "pmon -c 1 -s u\n" + std::string(kQueryArgs) + "\n");

  // Now the index is known: one call.
  ASSERT_TRUE(backend.ReadProcessUtilization(123).ok());
  EXPECT_EQ(fake.Calls(), "pmon -c 1 -s u\n" + std::string(kQueryArgs) + "\npmon -c 1 -s u\n");

  // A GPU index no inventory knows is left out.
  fake.Write("pmon.out", "# gpu pid type sm mem command\n    7  99  C  50  5  x\n");
  EXPECT_THAT(backend.ReadProcessUtilization(0).value(), IsEmpty());
}

TEST(NvidiaSmiBackendTest, EnergyIsUnsupported) {
  FakeNvidiaSmi fake;
  NvidiaSmiBackend backend(fake.Options());
  const Result<std::vector<SlowReading>> energy = backend.ReadEnergy();
  EXPECT_EQ(energy.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(energy.status().reason(), "unsupported");
  EXPECT_EQ(energy.status().message(),
            "nvidia-smi cannot report GPU energy: --query-gpu has no energy field (checked on "
            "driver 580.159.04); energy needs the NVML backend");
}

TEST(NvidiaSmiBackendTest, DriverFailure) {
  FakeNvidiaSmi fake;
  fake.WriteScript("echo \"" + std::string(kDriverFailure) + "\"\nexit 9\n");
  NvidiaSmiBackend backend(fake.Options());
  const Result<Inventory> inventory = backend.ReadInventory();
  EXPECT_EQ(inventory.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(inventory.status().reason(), "nvidia_smi_failed");
  EXPECT_EQ(inventory.status().message(),
            "nvidia-smi --query-gpu exited with status 9: \"" + std::string(kDriverFailure) + "\"");
  EXPECT_EQ(backend.ReadProcesses().status().message(),
            "nvidia-smi --query-compute-apps exited with status 9: \"" +
                std::string(kDriverFailure) + "\"");
}

TEST(NvidiaSmiBackendTest, FailureWithoutOutputAndSignals) {
  FakeNvidiaSmi fake;
  fake.WriteScript("echo 'only on stderr' >&2\nexit 1\n");
  NvidiaSmiBackend backend(fake.Options());
  EXPECT_EQ(backend.ReadFast().status().message(),
            "nvidia-smi --query-gpu exited with status 1: \"only on stderr\"");
  fake.WriteScript("kill -SEGV $$\n");
  EXPECT_EQ(backend.ReadFast().status().message(), "nvidia-smi --query-gpu killed by signal 11");
}

TEST(NvidiaSmiBackendTest, HungCommandTimesOut) {
  FakeNvidiaSmi fake;
  fake.WriteScript("sleep 100 & sleep 100\n");
  NvidiaSmiOptions options = fake.Options();
  options.timeout = std::chrono::milliseconds(200);
  NvidiaSmiBackend backend(options);
  const Result<std::vector<GpuReading>> readings = backend.ReadFast();
  EXPECT_EQ(readings.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(readings.status().reason(), "nvidia_smi_timeout");
  EXPECT_EQ(readings.status().message(),
            "nvidia-smi --query-gpu: no answer within 200 ms, killed (is the driver hung?)");
}

TEST(NvidiaSmiBackendTest, UnparsableOutput) {
  FakeNvidiaSmi fake;
  fake.Write("query.out", "garbage\n");
  NvidiaSmiBackend backend(fake.Options());
  const Result<Inventory> inventory = backend.ReadInventory();
  EXPECT_EQ(inventory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(inventory.status().reason(), "nvidia_smi_output");
  EXPECT_EQ(inventory.status().message(), "nvidia-smi line 1: expected 16 columns, got 1");
}

TEST(NvidiaSmiBackendTest, MissingProgram) {
  const testing::TempDir empty;
  NvidiaSmiOptions options;
  options.search_path = empty.path();
  NvidiaSmiBackend backend(options);
  const Result<Inventory> inventory = backend.ReadInventory();
  EXPECT_EQ(inventory.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(inventory.status().reason(), "not_found");
  EXPECT_EQ(inventory.status().message(), "nvidia-smi: not found");

  options.program = empty.path() + "/nvidia-smi";
  NvidiaSmiBackend by_path(options);
  EXPECT_EQ(by_path.ReadFast().status().message(), options.program + ": not found");
}

}  // namespace
}  // namespace nvidia_smi_backend_test
}  // namespace expanse::gpu
