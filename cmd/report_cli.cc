#include "report_cli.h"

#include <cstdio>
#include <string>

#include "core/clock.h"

namespace expanse::install {
namespace {

void AddConnectionFlags(CLI::App& command, report::ConnectionFlags& flags, std::string& token_file,
                        bool compute_required) {
  command.add_option("--server", flags.server,
                     "The Expanse server's URL, https://… (default: EXPANSE_SERVER)");
  command.add_option("--cacert", flags.cacert,
                     "PEM bundle of the CAs to trust for it (default: SSL_CERT_FILE, else the "
                     "system's)");
  command.add_option("--org", flags.org, "Organisation slug (default: EXPANSE_ORG)");
  command.add_option("--compute", flags.compute,
                     compute_required ? "The job's compute id, cmp_… (default: EXPANSE_COMPUTE)"
                                      : "Only this compute's jobs (default: EXPANSE_COMPUTE, "
                                        "else every compute of the organisation)");
  command.add_option("--token-file", token_file,
                     "File holding the API token (mode 0600); default: EXPANSE_API_TOKEN");
}

}  // namespace

void AddReportCommands(CLI::App& app, ReportCommands& c) {
  CLI::App* job = app.add_subcommand("job", "Look at one job (users and operators)");
  job->require_subcommand(1);
  c.job_report = job->add_subcommand(
      "report", "What the job asked for and used, per-GPU utilisation, why GPUs were idle");
  c.job_report->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  c.job_report->add_option("JOBID", c.job_report_flags.job_id, "SLURM job id: 123 or 123_4")
      ->required();
  AddConnectionFlags(*c.job_report, c.job_report_flags.connection, c.job_report_flags.token_file,
                     true);
  c.job_report->add_flag("--json", c.job_report_flags.json,
                         "Print one JSON document (docs/formats/job-report.md)");

  c.jobs = app.add_subcommand("jobs", "A user's jobs with what their GPUs wasted");
  c.jobs->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  c.jobs->add_option("--user", c.jobs_flags.user, "SLURM user name (default: yours)");
  c.jobs->add_option("--since", c.jobs_flags.since, "Jobs that ran in this past period: 7d, 12h")
      ->capture_default_str();
  c.jobs->add_option("--max-jobs", c.jobs_flags.max_jobs, "Read at most this many jobs")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  AddConnectionFlags(*c.jobs, c.jobs_flags.connection, c.jobs_flags.token_file, false);
  c.jobs->add_flag("--json", c.jobs_flags.json,
                   "Print one JSON document (docs/formats/job-report.md)");
}

bool ReportCommandParsed(const ReportCommands& c) {
  return (c.job_report != nullptr && c.job_report->parsed()) ||
         (c.jobs != nullptr && c.jobs->parsed());
}

int RunReportCommand(const ReportCommands& c, std::optional<report::ApiToken> token) {
  std::string out;
  Status status;
  if (c.job_report->parsed()) {
    status = report::RunJobReport(c.job_report_flags, std::move(token),
                                  report::ProcessEnvironment(), &out);
  } else {
    SystemClock clock;
    status =
        report::RunJobs(c.jobs_flags, std::move(token), report::ProcessEnvironment(), clock, &out);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "expanse: %s\n", status.message().c_str());
    return report::ExitCodeFor(status);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return report::kExitOk;
}

}  // namespace expanse::install
