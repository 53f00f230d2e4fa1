#include "slurm/slurm_client.h"

#include <array>
#include <ctime>
#include <utility>

#include "core/quote.h"
#include "slurm/sacct_parse.h"
#include "slurm/scontrol_parse.h"
#include "slurm/squeue_parse.h"

namespace expanse::slurm {
namespace {

// The first non-blank line of `text`: where SLURM's commands say what went wrong.
std::string_view FirstLine(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos)
      return line;
    pos = end + 1;
  }
  return {};
}

// What a failed command said, stderr first: SLURM writes its errors there.
std::string_view Said(const SubprocessResult& result) {
  std::string_view said = FirstLine(result.stderr_text);
  return said.empty() ? FirstLine(result.stdout_text) : said;
}

Status CommandFailed(std::string_view command, const SubprocessResult& result) {
  const std::string how =
      result.term_signal.has_value()
          ? "killed by signal " + std::to_string(*result.term_signal)
          : "exited with status " + std::to_string(result.exit_code.value_or(-1));
  const std::string_view said = Said(result);
  return UnavailableError(std::string(command) + " " + how +
                          (said.empty() ? "" : ": " + QuoteForMessage(said, 200)))
      .WithReason("slurm_command_failed");
}

bool AllDigits(std::string_view text) {
  if (text.empty() || text.size() > 10)
    return false;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
  }
  return true;
}

}  // namespace

SlurmClient::SlurmClient(SlurmClientOptions options, CommandRunner runner)
    : options_(std::move(options)), runner_(std::move(runner)) {}

Result<SubprocessResult> SlurmClient::Run(const std::string& program,
                                          const std::vector<std::string>& args) const {
  SubprocessOptions run;
  run.argv.reserve(args.size() + 1);
  run.argv.push_back(program);
  run.argv.insert(run.argv.end(), args.begin(), args.end());
  run.search_path = options_.search_path;
  run.env = options_.env;
  run.timeout = options_.timeout;
  run.max_output_bytes = options_.max_output_bytes;
  EXPANSE_ASSIGN_OR_RETURN(SubprocessResult result, runner_(run));

  std::string command = program;
  if (!args.empty())
    command += " " + args.front();
  if (result.timed_out) {
    return DeadlineExceededError(command + ": no answer within " +
                                 std::to_string(options_.timeout.count()) +
                                 " ms, killed (is slurmctld or slurmdbd overloaded?)")
        .WithReason("slurm_timeout");
  }
  if (result.stdout_truncated) {
    return ResourceExhaustedError(command + ": output over " +
                                  std::to_string(options_.max_output_bytes) + " bytes")
        .WithReason("slurm_output_too_large");
  }
  return result;
}

Result<std::vector<JobInfo>> SlurmClient::ListJobs() const {
  // --all: also jobs in hidden partitions, which squeue leaves out even for root.
  EXPANSE_ASSIGN_OR_RETURN(const SubprocessResult result,
                           Run(options_.squeue, {"--all", "--json"}));
  if (!result.Succeeded())
    return CommandFailed("squeue --json", result);
  return ParseSqueueJson(result.stdout_text);
}

Result<std::vector<JobGres>> SlurmClient::ShowJobGres(std::string_view job_id) const {
  if (!IsValidJobIdArgument(job_id)) {
    return InvalidArgumentError("scontrol show job: " + QuoteForMessage(job_id) +
                                " is not a job id (expected 123, 123_4 or 123+1)");
  }
  EXPANSE_ASSIGN_OR_RETURN(const SubprocessResult result,
                           Run(options_.scontrol, {"show", "job", "-d", std::string(job_id)}));
  if (!result.Succeeded()) {
    if (!result.timed_out && result.exit_code.has_value() &&
        SaysInvalidJobId(result.stderr_text + result.stdout_text)) {
      return NotFoundError("scontrol show job: job " + std::string(job_id) +
                           " is not known to slurmctld (ended more than MinJobAge ago?)")
          .WithReason("job_not_found");
    }
    return CommandFailed("scontrol show job", result);
  }
  return ParseScontrolShowJob(result.stdout_text);
}

Result<std::vector<JobGres>> SlurmClient::ShowAllJobGres() const {
  EXPANSE_ASSIGN_OR_RETURN(const SubprocessResult result,
                           Run(options_.scontrol, {"show", "job", "-d"}));
  if (!result.Succeeded())
    return CommandFailed("scontrol show job", result);
  return ParseScontrolShowJob(result.stdout_text);
}

Result<std::vector<JobInfo>> SlurmClient::ListAccounted(int64_t since_unix_s) const {
  EXPANSE_ASSIGN_OR_RETURN(const SubprocessResult result,
                           Run(options_.sacct, {"--json", "-X", "--allusers", "--starttime",
                                                FormatSlurmLocalTime(since_unix_s)}));
  if (!result.Succeeded()) {
    if (SaysAccountingDisabled(result.stderr_text) || SaysAccountingDisabled(result.stdout_text)) {
      return FailedPreconditionError(
                 "sacct: Slurm accounting storage is disabled (no slurmdbd); finished jobs are "
                 "known only while squeue lists them")
          .WithReason("accounting_disabled");
    }
    return CommandFailed("sacct --json", result);
  }
  return ParseSacctJson(result.stdout_text);
}

std::string FormatSlurmLocalTime(int64_t unix_s) {
  const auto time = static_cast<std::time_t>(unix_s);
  std::tm local{};
  std::array<char, 32> text{};
  if (localtime_r(&time, &local) == nullptr ||
      std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &local) == 0) {
    return "1970-01-01T00:00:00";  // only for times no clock shows
  }
  return text.data();
}

bool IsValidJobIdArgument(std::string_view job_id) {
  const size_t separator = job_id.find_first_of("_+");
  if (separator == std::string_view::npos)
    return AllDigits(job_id);
  return AllDigits(job_id.substr(0, separator)) && AllDigits(job_id.substr(separator + 1));
}

}  // namespace expanse::slurm
