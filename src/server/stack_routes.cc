// The source-evidence API: a job's Python stacks over a time range, for a flame graph or a list
// of the frames the job spent its samples in.
#include <cstdint>
#include <string>
#include <utility>

#include "server/route_util.h"
#include "server/routes.h"
#include "server/top_frames.h"

namespace expanse::server {
namespace {

using nlohmann::json;

constexpr int64_t kDefaultStacksLimit = 1000;
constexpr size_t kTopFrames = 50;

}  // namespace

void RegisterStackRoutes(http::Listener& listener, RouteContext& context) {
  RouteContext* ctx = &context;

  // An unknown job of a visible compute has no stacks yet (ReadJobEvidenceQuery).
  listener.Get("/api/v1/computes/:id/jobs/:job/stacks", [ctx](const http::Request& req) {
    return AnswerHeavyConsoleJson(*ctx, req, [&](const Principal& p) -> Result<json> {
      EXPANSE_ASSIGN_OR_RETURN(const JobEvidenceQuery q, ReadJobEvidenceQuery(*ctx, p, req));
      EXPANSE_ASSIGN_OR_RETURN(int64_t limit, IntQueryParam(req, "limit", kDefaultStacksLimit, 1,
                                                            store::kMaxJobStacksLimit));
      // The totals and top frames are over the most frequent kMaxJobStacksLimit stacks, not
      // only the `limit` returned, so a short list still sums to the whole window; but over no
      // more than kMaxJobStacksBytes of them (`truncated` then says the least sampled are left
      // out), as 10,000 stacks of 16 KiB would be 160 MiB.
      EXPANSE_ASSIGN_OR_RETURN(
          auto stacks, ctx->jobs->JobStacks(q.compute.id, req.PathParam("job"), q.from_ms, q.to_ms,
                                            store::kMaxJobStacksLimit, store::kMaxJobStacksBytes));
      size_t folded_bytes = 0;
      for (const store::StackTotal& s : stacks)
        folded_bytes += s.folded.size();
      const bool truncated = folded_bytes > store::kMaxJobStacksBytes;
      if (truncated)
        stacks.pop_back();  // the one that passed the budget
      int64_t total = 0;
      json list = json::array();
      for (const auto& s : stacks) {
        total += s.count;
        if (list.size() < static_cast<size_t>(limit)) {
          list.push_back({{"folded", s.folded},
                          {"thread_state", s.thread_state},
                          {"count", s.count},
                          {"gpu_idle_count", s.gpu_idle_count}});
        }
      }
      json frames = json::array();
      for (const FrameCount& f : TopFrames(stacks, kTopFrames)) {
        frames.push_back(
            {{"frame", f.frame}, {"self_count", f.self_count}, {"total_count", f.total_count}});
      }
      // Windows that ended before this are deleted (--stack-retention), so a job that ended
      // before it has no stacks left, whatever was sampled.
      const int64_t retained_from_ms =
          ctx->stack_retention_ms > 0 ? ctx->clock.NowMs() - ctx->stack_retention_ms : 0;
      json out = {{"total_count", total},
                  {"distinct_stacks", stacks.size()},
                  {"truncated", truncated},
                  {"retained_from_ms", retained_from_ms},
                  {"stack_retention_ms", ctx->stack_retention_ms}};
      out["stacks"] = std::move(list);
      out["top_frames"] = std::move(frames);
      return out;
    });
  });
}

}  // namespace expanse::server
