#include "slurm/slurm_client.h"

#include <array>
#include <ctime>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "slurm/slurm_test_util.h"

namespace expanse::slurm {
namespace slurm_client_test {
namespace {

using testing::ReadFixture;

// Records what it was asked to run and answers with a canned result.
class FakeRunner {
 public:
  explicit FakeRunner(Result<SubprocessResult> answer) : answer_(std::move(answer)) {}

  CommandRunner AsRunner() {
    return [this](const SubprocessOptions& options) {
      calls_.push_back(options);
      return answer_;
    };
  }
  const std::vector<SubprocessOptions>& calls() const { return calls_; }

 private:
  Result<SubprocessResult> answer_;
  std::vector<SubprocessOptions> calls_;
};

SubprocessResult Exited(int code, std::string out, std::string err = "") {
  SubprocessResult result;
  result.exit_code = code;
  result.stdout_text = std::move(out);
  result.stderr_text = std::move(err);
  return result;
}

SlurmClientOptions TestOptions() {
  SlurmClientOptions options;
  options.search_path = "/opt/slurm/bin";
  options.env = std::vector<std::string>{"SLURM_CONF=/etc/slurm-test/slurm.conf"};
  options.timeout = std::chrono::milliseconds(1234);
  options.max_output_bytes = 4096;
  return options;
}

TEST(SlurmClientTest, ListJobsRunsSqueueOnce) {
  FakeRunner fake(Exited(0, ReadFixture("squeue_running.json")));
  const SlurmClient client(TestOptions(), fake.AsRunner());
  Result<std::vector<JobInfo>> jobs = client.ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 9u);
  ASSERT_EQ(fake.calls().size(), 1u);
  const SubprocessOptions& call = fake.calls().front();
  EXPECT_EQ(call.argv, (std::vector<std::string>{"squeue", "--all", "--json"}));
  EXPECT_EQ(call.search_path, "/opt/slurm/bin");
  EXPECT_EQ(call.env, (std::vector<std::string>{"SLURM_CONF=/etc/slurm-test/slurm.conf"}));
  EXPECT_EQ(call.timeout, std::chrono::milliseconds(1234));
  EXPECT_EQ(call.max_output_bytes, 4096u);
}

TEST(SlurmClientTest, ShowJobGresPassesTheId) {
  FakeRunner fake(Exited(0, ReadFixture("scontrol_show_job_d_1.txt")));
  const SlurmClient client(TestOptions(), fake.AsRunner());
  Result<std::vector<JobGres>> records = client.ShowJobGres("1");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ(records->front().gpu_indices,
            (GpuIndicesByHost{{"worker1", {0, 1}}, {"worker2", {0, 1}}}));
  EXPECT_EQ(fake.calls().front().argv,
            (std::vector<std::string>{"scontrol", "show", "job", "-d", "1"}));

  EXPECT_TRUE(client.ShowJobGres("4_0").ok());
  EXPECT_TRUE(client.ShowJobGres("2+1").ok());
  EXPECT_TRUE(client.ShowAllJobGres().ok());
  EXPECT_EQ(fake.calls().back().argv, (std::vector<std::string>{"scontrol", "show", "job", "-d"}));
}

TEST(SlurmClientTest, ShowJobGresRejectsWhatIsNotAnId) {
  FakeRunner fake(Exited(0, ""));
  const SlurmClient client(TestOptions(), fake.AsRunner());
  for (const std::string_view id : {"", "--help", "4_[1-3]", "1_", "+1", "12a", "1_2_3"}) {
    const Status status = client.ShowJobGres(id).status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << id;
  }
  EXPECT_EQ(client.ShowJobGres("-d").status().message(),
            "scontrol show job: \"-d\" is not a job id (expected 123, 123_4 or 123+1)");
  EXPECT_TRUE(fake.calls().empty());
}

TEST(SlurmClientTest, ShowJobGresOfAnUnknownJob) {
  FakeRunner fake(Exited(1, "", "slurm_load_jobs error: Invalid job id specified\n"));
  const SlurmClient client(TestOptions(), fake.AsRunner());
  const Status status = client.ShowJobGres("999").status();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.reason(), "job_not_found");
  EXPECT_EQ(status.message(),
            "scontrol show job: job 999 is not known to slurmctld (ended more than MinJobAge "
            "ago?)");
}

TEST(SlurmClientTest, ListAccountedRunsSacct) {
  FakeRunner fake(Exited(0, ReadFixture("sacct.json")));
  const SlurmClient client(TestOptions(), fake.AsRunner());
  Result<std::vector<JobInfo>> jobs = client.ListAccounted(1796000000);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 11u);
  EXPECT_EQ(fake.calls().front().argv,
            (std::vector<std::string>{"sacct", "--json", "-X", "--allusers", "--starttime",
                                      FormatSlurmLocalTime(1796000000)}));
}

