// The report commands' reads of the console API (docs/api.md), over net::HttpClient (libcurl:
// TLS verified, plain http only to loopback, bounded answers). Every answer goes through
// report_decode.h; an error answer becomes one sentence naming what was asked for, with a
// Status code that ExitCodeFor maps to the documented exit status:
//
//   401            kUnauthenticated  "the server refused the API token (api_token_invalid: …)"
//   403            kPermissionDenied "the token lacks view on compute cmp_x (forbidden: …)"
//   404            kNotFound         "job 123 not found on compute cmp_x"
//   429, 5xx       kUnavailable      "the server answered 503 overloaded (…)"
//   other 4xx      kInvalidArgument  the server's code and message
//
// The token goes only into the Authorization header, never into a message.
#ifndef EXPANSE_REPORT_REPORT_CLIENT_H_
#define EXPANSE_REPORT_REPORT_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "net/http_client.h"
#include "report/report_model.h"
#include "report/report_settings.h"

namespace expanse::report {

class ReportClient {
 public:
  static Result<std::unique_ptr<ReportClient>> Create(const Connection& connection, ApiToken token,
                                                      std::chrono::milliseconds timeout);

  // The job, its gpu.sm_util timeline in `points` buckets, its verdicts and its idle ledger.
  Result<JobReport> FetchJobReport(const std::string& job_id, int points);

  // The jobs of `user` on the organisation's computes (or connection.compute when set) that ran
  // at some time since `since_ms`, newest first; at most `max_jobs` (truncated says when more
  // matched). `now_ms` becomes the list's as_of_ms (a running job's elapsed time).
  Result<JobList> FetchJobList(const std::string& user, int64_t since_ms, int64_t now_ms,
                               size_t max_jobs);

 private:
  ReportClient(Connection connection, ApiToken token, std::unique_ptr<net::HttpClient> http)
      : connection_(std::move(connection)), token_(std::move(token)), http_(std::move(http)) {}

  // What a request was for, for its error messages.
  struct Subject {
    std::string job_id;  // "" for the job list
  };
  // GetOnce, asked again up to kBusyRetries times after a 503 queries_busy (its Retry-After,
  // 1-5 s).
  Result<std::string> Get(const std::string& path, const Subject& subject);
  static constexpr int kBusyRetries = 5;
  // One GET of `path`; *busy says the answer was 503 queries_busy, *retry_after_s its wait.
  Result<std::string> GetOnce(const std::string& path, const Subject& subject, bool* busy,
                              int* retry_after_s);
  Status AnswerError(int status, const std::string& body, const Subject& subject);

  Connection connection_;
  ApiToken token_;
  std::unique_ptr<net::HttpClient> http_;
};

}  // namespace expanse::report

#endif  // EXPANSE_REPORT_REPORT_CLIENT_H_
