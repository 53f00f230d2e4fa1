#include "report/report_settings.h"

#include <fcntl.h>
#include <string.h>  // explicit_bzero
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/file_util.h"
#include "core/quote.h"
#include "net/url_policy.h"

namespace expanse::report {
namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

std::string Octal(mode_t mode) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%04o", static_cast<unsigned>(mode & 07777));
  return buffer;
}

// exp_at_ and URL-safe characters: anything else is a mistake (a pasted quote, the wrong file)
// and is refused before it is sent anywhere.
bool TokenShaped(std::string_view token) {
  if (!token.starts_with("exp_at_") || token.size() <= 7 || token.size() > 512)
    return false;
  for (char c : token) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

Result<ApiToken> ReadTokenFile(const std::string& path) {
  const std::string name = "--token-file " + QuoteForMessage(path, 200);
  fs::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid())
    return UsageError(name + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0)
    return UsageError(name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return UsageError(name + " is not a regular file");
  if (st.st_uid != geteuid()) {
    return UsageError(name + " belongs to uid " + std::to_string(st.st_uid) +
                      ", not to you: the token must be your own");
  }
  if ((st.st_mode & 077) != 0) {
    return UsageError(name + " can be read by others (mode " + Octal(st.st_mode) +
                      "): run chmod 600 on it, and replace the token if others could read it");
  }
  std::string text;
  if (!fs::ReadAll(fd.get(), text, kMaxTokenFileBytes + 1))
    return UsageError(name + ": " + std::strerror(errno));
  ApiToken holder{std::move(text)};  // wiped whatever happens next
  std::string_view token = holder.view();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
    token.remove_suffix(1);
  if (holder.view().size() > kMaxTokenFileBytes || !TokenShaped(token))
    return UsageError(name + " does not hold an API token (one line, exp_at_…)");
  return ApiToken(std::string(token));
}

}  // namespace

int ExitCodeFor(const Status& status) {
  if (status.ok())
    return kExitOk;
  if (status.reason() == "usage")
    return kExitUsage;
  switch (status.code()) {
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return kExitAuth;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    default:
      return kExitFailed;
  }
}

Status UsageError(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("usage");
}

ApiToken& ApiToken::operator=(ApiToken&& other) noexcept {
  if (this != &other) {
    Wipe();
    value_ = std::move(other.value_);
    other.Wipe();
  }
  return *this;
}

void ApiToken::Wipe() {
  explicit_bzero(value_.data(), value_.size());
  value_.clear();
}

std::optional<ApiToken> TakeApiTokenFromEnvironment() {
  const char* v = std::getenv(kApiTokenVariable);  // NOLINT(concurrency-mt-unsafe): start-up
  std::optional<ApiToken> out;
  if (v != nullptr && *v != '\0')
    out.emplace(std::string(v));
  if (v != nullptr) {
    explicit_bzero(const_cast<char*>(v), std::strlen(v));
    unsetenv(kApiTokenVariable);
  }
  return out;
}

Result<ApiToken> ObtainApiToken(std::optional<ApiToken> from_environment,
                                const std::string& token_file) {
  if (!token_file.empty())
    return ReadTokenFile(token_file);
  if (!from_environment || from_environment->empty()) {
    return UsageError(
        "no API token: set EXPANSE_API_TOKEN or pass --token-file FILE (mode 0600); a token "
        "with the read scope is enough (docs/report.md)");
  }
  if (!TokenShaped(from_environment->view()))
    return UsageError("EXPANSE_API_TOKEN does not hold an API token (exp_at_…)");
  return std::move(*from_environment);
}

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): one thread
    if (v == nullptr || *v == '\0')
      return std::nullopt;
    return std::string(v);
  };
}

Result<Connection> ResolveConnection(const ConnectionFlags& flags, const EnvLookup& env,
                                     bool need_org, bool need_compute) {
  const auto pick = [&](const std::string& flag, const char* variable) {
    return !flag.empty() ? flag : env(variable).value_or("");
  };
  Connection c;
  c.server_url = pick(flags.server, "EXPANSE_SERVER");
  c.ca_file = pick(flags.cacert, "SSL_CERT_FILE");
  c.org = pick(flags.org, "EXPANSE_ORG");
  c.compute = pick(flags.compute, "EXPANSE_COMPUTE");
  std::vector<std::string> missing;
  if (c.server_url.empty())
    missing.push_back("the server URL (--server or EXPANSE_SERVER)");
  if (need_org && c.org.empty())
    missing.push_back("the organisation (--org or EXPANSE_ORG)");
  if (need_compute && c.compute.empty())
    missing.push_back("the compute id (--compute or EXPANSE_COMPUTE)");
  if (!missing.empty()) {
    std::string text = "missing ";
    for (size_t i = 0; i < missing.size(); ++i)
      text += (i == 0 ? "" : i + 1 == missing.size() ? " and " : ", ") + missing[i];
    return UsageError(text);
  }
  while (c.server_url.size() > 1 && c.server_url.back() == '/')
    c.server_url.pop_back();
  if (Status allowed = net::CheckUrlAllowed(c.server_url); !allowed.ok()) {
    return UsageError(
        "server URL " + QuoteForMessage(c.server_url, 200) +
        ": use https:// (plain http only to a loopback address): " + allowed.message());
  }
  return c;
}

Status CheckJobId(std::string_view job_id) {
  const auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == s.npos;
  };
  const size_t underscore = job_id.find('_');
  const bool ok = underscore == std::string_view::npos ? digits(job_id)
                                                       : digits(job_id.substr(0, underscore)) &&
                                                             digits(job_id.substr(underscore + 1));
  if (!ok) {
    return UsageError("job id " + QuoteForMessage(job_id) +
                      ": expected SLURM's form, 123 or (an array task) 123_4");
  }
  return OkStatus();
}

}  // namespace expanse::report
