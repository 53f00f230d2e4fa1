#include "server/admin.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "server/control_plane.h"
#include "server/route_util.h"
#include "store/open_store.h"

namespace expanse::server {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "expanse-server admin: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

int RunBootstrap(const AdminFlags& flags) {
  auto store = store::OpenStore(flags.db_path);
  if (!store.ok())
    return Fail(store.status());
  SystemClock clock;
  ControlPlane control(**store, clock, ControlPlaneOptions{});
  auto boot = control.Bootstrap(flags.org_slug, flags.org_name, flags.email, flags.password,
                                flags.token_name);
  if (!boot.ok())
    return Fail(boot.status());
  nlohmann::json out = {{"organization", OrganizationJson(boot->org)},
                        {"user", {{"id", boot->user.id}, {"email", boot->user.email}}},
                        {"api_token", boot->api_token}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int RunAddUser(const AdminFlags& flags) {
  auto role = store::ParseRole(flags.role);
  if (!role.ok())
    return Fail(role.status());
  auto store = store::OpenStore(flags.db_path);
  if (!store.ok())
    return Fail(store.status());
  SystemClock clock;
  ControlPlane control(**store, clock, ControlPlaneOptions{});
  auto user = control.AddUser(flags.org_slug, flags.email, flags.password, *role,
                              flags.can_register_compute);
  if (!user.ok())
    return Fail(user.status());
  if (flags.slurm_user) {
    if (Status set = control.SetSlurmUser(flags.org_slug, flags.email, *flags.slurm_user);
        !set.ok())
      return Fail(set);
  }
  std::printf("%s\n", nlohmann::json({{"id", user->id}, {"email", user->email}}).dump().c_str());
  return 0;
}

int RunSetSlurmUser(const AdminFlags& flags) {
  auto store = store::OpenStore(flags.db_path);
  if (!store.ok())
    return Fail(store.status());
  SystemClock clock;
  ControlPlane control(**store, clock, ControlPlaneOptions{});
  if (Status set = control.SetSlurmUser(flags.org_slug, flags.email, flags.slurm_user.value_or(""));
      !set.ok())
    return Fail(set);
  std::printf(
      "%s\n",
      nlohmann::json({{"email", flags.email}, {"slurm_user", *flags.slurm_user}}).dump().c_str());
  return 0;
}

}  // namespace expanse::server
