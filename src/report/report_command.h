// `expanse job report JOBID` and `expanse jobs --user U --since 7d` (docs/report.md), taking
// parsed flags: settings resolved, the API read, the answer rendered as text or JSON. The flags
// are parsed in cmd/report_cli.cc.
#ifndef EXPANSE_REPORT_REPORT_COMMAND_H_
#define EXPANSE_REPORT_REPORT_COMMAND_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "report/report_settings.h"

namespace expanse::report {

struct JobReportFlags {
  ConnectionFlags connection;
  std::string token_file;
  std::string job_id;
  bool json = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

struct JobsFlags {
  ConnectionFlags connection;
  std::string token_file;
  std::string user;  // "" = the calling user's name
  std::string since = "7d";
  bool json = false;
  size_t max_jobs = 2000;
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

// Each writes the rendered report to `out` and returns OK, or returns the failure (one
// sentence; ExitCodeFor gives the exit status). `env_token` is EXPANSE_API_TOKEN as taken at
// start-up.
Status RunJobReport(const JobReportFlags& flags, std::optional<ApiToken> env_token,
                    const EnvLookup& env, std::string* out);
Status RunJobs(const JobsFlags& flags, std::optional<ApiToken> env_token, const EnvLookup& env,
               Clock& clock, std::string* out);

}  // namespace expanse::report

#endif  // EXPANSE_REPORT_REPORT_COMMAND_H_
