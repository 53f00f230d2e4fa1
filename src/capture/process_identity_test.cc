#include "capture/process_identity.h"

#include <unistd.h>

#include <map>

#include <gtest/gtest.h>

namespace expanse::capture {
namespace {

TEST(CurrentProcess, ReadsSlurmsVariablesAndTheProcess) {
  const std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "123"}, {"SLURM_STEP_ID", "2"}, {"SLURM_PROCID", "5"}};
  const ProcessIdentity id = CurrentProcess([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_EQ(id.job_id, "123");
  EXPECT_EQ(id.step_id, "2");
  EXPECT_EQ(id.rank, "5");
  EXPECT_EQ(id.pid, getpid());
  EXPECT_EQ(id.uid, getuid());
  EXPECT_GT(id.start_ticks, 0u);
  EXPECT_FALSE(id.host.empty());
  EXPECT_EQ(id.host.find('.'), std::string::npos);
  for (char c : id.host)
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') << id.host;
}

TEST(CurrentProcess, OutsideAJobTheJobIsEmpty) {
  const ProcessIdentity id = CurrentProcess([](const char*) -> const char* { return nullptr; });
  EXPECT_EQ(id.job_id, "");
  EXPECT_FALSE(SafeJobId(id.job_id));
}

TEST(SafeJobId, AcceptsSlurmsIdsOnly) {
  for (const char* ok : {"1", "123456", "77_3", "88+1"})
    EXPECT_TRUE(SafeJobId(ok)) << ok;
  for (const char* bad : {"", "..", "1/2", "abc", "1 2", "1\n"})
    EXPECT_FALSE(SafeJobId(bad)) << bad;
  EXPECT_FALSE(SafeJobId(std::string(65, '1')));
}

}  // namespace
}  // namespace expanse::capture
