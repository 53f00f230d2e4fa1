// Golden output: the real server's answers, recorded in tests/fixtures/report/ (see
// report_client_test.cc), rendered for the terminal and as --json and compared byte for byte
// with the expected files beside them. EXPANSE_UPDATE_GOLDEN=1 rewrites the expected files
// (then read the diff before committing it).
#include "report/report_render.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "report/report_decode.h"

namespace expanse::report {
namespace report_render_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDir = std::string(EXPANSE_SOURCE_DIR) + "/tests/fixtures/report/";
// The recorded answers' server clock (report_test_server.h): kStart + 3 h.
constexpr int64_t kStart = 1'800'000'000'000;

std::string Read(const std::string& name) {
  std::ifstream in(kDir + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << kDir + name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void ExpectGolden(const std::string& actual, const std::string& name) {
  if (std::getenv("EXPANSE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(kDir + name, std::ios::binary) << actual;
    return;
  }
  EXPECT_EQ(actual, Read(name)) << "rendering differs from " << kDir + name
                                << " (EXPANSE_UPDATE_GOLDEN=1 rewrites it)";
}

JobReport LoadReport(const std::string& id) {
  JobReport r;
  auto job = DecodeJob(Read("job_" + id + ".json"));
  auto timeline = DecodeTimeline(Read("timeline_" + id + ".json"));
  auto verdicts = DecodeVerdicts(Read("verdicts_" + id + ".json"));
  auto ledger = DecodeLedger(Read("ledger_" + id + ".json"));
  EXPECT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_TRUE(verdicts.ok()) << verdicts.status();
  EXPECT_TRUE(ledger.ok()) << ledger.status();
  if (job.ok() && timeline.ok() && verdicts.ok() && ledger.ok())
    r = {*job, *timeline, *verdicts, *ledger};
  return r;
}

JobList LoadList() {
  JobList list;
  list.user = "ana";
  list.since_ms = kStart - 86'400'000;
  list.as_of_ms = kStart + 3 * 3'600'000;
  auto jobs = DecodeJobPage(Read("jobs_ana.json"));
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  if (jobs.ok())
    list.jobs = *jobs;
  return list;
}

TEST(ReportGoldenTest, AnOverAllocatedJob) {
  const JobReport r = LoadReport("77");
  ExpectGolden(RenderJobReport(r), "report_77.txt");
  ExpectGolden(JobReportDocument(r).dump(2) + "\n", "report_77.json");
}

TEST(ReportGoldenTest, AnInputBoundArrayTask) {
  const JobReport r = LoadReport("80_3");
  ExpectGolden(RenderJobReport(r), "report_80_3.txt");
  ExpectGolden(JobReportDocument(r).dump(2) + "\n", "report_80_3.json");
}

TEST(ReportGoldenTest, AUsersJobs) {
  const JobList list = LoadList();
  ExpectGolden(RenderJobList(list), "jobs_ana.txt");
  ExpectGolden(JobListDocument(list).dump(2) + "\n", "jobs_ana.json.golden");
}

// A job whose usage the server left out of its page (used_omitted) shows no figures, not zeros
// that would read as an idle job, and stays out of the totals; the header says how many.
TEST(ReportGoldenTest, JobsWhoseUsageTheServerOmittedShowNoFigures) {
  JobList list = LoadList();
  ASSERT_GE(list.jobs.size(), 2u);
  const double kept_hours = list.jobs[0].used.allocated_gpu_hours;
  list.jobs[1].used = Used{};
  list.jobs[1].used.omitted = true;
  const std::string text = RenderJobList(list);
  EXPECT_THAT(text, HasSubstr("; usage not computed for 1 of them"));
  const size_t row = text.find("\n77 ");
  ASSERT_NE(row, std::string::npos) << text;
  const std::string omitted_row = text.substr(row + 1, text.find('\n', row + 1) - row - 1);
  EXPECT_THAT(omitted_row, ::testing::Not(::testing::ContainsRegex("[0-9]\\.[0-9]"))) << text;
  EXPECT_THAT(omitted_row, HasSubstr(" - ")) << text;
  const nlohmann::json doc = JobListDocument(list);
  EXPECT_EQ(doc["usage_omitted_jobs"], 1);
  EXPECT_EQ(doc["jobs"][1]["usage_omitted"], true);
  EXPECT_FALSE(doc["jobs"][1].contains("allocated_gpu_hours"));
  EXPECT_DOUBLE_EQ(doc["totals"]["allocated_gpu_hours"].get<double>(), kept_hours);

  // As the job list answer says it.
  auto decoded = DecodeJobPage(
      R"({"jobs":[{"compute_id":"c","job_id":"9","used_omitted":true,"requested":{},"used":{)"
      R"("gpus_allocated":0,"gpus_active":0,"sm_mean":0,"sm_peak":0,"gpu_mem_peak_mib":0,)"
      R"("allocated_gpu_hours":0,"idle_gpu_hours":0}}]})");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->front().used.omitted);
}

TEST(ReportGoldenTest, TheReportNamesWhatTheApiSays) {
  // Not only the same bytes as last time: the figures the user acts on are there.
  const JobReport r = LoadReport("77");
  const std::string text = RenderJobReport(r);
  for (const Verdict& v : r.verdicts.verdicts) {
    EXPECT_THAT(text, HasSubstr(v.code));
    EXPECT_THAT(text, HasSubstr(v.suggestion));
  }
  for (const JobGpu& g : r.job.gpus)
    EXPECT_THAT(text, HasSubstr(g.gpu_uuid));
  EXPECT_THAT(text, HasSubstr("idle 600 GPU-s (50 %)"));
}

TEST(SparklineTest, EighthsFromIdleToFullAndDotsWhereUnsampled) {
  std::vector<TimelinePoint> points;
  for (int i = 0; i < 8; ++i)
    points.push_back({1000 * i, 0, 0, i * 12.5 + 1});
  EXPECT_EQ(Sparkline(points, 0, 10'000, 10), "▁▂▃▄▅▆▇█··");
  EXPECT_EQ(Sparkline({{0, 0, 0, 250}, {1000, 0, 0, -5}}, 0, 2000, 2), "█▁");
  // Points outside the window, and an empty window, are unsampled.
  EXPECT_EQ(Sparkline({{5000, 0, 0, 50}}, 0, 2000, 2), "··");
  EXPECT_EQ(Sparkline({{0, 0, 0, 50}}, 10, 10, 3), "···");
  // Two buckets in one column: their mean.
  EXPECT_EQ(Sparkline({{0, 0, 0, 0}, {500, 0, 0, 100}}, 0, 2000, 2), "▅·");
}

TEST(RenderHostileTextTest, EscapeSequencesNeverReachTheTerminal) {
  JobReport r = LoadReport("77");
  r.job.name = "\x1b]0;owned\x07";
  ASSERT_FALSE(r.verdicts.verdicts.empty());
  r.verdicts.verdicts[0].evidence["note"] =
      "\x1b[2J\xc2\x9b"
      "31m";
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 500; ++i)
    many.push_back({{"gpu_uuid", "GPU-" + std::to_string(i)}, {"x", i}});
  r.verdicts.verdicts[0].evidence["gpus"] = many;
  nlohmann::json deep = nlohmann::json::object();
  for (int i = 0; i < 12; ++i)
    deep = {{"level", deep}, {"n", i}};
  r.verdicts.verdicts[0].evidence["deep"] = deep;
  const std::string text = RenderJobReport(r);
  EXPECT_THAT(text, Not(HasSubstr("\x1b")));
  EXPECT_THAT(text, Not(HasSubstr("\xc2\x9b")));
  EXPECT_THAT(text, HasSubstr("492 more not shown"));
  EXPECT_LT(text.size(), 20'000u);
}

TEST(ResourceNotesTest, RequestsFarAboveUseAreNoted) {
  Job job;
  job.start_ms = 1;
  job.end_ms = 1 + 600'000;
  job.requested = {.nodes = 1, .cpus = 16, .gpus = 1, .mem_mib = 65536, .time_limit_s = 86400};
  job.used.cpu_efficiency = 0.1;
  job.used.mem_efficiency = 0.05;
  const std::vector<Note> notes = ResourceNotes(job);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0].text, "ask for 2 CPUs, not 16: 10 % of them were used on average");
  EXPECT_EQ(notes[1].text, "ask for --mem=7G, not 64.0 GiB: the peak was 3.2 GiB");
  EXPECT_EQ(notes[2].text,
            "a shorter --time starts sooner: the job ran 10m 00s of its 1d 00h limit");
  job.used.cpu_efficiency = 0.9;
  job.used.mem_efficiency.reset();
  job.requested.time_limit_s = 1200;
  EXPECT_TRUE(ResourceNotes(job).empty());
}

TEST(ResourceNotesTest, AHugeTimeLimitIsShownWithoutOverflow) {
  // The decoder lets time_limit_s reach INT64_MAX / 2; in ms that overflows int64_t.
  JobReport r;
  r.job.job_id = "1";
  r.job.start_ms = 1;
  r.job.end_ms = 1 + 600'000;
  r.job.requested.time_limit_s = INT64_MAX / 2;
  const std::vector<Note> notes = ResourceNotes(r.job);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0].text, HasSubstr("the job ran 10m 00s of its "));
  EXPECT_THAT(RenderJobReport(r), HasSubstr("2932896d 23h"));  // kMaxTimeMs: the year 9999
}

}  // namespace
}  // namespace report_render_test
}  // namespace expanse::report
