#include "report/report_client.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "core/quote.h"
#include "report/report_decode.h"
#include "wire/error_answer.h"
#include "wire/field_reader.h"

namespace expanse::report {
namespace {

// A timeline of 8 GPUs at 60 points, a ledger, a page of 500 jobs: well under this.
constexpr size_t kMaxAnswerBytes = 32u << 20;
constexpr size_t kJobPage = 500;

// The server's own words, on their way to a terminal: a message holding a C1 control (valid
// UTF-8, so DecodeErrorAnswer keeps it; U+009B is CSI) is quoted with escapes.
std::string Described(const wire::ErrorAnswer& answer) {
  if (answer.code.empty() && answer.message.empty())
    return "";
  const std::string message = wire::IsTerminalText(answer.message)
                                  ? answer.message
                                  : QuoteForMessage(answer.message, answer.message.size());
  return " (" + answer.code + (message.empty() ? "" : ": " + message) + ")";
}

}  // namespace

Result<std::unique_ptr<ReportClient>> ReportClient::Create(const Connection& connection,
                                                           ApiToken token,
                                                           std::chrono::milliseconds timeout) {
  net::HttpClientOptions options;
  options.ca_file = connection.ca_file;
  options.connect_timeout = std::min(timeout, options.connect_timeout);
  options.total_timeout = timeout;
  options.max_response_bytes = kMaxAnswerBytes;
  options.user_agent = "expanse-report";
  Result<std::unique_ptr<net::HttpClient>> http = net::HttpClient::Create(options);
  if (!http.ok()) {
    // An unreadable --cacert / SSL_CERT_FILE is the caller's to fix.
    return http.status().code() == StatusCode::kInvalidArgument
               ? UsageError("the CA bundle: " + http.status().message())
               : http.status();
  }
  return std::unique_ptr<ReportClient>(
      new ReportClient(connection, std::move(token), *std::move(http)));
}

Status ReportClient::AnswerError(int status, const std::string& body, const Subject& subject) {
  const wire::ErrorAnswer answer = wire::DecodeErrorAnswer(body);
  const std::string details = Described(answer);
  const std::string compute = QuoteForMessage(connection_.compute, 128);
  const std::string org = QuoteForMessage(connection_.org, 128);
  if (status == 401) {
    return UnauthenticatedError("the server refused the API token" + details +
                                "; check EXPANSE_API_TOKEN or --token-file");
  }
  if (status == 403) {
    return PermissionDeniedError(
        "the token lacks view on " +
        (subject.job_id.empty() ? "organisation " + org : "compute " + compute) + details +
        ": it needs a user with any role in the organisation and the read scope (or jobs:own, "
        "for the jobs of the SLURM user the operator set for them)");
  }
  if (status == 404) {
    if (subject.job_id.empty()) {
      return NotFoundError("no organisation " + org +
                           (connection_.compute.empty() ? "" : " with compute " + compute) +
                           " visible to this token" + details);
    }
    // The job routes answer 404 alike for an unknown job and an unknown (or someone else's)
    // compute; the compute's own page tells the two apart.
    net::HttpRequest request{
        .method = "GET",
        .url = connection_.server_url + "/api/v1/computes/" + PercentEncode(connection_.compute),
        .headers = {{"Authorization", "Bearer " + std::string(token_.view())}}};
    Result<net::HttpResponse> compute_page = http_->Send(request);
    // The request's header holds the token: wipe that copy now, as Get does.
    ApiToken wipe(std::move(request.headers.front().second));
    if (compute_page.ok() && compute_page->status == 404) {
      return NotFoundError("no compute " + compute + " visible to this token" + details);
    }
    return NotFoundError("job " + subject.job_id + " not found on compute " + compute);
  }
  const std::string text = "the server answered " + std::to_string(status) + details;
  if (status == 429 || status >= 500)
    return UnavailableError(text);
  return InvalidArgumentError(text);
}

Result<std::string> ReportClient::Get(const std::string& path, const Subject& subject) {
  // A read the server did not start because it was answering as many large queries as it runs
  // at once (503 queries_busy) is asked again after its Retry-After, a few times, as the console
  // does: one person's report must not fail because others looked at jobs at that moment.
  for (int attempt = 0;; ++attempt) {
    bool busy = false;
    int retry_after_s = 1;
    Result<std::string> body = GetOnce(path, subject, &busy, &retry_after_s);
    if (!busy || attempt >= kBusyRetries)
      return body;
    std::this_thread::sleep_for(std::chrono::seconds(std::clamp(retry_after_s, 1, 5)));
  }
}

Result<std::string> ReportClient::GetOnce(const std::string& path, const Subject& subject,
                                          bool* busy, int* retry_after_s) {
  net::HttpRequest request;
  request.url = connection_.server_url + path;
  request.headers = {{"Authorization", "Bearer " + std::string(token_.view())},
                     {"Accept", "application/json"}};
  Result<net::HttpResponse> response = http_->Send(request);
  // The request's header holds the token: wipe that copy now.
  ApiToken wipe(std::move(request.headers.front().second));
  if (!response.ok()) {
    const Status& s = response.status();
    std::string hint;
    if (s.reason() == "tls_error")
      hint = " (is the server's CA in --cacert or SSL_CERT_FILE?)";
    const std::string text =
        "cannot reach the server at " + connection_.server_url + ": " + s.message() + hint;
    if (s.code() == StatusCode::kInvalidArgument)
      return UsageError(text);
    if (s.code() == StatusCode::kResourceExhausted)
      return DataLossError(text).WithReason("invalid_answer");
    return Status(s.code() == StatusCode::kDeadlineExceeded ? StatusCode::kDeadlineExceeded
                                                            : StatusCode::kUnavailable,
                  text)
        .WithReason("unreachable");
  }
  if (response->status != 200) {
    if (response->status == 503 && wire::DecodeErrorAnswer(response->body).code == "queries_busy") {
      *busy = true;
      const std::string retry(response->Header("Retry-After").value_or("1"));
      int seconds = 1;
      std::from_chars(retry.data(), retry.data() + retry.size(), seconds);
      *retry_after_s = seconds;
    }
    return AnswerError(response->status, response->body, subject);
  }
  return std::move(response->body);
}

Result<JobReport> ReportClient::FetchJobReport(const std::string& job_id, int points) {
  EXPANSE_RETURN_IF_ERROR(CheckJobId(job_id));
  const Subject subject{job_id};
  const std::string base =
      "/api/v1/computes/" + PercentEncode(connection_.compute) + "/jobs/" + PercentEncode(job_id);
  JobReport report;
  EXPANSE_ASSIGN_OR_RETURN(const std::string job, Get(base, subject));
  EXPANSE_ASSIGN_OR_RETURN(report.job, DecodeJob(job));
  EXPANSE_ASSIGN_OR_RETURN(
      const std::string timeline,
      Get(base + "/timeline?metric=gpu.sm_util&points=" + std::to_string(points), subject));
  EXPANSE_ASSIGN_OR_RETURN(report.timeline, DecodeTimeline(timeline));
  EXPANSE_ASSIGN_OR_RETURN(const std::string verdicts, Get(base + "/verdicts", subject));
  EXPANSE_ASSIGN_OR_RETURN(report.verdicts, DecodeVerdicts(verdicts));
  EXPANSE_ASSIGN_OR_RETURN(const std::string ledger, Get(base + "/ledger", subject));
  EXPANSE_ASSIGN_OR_RETURN(report.ledger, DecodeLedger(ledger));
  if (report.job.job_id != job_id) {
    return DataLossError("the server answered job " + QuoteForMessage(report.job.job_id) +
                         " when asked for job " + job_id)
        .WithReason("invalid_answer");
  }
  return report;
}

Result<JobList> ReportClient::FetchJobList(const std::string& user, int64_t since_ms,
                                           int64_t now_ms, size_t max_jobs) {
  JobList list;
  list.user = user;
  list.since_ms = since_ms;
  list.as_of_ms = now_ms;
  std::string query = "user=" + PercentEncode(user) + "&from=" + std::to_string(since_ms);
  if (!connection_.compute.empty())
    query += "&compute=" + PercentEncode(connection_.compute);
  const std::string path = "/api/v1/orgs/" + PercentEncode(connection_.org) + "/jobs?" + query;
  // Pages may shift while they are read (a job starting meanwhile): a job seen twice is kept once.
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t offset = 0; list.jobs.size() < max_jobs; offset += kJobPage) {
    const size_t limit = std::min(kJobPage, max_jobs - list.jobs.size());
    EXPANSE_ASSIGN_OR_RETURN(
        const std::string body,
        Get(path + "&limit=" + std::to_string(limit) + "&offset=" + std::to_string(offset), {}));
    EXPANSE_ASSIGN_OR_RETURN(std::vector<Job> page, DecodeJobPage(body));
    const size_t got = page.size();
    const size_t before = list.jobs.size();
    for (Job& job : page) {
      if (job.user != user) {
        return DataLossError("the server listed a job of user " + QuoteForMessage(job.user) +
                             " when asked for " + QuoteForMessage(user))
            .WithReason("invalid_answer");
      }
      if (seen.emplace(job.compute_id, job.job_id).second)
        list.jobs.push_back(std::move(job));
    }
    if (got < limit)
      return list;
    // A full page of jobs listed already: the server repeats itself (a real one moves on with
    // the offset), and asking on would walk to the offset cap for nothing.
    if (list.jobs.size() == before) {
      return DataLossError("the server's job list repeats itself: the page at offset " +
                           std::to_string(offset) + " held no job it had not listed already")
          .WithReason("invalid_answer");
    }
    if (list.jobs.size() >= max_jobs || offset + kJobPage > 1'000'000)
      break;
  }
  list.truncated = true;
  return list;
}

}  // namespace expanse::report
