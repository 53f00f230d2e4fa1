// Where `expanse job report` and `expanse jobs` find the server, the API token, the
// organisation and the compute (docs/report.md), and the exit statuses they end with.
//
// The token is a secret: it is read from EXPANSE_API_TOKEN (taken out of the environment as
// soon as the CLI starts, so no child inherits it) or from a file only its owner can read
// (--token-file), never from argv, and never printed; its bytes are wiped when dropped.
#ifndef EXPANSE_REPORT_REPORT_SETTINGS_H_
#define EXPANSE_REPORT_REPORT_SETTINGS_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace expanse::report {

// Exit statuses (docs/report.md#exit-statuses).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // a malformed answer, a refused parameter, a bug
inline constexpr int kExitUsage = 2;        // flags or settings missing or malformed
inline constexpr int kExitNotFound = 3;     // no such job, compute or organisation
inline constexpr int kExitAuth = 4;         // the token was refused or lacks the permission
inline constexpr int kExitUnreachable = 5;  // network, TLS, timeout, or the server failing (5xx)

// The exit status for a command's failure (kExitOk for an OK status).
int ExitCodeFor(const Status& status);
// A usage error: kInvalidArgument with reason "usage".
Status UsageError(std::string message);

inline constexpr char kApiTokenVariable[] = "EXPANSE_API_TOKEN";

// An API token whose bytes are overwritten when it is dropped. Move-only.
class ApiToken {
 public:
  ApiToken() = default;
  explicit ApiToken(std::string value) : value_(std::move(value)) {}
  ApiToken(ApiToken&& other) noexcept : value_(std::move(other.value_)) { other.Wipe(); }
  ApiToken& operator=(ApiToken&& other) noexcept;
  ApiToken(const ApiToken&) = delete;
  ApiToken& operator=(const ApiToken&) = delete;
  ~ApiToken() { Wipe(); }

  std::string_view view() const { return value_; }
  bool empty() const { return value_.empty(); }

 private:
  void Wipe();
  std::string value_;
};

// EXPANSE_API_TOKEN, wiped and unset; nullopt when unset or empty. Call before any thread or
// child process starts.
std::optional<ApiToken> TakeApiTokenFromEnvironment();

// The token from `token_file` when given (a regular file owned by this user and readable by no
// one else: mode 0600 or 0400; one line), else `from_environment`; a usage error naming both
// ways when neither gives one, or when the token is not shaped like one (exp_at_…).
Result<ApiToken> ObtainApiToken(std::optional<ApiToken> from_environment,
                                const std::string& token_file);

// The flags both commands share; "" = not given.
struct ConnectionFlags {
  std::string server;
  std::string cacert;
  std::string org;
  std::string compute;
};

struct Connection {
  std::string server_url{};  // without a trailing '/'
  std::string ca_file{};     // "" = the system's trust store
  std::string org{};
  std::string compute{};
};

// Reads an environment variable; nullopt when unset (tests pass their own).
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup ProcessEnvironment();

// Flags first, then EXPANSE_SERVER, SSL_CERT_FILE, EXPANSE_ORG, EXPANSE_COMPUTE. One usage
// error naming every missing setting (and its flag and variable), or a server URL that is not
// https (plain http only to a loopback address).
Result<Connection> ResolveConnection(const ConnectionFlags& flags, const EnvLookup& env,
                                     bool need_org, bool need_compute);

// SLURM's job id forms this accepts: "123", or an array task "123_4". A usage error otherwise.
Status CheckJobId(std::string_view job_id);

}  // namespace expanse::report

#endif  // EXPANSE_REPORT_REPORT_SETTINGS_H_
