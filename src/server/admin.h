#ifndef EXPANSE_SERVER_ADMIN_H_
#define EXPANSE_SERVER_ADMIN_H_

#include <optional>
#include <string>

namespace expanse::server {

struct AdminFlags {
  std::string db_path;
  std::string org_slug;
  std::string org_name;
  std::string email;
  std::string password;  // from the environment or stdin, never argv
  std::string token_name = "admin";
  std::string role = "member";
  bool can_register_compute = false;
  std::optional<std::string> slurm_user;  // add-user --slurm-user; required by set-slurm-user
};

// Prints {"organization":…, "user":…, "api_token":"exp_at_…"} on stdout. Exit code.
int RunBootstrap(const AdminFlags& flags);
int RunAddUser(const AdminFlags& flags);
// Sets (or with "" removes) a member's SLURM user, without their password.
int RunSetSlurmUser(const AdminFlags& flags);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ADMIN_H_
