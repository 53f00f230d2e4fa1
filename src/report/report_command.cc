#include "report/report_command.h"

#include <pwd.h>
#include <unistd.h>

#include <utility>

#include <nlohmann/json.hpp>

#include "core/duration.h"
#include "report/report_client.h"
#include "report/report_render.h"

namespace expanse::report {
namespace {

std::string Dump(const nlohmann::json& doc) {
  // Every text in it passed the answer's UTF-8 check; replace keeps a bug from throwing.
  // ensure_ascii: a server's text may hold C1 controls (valid UTF-8, U+009B is CSI), which
  // must not reach a terminal raw; as \u escapes they reach a JSON reader intact.
  return doc.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
}

// The calling user's name, for `expanse jobs` without --user: a user's own jobs.
std::string CallingUser() {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(geteuid(), &pw, buffer, sizeof buffer, &found) != 0 || found == nullptr)
    return "";
  return found->pw_name;
}

}  // namespace

Status RunJobReport(const JobReportFlags& flags, std::optional<ApiToken> env_token,
                    const EnvLookup& env, std::string* out) {
  EXPANSE_RETURN_IF_ERROR(CheckJobId(flags.job_id));
  EXPANSE_ASSIGN_OR_RETURN(Connection connection,
                           ResolveConnection(flags.connection, env, false, true));
  EXPANSE_ASSIGN_OR_RETURN(ApiToken token, ObtainApiToken(std::move(env_token), flags.token_file));
  EXPANSE_ASSIGN_OR_RETURN(auto client,
                           ReportClient::Create(connection, std::move(token), flags.timeout));
  EXPANSE_ASSIGN_OR_RETURN(const JobReport report,
                           client->FetchJobReport(flags.job_id, kSparklineColumns));
  *out = flags.json ? Dump(JobReportDocument(report)) : RenderJobReport(report);
  return OkStatus();
}

Status RunJobs(const JobsFlags& flags, std::optional<ApiToken> env_token, const EnvLookup& env,
               Clock& clock, std::string* out) {
  Result<std::chrono::milliseconds> since = ParseDuration(flags.since);
  if (!since.ok())
    return UsageError("--since: " + since.status().message());
  const std::string user = flags.user.empty() ? CallingUser() : flags.user;
  if (user.empty())
    return UsageError("--user: no name for this user id; pass --user NAME");
  EXPANSE_ASSIGN_OR_RETURN(Connection connection,
                           ResolveConnection(flags.connection, env, true, false));
  EXPANSE_ASSIGN_OR_RETURN(ApiToken token, ObtainApiToken(std::move(env_token), flags.token_file));
  EXPANSE_ASSIGN_OR_RETURN(auto client,
                           ReportClient::Create(connection, std::move(token), flags.timeout));
  const int64_t now = clock.NowMs();
  EXPANSE_ASSIGN_OR_RETURN(
      const JobList list,
      client->FetchJobList(user, std::max<int64_t>(now - since->count(), 1), now, flags.max_jobs));
  *out = flags.json ? Dump(JobListDocument(list)) : RenderJobList(list);
  return OkStatus();
}

}  // namespace expanse::report
