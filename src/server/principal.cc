#include "server/principal.h"

#include <algorithm>

namespace expanse::server {

std::string Principal::Actor() const {
  return kind == Kind::kApiToken ? "token:" + std::to_string(api_token_id)
                                 : "user:" + std::to_string(user_id);
}

bool RoleAllows(const store::Membership& membership, Permission permission) {
  switch (membership.role) {
    case store::Role::kOwner:
    case store::Role::kAdmin:
      return true;
    case store::Role::kMember:
      return permission == Permission::kView || permission == Permission::kViewOwnJobs ||
             (permission == Permission::kRegisterCompute && membership.can_register_compute);
    case store::Role::kViewer:
      return permission == Permission::kView || permission == Permission::kViewOwnJobs;
  }
  return false;
}

bool ScopesAllow(const std::vector<std::string>& scopes, Permission permission) {
  auto has = [&](const char* scope) {
    return std::find(scopes.begin(), scopes.end(), scope) != scopes.end();
  };
  if (has("admin"))
    return true;
  switch (permission) {
    case Permission::kViewOwnJobs:
      return has("jobs:own") || has("read") || has("compute:register");
    case Permission::kView:
      return has("read") || has("compute:register");
    case Permission::kRegisterCompute:
      return has("compute:register");
    case Permission::kManageCompute:
    case Permission::kAdmin:
      return false;
  }
  return false;
}

bool IsKnownScope(const std::string& scope) {
  return scope == "read" || scope == "jobs:own" || scope == "compute:register" || scope == "admin";
}

Status NoSuchOrganizationOrCompute() {
  return NotFoundError("no such organization or compute").WithReason("not_found");
}

namespace {
template <typename T>
Result<T> HideNotFound(Result<T> found) {
  if (!found.ok() && found.status().code() == StatusCode::kNotFound)
    return NoSuchOrganizationOrCompute();
  return found;
}
}  // namespace

Result<store::Organization> LookUpOrganization(store::Store& store, std::string_view slug) {
  return HideNotFound(store.GetOrganizationBySlug(slug));
}

Result<store::Compute> LookUpCompute(store::Store& store, std::string_view compute_id) {
  return HideNotFound(store.GetCompute(compute_id));
}

}  // namespace expanse::server