TEST(SlurmClientTest, AccountingDisabled) {
  // sacct 22.05.8 without slurmdbd: exit status 1, this on stderr, nothing on stdout.
  FakeRunner fake(Exited(1, "", ReadFixture("sacct_disabled.txt")));
  const SlurmClient client(TestOptions(), fake.AsRunner());
  const Status status = client.ListAccounted(0).status();
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.reason(), "accounting_disabled");
  EXPECT_EQ(status.message(),
            "sacct: Slurm accounting storage is disabled (no slurmdbd); finished jobs are known "
            "only while squeue lists them");
}

TEST(SlurmClientTest, CommandFailures) {
  {
    FakeRunner fake(Exited(
        1, "", "squeue: error: slurm_load_jobs error: Unable to contact slurm controller\nmore\n"));
    const Status status = SlurmClient(TestOptions(), fake.AsRunner()).ListJobs().status();
    EXPECT_EQ(status.code(), StatusCode::kUnavailable);
    EXPECT_EQ(status.reason(), "slurm_command_failed");
    EXPECT_EQ(status.message(),
              "squeue --json exited with status 1: \"squeue: error: slurm_load_jobs error: "
              "Unable to contact slurm controller\"");
  }
  {
    SubprocessResult killed;
    killed.term_signal = 9;
    FakeRunner fake(killed);
    const Status status = SlurmClient(TestOptions(), fake.AsRunner()).ListAccounted(0).status();
    EXPECT_EQ(status.message(), "sacct --json killed by signal 9");
  }
  {
    SubprocessResult late;
    late.timed_out = true;
    late.term_signal = 15;
    FakeRunner fake(late);
    const Status status = SlurmClient(TestOptions(), fake.AsRunner()).ListJobs().status();
    EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
    EXPECT_EQ(status.reason(), "slurm_timeout");
    EXPECT_EQ(status.message(),
              "squeue --all: no answer within 1234 ms, killed (is slurmctld or slurmdbd "
              "overloaded?)");
  }
  {
    SubprocessResult big = Exited(0, "{");
    big.stdout_truncated = true;
    FakeRunner fake(big);
    const Status status = SlurmClient(TestOptions(), fake.AsRunner()).ListJobs().status();
    EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(status.reason(), "slurm_output_too_large");
  }
  {
    FakeRunner fake(NotFoundError("squeue: not found").WithReason("not_found"));
    const Status status = SlurmClient(TestOptions(), fake.AsRunner()).ListJobs().status();
    EXPECT_EQ(status.code(), StatusCode::kNotFound);
    EXPECT_EQ(status.reason(), "not_found");
  }
  {
    FakeRunner fake(Exited(0, "not json"));
    const Status status = SlurmClient(TestOptions(), fake.AsRunner()).ListJobs().status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(status.reason(), "slurm_output");
  }
}

// The real runner: a program missing from the search path is reported, not crashed on.
TEST(SlurmClientTest, MissingProgramWithTheRealRunner) {
  SlurmClientOptions options;
  options.squeue = "expanse-no-such-squeue";
  options.search_path = "/nonexistent";
  const Status status = SlurmClient(options).ListJobs().status();
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.reason(), "not_found");
}

TEST(SlurmClientTest, FormatsLocalTimeForSacct) {
  const std::time_t time = 1796000000;
  std::tm local{};
  ASSERT_NE(localtime_r(&time, &local), nullptr);
  std::array<char, 32> expected{};
  std::strftime(expected.data(), expected.size(), "%Y-%m-%dT%H:%M:%S", &local);
  EXPECT_EQ(FormatSlurmLocalTime(1796000000), expected.data());
  EXPECT_EQ(FormatSlurmLocalTime(1796000000).size(), 19u);
}

TEST(SlurmClientTest, ValidJobIdArguments) {
  EXPECT_TRUE(IsValidJobIdArgument("123"));
  EXPECT_TRUE(IsValidJobIdArgument("123_4"));
  EXPECT_TRUE(IsValidJobIdArgument("123+1"));
  EXPECT_FALSE(IsValidJobIdArgument("123_[4-5]"));
  EXPECT_FALSE(IsValidJobIdArgument("12345678901"));
}

}  // namespace
}  // namespace slurm_client_test
}  // namespace expanse::slurm
