#include "capture/activity_window.h"

#include <gtest/gtest.h>

namespace expanse::capture {
namespace {

Activity Kernel(std::string_view name, uint64_t ns, uint32_t device = 0) {
  Activity a;
  a.kind = ActivityKind::kKernel;
  a.start_ns = 1000;
  a.end_ns = 1000 + ns;
  a.device = device;
  a.name = name;
  return a;
}

Activity Of(ActivityKind kind, std::string_view detail, uint64_t ns, uint64_t bytes = 0) {
  Activity a;
  a.kind = kind;
  a.start_ns = 5000;
  a.end_ns = 5000 + ns;
  a.detail = detail;
  a.name = detail;
  a.bytes = bytes;
  return a;
}

TEST(ActivityWindow, KernelsAreTotalledByNameLongestFirst) {
  ActivityWindow w(100);
  w.Add(Kernel("gemm", 700));
  w.Add(Kernel("relu", 100, 1));
  w.Add(Kernel("gemm", 300));
  const WindowSummary s = w.Close(10100);
  EXPECT_EQ(s.start_ms, 100u);
  EXPECT_EQ(s.end_ms, 10100u);
  EXPECT_EQ(s.kernel_count, 3u);
  EXPECT_EQ(s.kernel_ns, 1100u);
  ASSERT_EQ(s.top_kernels.size(), 2u);
  EXPECT_EQ(s.top_kernels[0].name, "gemm");
  EXPECT_EQ(s.top_kernels[0].count, 2u);
  EXPECT_EQ(s.top_kernels[0].ns, 1000u);
  EXPECT_EQ(s.top_kernels[1].name, "relu");
  EXPECT_EQ(s.devices, (std::set<uint32_t>{0, 1}));
  EXPECT_EQ(s.other_kernels.count, 0u);
}

TEST(ActivityWindow, KernelsBeyondTheTopAreSummedAsOther) {
  ActivityWindow w(0);
  for (size_t i = 0; i < kTopKernels + 5; ++i)
    w.Add(Kernel("k" + std::to_string(i), 1000 + i));
  const WindowSummary s = w.Close(1);
  ASSERT_EQ(s.top_kernels.size(), kTopKernels);
  EXPECT_EQ(s.top_kernels.front().name, "k" + std::to_string(kTopKernels + 4));
  EXPECT_EQ(s.other_kernels.count, 5u);
  EXPECT_EQ(s.other_kernels.ns, 1000u + 1001 + 1002 + 1003 + 1004);
}

TEST(ActivityWindow, DistinctNamesAreBounded) {
  ActivityWindow w(0);
  for (size_t i = 0; i < kMaxDistinctNames + 100; ++i)
    w.Add(Kernel("kernel_" + std::to_string(i), 1));
  const WindowSummary s = w.Close(1);
  EXPECT_EQ(s.kernel_count, kMaxDistinctNames + 100);
  uint64_t counted = s.other_kernels.count;
  for (const auto& k : s.top_kernels) {
    EXPECT_NE(k.name, kOtherName);
    counted += k.count;
  }
  EXPECT_EQ(counted, kMaxDistinctNames + 100);
}

TEST(ActivityWindow, CopiesMemsetsSyncsAndNvtx) {
  ActivityWindow w(0);
  w.Add(Of(ActivityKind::kMemcpy, "htod", 50, 4096));
  w.Add(Of(ActivityKind::kMemcpy, "htod", 50, 4096));
  w.Add(Of(ActivityKind::kMemcpy, "dtoh", 20, 100));
  w.Add(Of(ActivityKind::kMemset, "", 10, 64));
  w.Add(Of(ActivityKind::kSync, "device", 900));
  w.Add(Of(ActivityKind::kSync, "stream", 30));
  w.Add(Of(ActivityKind::kSync, "device", 100));
  w.Add(Of(ActivityKind::kNvtxRange, "forward", 400));
  w.Add(Of(ActivityKind::kNvtxRange, "backward", 800));
  w.Add(Of(ActivityKind::kNvtxMark, "epoch", 0));
  const WindowSummary s = w.Close(1);
  EXPECT_EQ(s.memcpy.at("htod").count, 2u);
  EXPECT_EQ(s.memcpy.at("htod").bytes, 8192u);
  EXPECT_EQ(s.memcpy.at("htod").ns, 100u);
  EXPECT_EQ(s.memcpy.at("dtoh").bytes, 100u);
  EXPECT_EQ(s.memset.count, 1u);
  EXPECT_EQ(s.memset.bytes, 64u);
  EXPECT_EQ(s.sync.at("device").count, 2u);
  EXPECT_EQ(s.sync.at("device").ns, 1000u);
  EXPECT_EQ(s.sync.at("stream").ns, 30u);
  ASSERT_EQ(s.nvtx_ranges.size(), 2u);
  EXPECT_EQ(s.nvtx_ranges[0].name, "backward");
  EXPECT_EQ(s.nvtx_marks, 1u);
  EXPECT_EQ(s.kernel_count, 0u);
}

TEST(ActivityWindow, CloseStartsAnEmptyWindowAtItsEnd) {
  ActivityWindow w(0);
  EXPECT_TRUE(w.empty());
  w.Add(Kernel("k", 5));
  w.AddDropped(3);
  EXPECT_FALSE(w.empty());
  const WindowSummary first = w.Close(10000);
  EXPECT_EQ(first.dropped_records, 3u);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.start_ms(), 10000u);
  const WindowSummary second = w.Close(20000);
  EXPECT_EQ(second.kernel_count, 0u);
  EXPECT_EQ(second.dropped_records, 0u);
  EXPECT_EQ(second.start_ms, 10000u);
}

TEST(ActivityWindow, ReversedTimestampsCountAsZeroLength) {
  ActivityWindow w(0);
  Activity a = Kernel("k", 0);
  a.start_ns = 2000;
  a.end_ns = 1000;
  w.Add(a);
  EXPECT_EQ(w.Close(1).kernel_ns, 0u);
}

TEST(ActivityWindow, AWholeWindowObservedIsReportedAsSeen) {
  ActivityWindow window(1000);
  window.Add(Kernel("k", 500));
  const WindowSummary s = window.Close(11000);
  EXPECT_EQ(s.observed_ms, 10000u);
  EXPECT_EQ(s.kernel_count, 1u);
  EXPECT_EQ(s.kernel_ns, 500u);
}

TEST(ActivityWindow, ASampledWindowIsScaledToTheWholeWindow) {
  ActivityWindow window(1000);
  window.AddUnobserved(7500);  // CUPTI recorded 2.5 s of 10
  for (int i = 0; i < 3; ++i)
    window.Add(Kernel("gemm", 1000));
  window.Add(Of(ActivityKind::kMemcpy, "htod", 200, 4096));
  window.Add(Of(ActivityKind::kSync, "stream", 300));
  window.AddDropped(7);
  const WindowSummary s = window.Close(11000);
  EXPECT_EQ(s.observed_ms, 2500u);
  EXPECT_EQ(s.kernel_count, 12u);
  EXPECT_EQ(s.kernel_ns, 12000u);
  ASSERT_EQ(s.top_kernels.size(), 1u);
  EXPECT_EQ(s.top_kernels[0].count, 12u);
  EXPECT_EQ(s.memcpy.at("htod").bytes, 16384u);
  EXPECT_EQ(s.memcpy.at("htod").count, 4u);
  EXPECT_EQ(s.sync.at("stream").ns, 1200u);
  EXPECT_EQ(s.dropped_records, 7u);  // a count of CUPTI's, not an estimate
  // The next window starts fully observed again.
  window.Add(Kernel("gemm", 1000));
  EXPECT_EQ(window.Close(12000).kernel_count, 1u);
}

TEST(ActivityWindow, NothingObservedIsNotScaled) {
  ActivityWindow window(0);
  window.AddUnobserved(50000);
  window.AddDropped(1);
  const WindowSummary s = window.Close(10000);
  EXPECT_EQ(s.observed_ms, 0u);
  EXPECT_EQ(s.dropped_records, 1u);
}

TEST(BoundedName, ControlCharactersAndBadUtf8BecomeQuestionMarks) {
  EXPECT_EQ(BoundedName("a\tb\xff"
                        "c\x7f"
                        "d\xc3\xa9"),
            "a?b?c?d\xc3\xa9");
  EXPECT_EQ(BoundedName("\xe2\x82"), "??");  // a truncated sequence
}

TEST(BoundedName, CutsLongNamesOnACharacterBoundary) {
  EXPECT_EQ(BoundedName("short"), "short");
  std::string name(kMaxNameBytes - 1, 'a');
  name += "\xc3\xa9tail";  // 'é' straddles the limit
  const std::string cut = BoundedName(name);
  EXPECT_EQ(cut, std::string(kMaxNameBytes - 1, 'a'));
  EXPECT_EQ(BoundedName(std::string(kMaxNameBytes + 10, 'x')).size(), kMaxNameBytes);
}

// The key a long name is looked up by is the one BoundedName makes of it, or finds none.
TEST(LongNameKey, IsBoundedNameWhereItTellsOne) {
  const std::string ascii = std::string(kMaxNameBytes + 200, 'k');
  const std::string a511 = std::string(kMaxNameBytes - 1, 'a');
  for (const std::string& name :
       {ascii, a511 + "\xc3\xa9tail",                              // 'é' straddles the limit
        std::string(kMaxNameBytes - 2, 'b') + "\xe2\x82\xactail",  // '€' straddles it
        a511 + "\xc3\x28tail",   // a bad sequence at the limit: '?' fits
        a511 + "\x80" + "tail",  // a lone continuation byte there
        "x\ty" + std::string(kMaxNameBytes, 'z')}) {
    // Keys are clean text, so only a clean key can find one.
    const std::string key(LongNameKey(name));
    if (!key.empty() && BoundedName(key) == key) {
      EXPECT_EQ(key, BoundedName(name)) << name.size();
    }
  }
  EXPECT_EQ(LongNameKey(ascii), std::string(kMaxNameBytes, 'k'));
  EXPECT_EQ(LongNameKey(a511 + "\xc3\xa9tail"), a511);
  EXPECT_EQ(LongNameKey("short"), "");
}

// Records of one long kernel count as one, however its name came (the first cleaned it, the
// rest are found by their first bytes).
TEST(ActivityWindow, ALongKernelNameIsOneKernel) {
  ActivityWindow window(0);
  const std::string name = std::string(kMaxNameBytes + 600, 'k');
  for (int i = 0; i < 3; ++i)
    window.Add(Kernel(name, 100));
  window.Add(Kernel(name.substr(0, kMaxNameBytes), 100));  // the same kernel, cut by someone
  const WindowSummary s = window.Close(10000);
  ASSERT_EQ(s.top_kernels.size(), 1u);
  EXPECT_EQ(s.top_kernels[0].count, 4u);
  EXPECT_EQ(s.top_kernels[0].name.size(), kMaxNameBytes);
}

}  // namespace
}  // namespace expanse::capture
