#include "capture/process_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace expanse::capture {
namespace {

std::string Env(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// Field 22 of /proc/self/stat; the command name (field 2) may hold spaces and parentheses, so
// fields are counted from its closing parenthesis.
uint64_t StartTicks() {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && (fields >> field); ++i) {
    if (i == 22)
      return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

}  // namespace

ProcessIdentity CurrentProcess(const std::function<const char*(const char*)>& getenv) {
  ProcessIdentity id;
  id.job_id = Env(getenv, "SLURM_JOB_ID");
  id.step_id = Env(getenv, "SLURM_STEP_ID");
  id.rank = Env(getenv, "SLURM_PROCID");
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    id.host = host;
    id.host = id.host.substr(0, id.host.find('.'));
    // The host names the agent's files: anything but letters, digits and '-' becomes '_'.
    for (char& c : id.host) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
        c = '_';
    }
  }
  id.pid = getpid();
  id.start_ticks = StartTicks();
  id.uid = getuid();
  return id;
}

bool SafeJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.size() > 64)
    return false;
  for (char c : job_id) {
    if (!((c >= '0' && c <= '9') || c == '_' || c == '+'))
      return false;
  }
  return true;
}

}  // namespace expanse::capture
