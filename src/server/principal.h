// Who is calling the console/query API, and what each role and token scope allows.
#ifndef EXPANSE_SERVER_PRINCIPAL_H_
#define EXPANSE_SERVER_PRINCIPAL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "store/store.h"

namespace expanse::server {

enum class Permission {
  kViewOwnJobs,      // the jobs (series, stacks, verdicts, ledger) of one's own SLURM user
  kView,             // computes, nodes, jobs, telemetry of the organisation
  kRegisterCompute,  // create computes and issue their install tokens (explicit for members)
  kManageCompute,    // re-issue tokens of any compute, deprovision
  kAdmin,            // members and the audit log
};

struct Principal {
  enum class Kind { kSession, kApiToken };
  Kind kind = Kind::kSession;
  int64_t user_id = 0;
  // API tokens only: the one organisation they act in, and their scopes.
  int64_t api_token_id = 0;
  int64_t token_org_id = 0;
  std::vector<std::string> scopes;

  // For the audit log: "user:<id>" or "token:<id>".
  std::string Actor() const;
};

// What a membership allows, before any token scope narrows it.
bool RoleAllows(const store::Membership& membership, Permission permission);
// What a token scope set allows: "jobs:own" -> kViewOwnJobs; "read" -> kView (and so
// kViewOwnJobs); "compute:register" -> kView, kRegisterCompute; "admin" -> everything.
bool ScopesAllow(const std::vector<std::string>& scopes, Permission permission);
bool IsKnownScope(const std::string& scope);

// What a caller learns about an organisation or a compute that does not exist or is not
// theirs: one status, code and message for both, so slugs and ids cannot be probed
// (docs/api.md). 404 not_found.
Status NoSuchOrganizationOrCompute();
// The store's lookups with their kNotFound turned into NoSuchOrganizationOrCompute(); the
// caller still checks the principal's permission on the result.
Result<store::Organization> LookUpOrganization(store::Store& store, std::string_view slug);
Result<store::Compute> LookUpCompute(store::Store& store, std::string_view compute_id);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_PRINCIPAL_H_
