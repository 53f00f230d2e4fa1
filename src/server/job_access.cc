// The job routes' shared lookup: which job a request names, and whether its caller may read it.
#include <string>

#include "server/route_util.h"
#include "server/routes.h"

namespace expanse::server {

Result<ReadableJob> LookUpReadableJob(RouteContext& ctx, const Principal& principal,
                                      const http::Request& req) {
  ControlPlane::JobReader reader;
  EXPANSE_ASSIGN_OR_RETURN(store::Compute compute,
                           ctx.control.GetComputeForJobs(principal, req.PathParam("id"), &reader));
  EXPANSE_ASSIGN_OR_RETURN(store::JobRecord job,
                           ctx.jobs->GetJob(compute.id, req.PathParam("job")));
  // Another user's job answers as an unknown one: a jobs:own token learns nothing of it.
  if (reader.only_user && job.user != *reader.only_user)
    return NotFoundError("job " + job.job_id + " of compute " + compute.id + " not found");
  return ReadableJob{std::move(compute), std::move(job)};
}

Result<JobEvidenceQuery> ReadJobEvidenceQuery(RouteContext& ctx, const Principal& principal,
                                              const http::Request& req) {
  ControlPlane::JobReader reader;
  JobEvidenceQuery q;
  EXPANSE_ASSIGN_OR_RETURN(q.compute,
                           ctx.control.GetComputeForJobs(principal, req.PathParam("id"), &reader));
  if (reader.only_user)
    EXPANSE_RETURN_IF_ERROR(LookUpReadableJob(ctx, principal, req).status());
  EXPANSE_ASSIGN_OR_RETURN(q.from_ms, IntQueryParam(req, "from", 0, 0, INT64_MAX));
  EXPANSE_ASSIGN_OR_RETURN(q.to_ms, IntQueryParam(req, "to", 0, 0, INT64_MAX));
  if (q.from_ms != 0 && q.to_ms != 0 && q.to_ms <= q.from_ms)
    return InvalidArgumentError("to must be after from").WithReason("invalid_argument");
  return q;
}

}  // namespace expanse::server
