// SqliteStore as a JobStore: the capture agent's window aggregates, on SQLite and PostgreSQL.
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/sqlite_store_test_util.h"

namespace expanse::store {
namespace sqlite_store_capture_test {
namespace {

using store_testing::BackingName;
using store_testing::kBackings;
using store_testing::kNow;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kWindow = 10'000;

CaptureWindow Window(int64_t pid, int64_t index, const std::string& doc = R"({"k":1})",
                     const std::string& host = "gpu01") {
  CaptureWindow w;
  w.compute_id = "cmp_a";
  w.job_id = "7";
  w.host = host;
  w.pid = pid;
  w.window_start_ms = kNow + index * kWindow;
  w.window_end_ms = w.window_start_ms + kWindow;
  w.doc = doc;
  return w;
}

constexpr size_t kAnyBytes = std::numeric_limits<size_t>::max();

class CaptureWindowsTest : public store_testing::SqliteStoreTest {
 protected:
  void SetUp() override {
    SqliteStoreTest::SetUp();
    MakeCompute("cmp_a");
  }
  JobStore& jobs() { return store().Jobs(); }
  // "host/pid@index=doc" of each window returned, in order.
  std::vector<std::string> Windows(int64_t from_ms = 0, int64_t to_ms = 0, int limit = 100) {
    const auto windows = jobs().JobCaptureWindows("cmp_a", "7", from_ms, to_ms, limit, kAnyBytes);
    EXPECT_TRUE(windows.ok()) << windows.status();
    std::vector<std::string> out;
    for (const CaptureWindow& w : windows.ok() ? *windows : std::vector<CaptureWindow>{})
      out.push_back(w.host + "/" + std::to_string(w.pid) + "@" +
                    std::to_string((w.window_start_ms - kNow) / kWindow) + "=" + w.doc);
    return out;
  }
};

INSTANTIATE_TEST_SUITE_P(Backings, CaptureWindowsTest, kBackings, BackingName);

TEST_P(CaptureWindowsTest, WindowsComeBackOldestFirstAndARepeatReplaces) {
  ASSERT_TRUE(jobs().PutCaptureWindows({Window(20, 1), Window(10, 1), Window(10, 0)}).ok());
  ASSERT_TRUE(jobs().PutCaptureWindows({Window(10, 1, R"({"k":2})")}).ok());  // redelivered
  CaptureWindow other = Window(10, 0, R"({"other":1})", "gpu02");
  other.job_id = "8";
  ASSERT_TRUE(jobs().PutCaptureWindows({other}).ok());
  EXPECT_THAT(Windows(),
              ElementsAre("gpu01/10@0={\"k\":1}", "gpu01/10@1={\"k\":2}", "gpu01/20@1={\"k\":1}"));
  // Windows overlapping [from, to); a limit keeps the oldest.
  EXPECT_THAT(Windows(kNow + kWindow, 0),
              ElementsAre("gpu01/10@1={\"k\":2}", "gpu01/20@1={\"k\":1}"));
  EXPECT_THAT(Windows(0, kNow + kWindow), ElementsAre("gpu01/10@0={\"k\":1}"));
  EXPECT_THAT(Windows(0, 0, 1), ElementsAre("gpu01/10@0={\"k\":1}"));
  EXPECT_THAT(*jobs().JobCaptureWindows("cmp_a", "9", 0, 0, 10, kAnyBytes), IsEmpty());
}

// A reader bounds the bytes it reads: the window that passes the bound is the last one.
TEST_P(CaptureWindowsTest, ReadingStopsAfterTheWindowThatPassesTheByteBound) {
  ASSERT_TRUE(jobs().PutCaptureWindows({Window(10, 0), Window(10, 1), Window(10, 2)}).ok());
  const size_t doc = std::string(R"({"k":1})").size();
  for (const auto& [bound, expected] : std::vector<std::pair<size_t, size_t>>{
           {0, 1}, {doc - 1, 1}, {doc, 2}, {2 * doc, 3}, {3 * doc, 3}}) {
    const auto windows = jobs().JobCaptureWindows("cmp_a", "7", 0, 0, 10, bound);
    ASSERT_TRUE(windows.ok()) << windows.status();
    EXPECT_EQ(windows->size(), expected) << "bound " << bound;
  }
}

// Read in pages (PostgreSQL hands a statement's whole result over at once): every window
// once, in order, across page ends that fall between two processes of one window start.
TEST_P(CaptureWindowsTest, ManyWindowsAreReadInOrderAcrossPages) {
  std::vector<CaptureWindow> windows;
  for (int64_t index = 0; index < 401; ++index) {
    for (const int64_t pid : {30, 10, 20})
      windows.push_back(Window(pid, index));
  }
  ASSERT_TRUE(jobs().PutCaptureWindows(windows).ok());
  const auto read = jobs().JobCaptureWindows("cmp_a", "7", 0, 0, 1100, kAnyBytes);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1100u);
  for (size_t i = 0; i < read->size(); ++i) {
    ASSERT_EQ((*read)[i].window_start_ms, kNow + static_cast<int64_t>(i / 3) * kWindow) << i;
    ASSERT_EQ((*read)[i].pid, 10 + 10 * static_cast<int64_t>(i % 3)) << i;
  }
  EXPECT_EQ(jobs().JobCaptureWindows("cmp_a", "7", 0, 0, 5000, kAnyBytes)->size(), 1203u);
}

TEST_P(CaptureWindowsTest, BadWindowsAreRefusedAndNothingOfTheCallIsStored) {
  CaptureWindow bad = Window(10, 0);
  bad.window_end_ms = bad.window_start_ms;
  EXPECT_EQ(jobs().PutCaptureWindows({Window(11, 0), bad}).code(), StatusCode::kInvalidArgument);
  bad = Window(0, 0);
  EXPECT_EQ(jobs().PutCaptureWindows({bad}).code(), StatusCode::kInvalidArgument);
  bad = Window(10, 0, std::string(kMaxCaptureWindowBytes + 1, 'x'));
  EXPECT_EQ(jobs().PutCaptureWindows({bad}).code(), StatusCode::kInvalidArgument);
  bad = Window(10, 0, "");
  EXPECT_EQ(jobs().PutCaptureWindows({bad}).code(), StatusCode::kInvalidArgument);
  bad = Window(10, 0);
  bad.compute_id = "cmp_zz";
  EXPECT_EQ(jobs().PutCaptureWindows({Window(12, 0), bad}),
            NotFoundError("compute cmp_zz not found"));
  EXPECT_THAT(Windows(), IsEmpty());
  EXPECT_EQ(jobs().JobCaptureWindows("cmp_a", "7", 0, 0, 0, kAnyBytes).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs().JobCaptureWindows("cmp_zz", "7", 0, 0, 10, kAnyBytes).status(),
            NotFoundError("compute cmp_zz not found"));
}

TEST_P(CaptureWindowsTest, TextIsStoredVerbatim) {
  CaptureWindow w = Window(10, 0, R"({"name":"'; DROP TABLE capture_windows;--","é":"\u0000"})");
  w.job_id = "7'; --";
  ASSERT_TRUE(jobs().PutCaptureWindows({w}).ok());
  const auto back = jobs().JobCaptureWindows("cmp_a", w.job_id, 0, 0, 10, kAnyBytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].doc, w.doc);
}

}  // namespace
}  // namespace sqlite_store_capture_test
}  // namespace expanse::store
