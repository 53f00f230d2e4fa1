#include "attribution/cuda_visible_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace expanse::attribution {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(CudaVisibleDevicesTest, Indices) {
  const CudaVisibleDevices devices = ParseCudaVisibleDevices("0, 1,3").value();
  EXPECT_THAT(devices.indices, ElementsAre(0u, 1u, 3u));
  EXPECT_THAT(devices.uuids, IsEmpty());
}

TEST(CudaVisibleDevicesTest, Uuids) {
  EXPECT_THAT(
      ParseCudaVisibleDevices("GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0,GPU-8932").value().uuids,
      ElementsAre("GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0", "GPU-8932"));
  EXPECT_THAT(ParseCudaVisibleDevices("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f").value().uuids,
              ElementsAre("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"));
  EXPECT_THAT(
      ParseCudaVisibleDevices("MIG-GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0/1/0").value().uuids,
      ElementsAre("MIG-GPU-7271b7f6-6341-8c0b-275d-7cfdc47af3b0/1/0"));
}

TEST(CudaVisibleDevicesTest, EmptyShowsNothing) {
  const CudaVisibleDevices devices = ParseCudaVisibleDevices("").value();
  EXPECT_THAT(devices.indices, IsEmpty());
  EXPECT_THAT(devices.uuids, IsEmpty());
}

TEST(CudaVisibleDevicesTest, Errors) {
  EXPECT_EQ(ParseCudaVisibleDevices("NoDevFiles").status().reason(), "no_device_files");
  EXPECT_EQ(ParseCudaVisibleDevices("0,GPU-abc").status().message(),
            "CUDA_VISIBLE_DEVICES=\"0,GPU-abc\": mixes indices and UUIDs");
  EXPECT_EQ(ParseCudaVisibleDevices("0,,1").status().message(),
            "CUDA_VISIBLE_DEVICES=\"0,,1\": empty entry");
  EXPECT_EQ(ParseCudaVisibleDevices("cuda0").status().message(),
            "CUDA_VISIBLE_DEVICES=\"cuda0\": entry \"cuda0\" is neither an index nor a UUID");
  EXPECT_EQ(ParseCudaVisibleDevices("-1").status().reason(), "cuda_visible_devices_malformed");
}

}  // namespace
}  // namespace expanse::attribution
