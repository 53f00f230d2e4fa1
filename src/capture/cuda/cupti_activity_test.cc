// The agent's CUPTI half against the fake libcupti.so.13: loading by candidate, and decoding
// buffers of real CUPTI record layouts (NVIDIA's headers) into capture::Activity.
#include "capture/cuda/cupti_activity.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace expanse::capture {
namespace cupti_activity_test {
namespace {

const std::string kFakes = std::string(EXPANSE_FAKES_DIR) + "/cupti";

CuptiActivityApi Fake() {
  std::string error;
  auto api = LoadCuptiActivityApi({kFakes + "/libcupti.so.13"}, &error);
  EXPECT_TRUE(api) << error;
  return api ? *api : CuptiActivityApi{};
}

template <typename Record>
void Append(std::vector<uint8_t>& buffer, const Record& record) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&record);
  buffer.insert(buffer.end(), bytes, bytes + sizeof record);
}

std::vector<Activity> Decode(const std::vector<uint8_t>& records, int64_t offset_ns,
                             std::vector<std::string>* names) {
  const CuptiActivityApi api = Fake();
  std::vector<uint8_t> buffer(records);
  NvtxRanges nvtx;
  std::vector<Activity> out;
  DecodeActivityBuffer(api, buffer.data(), buffer.size(), offset_ns, nvtx, [&](const Activity& a) {
    out.push_back(a);
    names->push_back(std::string(a.name));  // a.name dies with the call
  });
  return out;
}

TEST(LoadCuptiActivityApi, NamesEveryCandidatesProblem) {
  std::string error;
  EXPECT_FALSE(
      LoadCuptiActivityApi({"/nonexistent/libcupti.so", kFakes + "/libcuda.so.1"}, &error));
  EXPECT_NE(error.find("/nonexistent/libcupti.so: "), std::string::npos) << error;
  EXPECT_NE(error.find("libcuda.so.1: missing cuptiActivityRegisterCallbacks"), std::string::npos)
      << error;
}

TEST(LoadCuptiActivityApi, TakesTheFirstThatWorks) {
  std::string error;
  const auto api =
      LoadCuptiActivityApi({"", "/nonexistent/x.so", kFakes + "/libcupti.so.13"}, &error);
  ASSERT_TRUE(api) << error;
  EXPECT_NE(api->path.find("libcupti.so.13"), std::string::npos);
  EXPECT_EQ(api->ResultName(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES),
            "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
}

TEST(LoadCuptiActivityApi, FindsTheDetachEntryPointsWhereTheLibraryHasThem) {
  const CuptiActivityApi api = Fake();
  EXPECT_TRUE(api.CanDetach());
  EXPECT_NE(api.SubscribeV2, nullptr);
}

TEST(LoadedLibcupti, NamesTheCopyThisProcessHasLoadedOfThatMajorOnly) {
  Fake();  // dlopens the fake libcupti.so.13 for good
  EXPECT_EQ(LoadedLibcupti("13"), kFakes + "/libcupti.so.13");
  EXPECT_EQ(LoadedLibcupti("12"), "");
  EXPECT_EQ(LoadedLibcupti("1"), "") << "libcupti.so.13 is not major 1";
}

TEST(DecodeActivityBuffer, KernelsCopiesSyncsAndNvtxRanges) {
  std::vector<uint8_t> records;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1000;
  k.end = 3000;
  k.deviceId = 1;
  k.streamId = 9;
  k.gridX = 64;
  k.blockX = 128;
  k.name = "gemm";
  Append(records, k);
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = 4096;
  m.start = 4000;
  m.end = 4500;
  Append(records, m);
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.start = 5000;
  s.end = 9000;
  Append(records, s);
  CUpti_ActivityMarker2 start{};
  start.kind = CUPTI_ACTIVITY_KIND_MARKER;
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.id = 5;
  start.name = "forward";
  start.timestamp = 10000;
  Append(records, start);
  CUpti_ActivityMarker2 orphan = start;  // an end whose start CUPTI never delivered
  orphan.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  orphan.id = 6;
  orphan.name = nullptr;
  Append(records, orphan);
  CUpti_ActivityMarker2 end = orphan;
  end.id = 5;
  end.timestamp = 15000;
  Append(records, end);

  std::vector<std::string> names;
  const std::vector<Activity> out = Decode(records, 1'000'000, &names);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].kind, ActivityKind::kKernel);
  EXPECT_EQ(out[0].start_ns, 1'001'000u);  // shifted to Unix time
  EXPECT_EQ(out[0].end_ns, 1'003'000u);
  EXPECT_EQ(out[0].device, 1u);
  EXPECT_EQ(out[0].stream, 9u);
  EXPECT_EQ(out[0].grid[0], 64);
  EXPECT_EQ(out[0].block[0], 128);
  EXPECT_EQ(names[0], "gemm");
  EXPECT_EQ(out[1].kind, ActivityKind::kMemcpy);
  EXPECT_EQ(out[1].detail, "dtoh");
  EXPECT_EQ(out[1].bytes, 4096u);
  EXPECT_EQ(out[2].kind, ActivityKind::kSync);
  EXPECT_EQ(out[2].detail, "stream");
  EXPECT_EQ(out[2].duration_ns(), 4000u);
  EXPECT_EQ(out[3].kind, ActivityKind::kNvtxRange);
  EXPECT_EQ(names[3], "forward");
  EXPECT_EQ(out[3].start_ns, 1'010'000u);
  EXPECT_EQ(out[3].end_ns, 1'015'000u);
}

TEST(DecodeActivityBuffer, AKernelWithoutANameIsStillCounted) {
  std::vector<uint8_t> records;
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  k.name = nullptr;
  Append(records, k);
  std::vector<std::string> names;
  const auto out = Decode(records, 0, &names);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(names[0], "");
}

TEST(NvtxRanges, ForgetsTheOldestBeyondItsBound) {
  NvtxRanges ranges;
  for (uint32_t id = 0; id < NvtxRanges::kMaxOpenRanges + 10; ++id)
    ranges.Start(id, "r", id);
  EXPECT_FALSE(ranges.End(0));
  EXPECT_FALSE(ranges.End(9));
  const auto last = ranges.End(NvtxRanges::kMaxOpenRanges + 9);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->first, "r");
  EXPECT_FALSE(ranges.End(NvtxRanges::kMaxOpenRanges + 9));  // closed once
}

}  // namespace
}  // namespace cupti_activity_test
}  // namespace expanse::capture
