// `expanse job report JOBID` and `expanse jobs`: the flags of the report commands, a thin layer
// over src/report/report_command.h (docs/report.md).

#ifndef EXPANSE_CMD_REPORT_CLI_H_
#define EXPANSE_CMD_REPORT_CLI_H_

#include <optional>

#include <CLI/CLI.hpp>

#include "report/report_command.h"
#include "report/report_settings.h"

namespace expanse::install {

struct ReportCommands {
  CLI::App* job_report = nullptr;
  CLI::App* jobs = nullptr;
  report::JobReportFlags job_report_flags;
  report::JobsFlags jobs_flags;
};

// Adds `job report` and `jobs` to `app`; `commands` must outlive parsing.
void AddReportCommands(CLI::App& app, ReportCommands& commands);

// True when one of them was parsed.
bool ReportCommandParsed(const ReportCommands& commands);

// Runs the parsed one, prints its output or its error, and returns the exit status
// (report::ExitCodeFor).
int RunReportCommand(const ReportCommands& commands, std::optional<report::ApiToken> token);

}  // namespace expanse::install

#endif  // EXPANSE_CMD_REPORT_CLI_H_
