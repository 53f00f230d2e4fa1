// libFuzzer target for the report commands' reading of the server's answers
// (src/report/report_decode.*) and their rendering (report_render.*). An answer comes from the
// network: an older or newer server, a proxy, or something that is not Expanse.
// The first byte picks the answer (job, job page, timeline, verdicts, ledger), the rest is its
// body. Properties, checked on every input:
//  - nothing crashes, hangs or trips a sanitizer;
//  - a refused answer is kDataLoss with reason "invalid_answer";
//  - an accepted one renders: the terminal report holds no ESC byte whatever the answer held,
//    and the --json document dumps to JSON that parses back.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "report/report_decode.h"
#include "report/report_render.h"

namespace {

using expanse::StatusCode;
namespace report = expanse::report;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_report_answers: property violated: %s\n", what);
    std::abort();
  }
}

template <typename T>
bool Accepted(const expanse::Result<T>& r) {
  if (!r.ok()) {
    Require(r.status().code() == StatusCode::kDataLoss, "a refusal is kDataLoss");
    Require(r.status().reason() == "invalid_answer", "a refusal says invalid_answer");
  }
  return r.ok();
}

void CheckRendered(const report::JobReport& r) {
  const std::string text = report::RenderJobReport(r);
  Require(text.find('\x1b') == std::string::npos, "no escape byte reaches the terminal");
  const std::string doc =
      report::JobReportDocument(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  Require(!nlohmann::json::parse(doc, nullptr, false).is_discarded(), "the document is JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  report::JobReport r;
  switch (data[0] % 5) {
    case 0:
      if (auto job = report::DecodeJob(body); Accepted(job)) {
        r.job = *job;
        CheckRendered(r);
      }
      break;
    case 1:
      if (auto page = report::DecodeJobPage(body); Accepted(page)) {
        report::JobList list;
        list.user = "ana";
        list.jobs = *page;
        const std::string text = report::RenderJobList(list);
        Require(text.find('\x1b') == std::string::npos, "no escape byte in the job list");
        (void)report::JobListDocument(list).dump();
      }
      break;
    case 2:
      if (auto timeline = report::DecodeTimeline(body); Accepted(timeline)) {
        r.timeline = *timeline;
        CheckRendered(r);
      }
      break;
    case 3:
      if (auto verdicts = report::DecodeVerdicts(body); Accepted(verdicts)) {
        r.verdicts = *verdicts;
        CheckRendered(r);
      }
      break;
    default:
      if (auto ledger = report::DecodeLedger(body); Accepted(ledger)) {
        r.ledger = *ledger;
        CheckRendered(r);
      }
      break;
  }
  return 0;
}
