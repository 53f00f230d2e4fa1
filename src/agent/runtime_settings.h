// The daemon's runtime settings: the keys of /etc/expanse/daemon.env the operator guide
// documents (docs/runtime-settings.md), parsed and checked in one place.
//
// Precedence follows systemd, which starts the daemon with Environment= from the unit and then
// EnvironmentFile=/etc/expanse/daemon.env, the file winning: the daemon reads its own
// environment first (the unit's values, e.g. EXPANSE_PROFILING_AGENT_ENABLE=0 rendered for
// --profiling-agent=false), then the file over it. Reading the file itself keeps a daemon
// started by hand (tests, `expanse-daemon diagnostics`) configured the same way.
#ifndef EXPANSE_AGENT_RUNTIME_SETTINGS_H_
#define EXPANSE_AGENT_RUNTIME_SETTINGS_H_

#include <map>
#include <string>
#include <vector>

#include "core/env_file.h"
#include "core/result.h"

namespace expanse::agent {

inline constexpr char kDefaultDaemonEnvPath[] = "/etc/expanse/daemon.env";

struct RuntimeSettings {
  bool cupti_enable = true;  // EXPANSE_CUPTI_ENABLE
  // EXPANSE_CUPTI_HELPER ("" = discovered/pinned). A relative path is kept: the counter helper
  // then runs nothing and its `cupti` capability says why.
  std::string cupti_helper;
  bool profiling_enable = true;              // EXPANSE_PROFILING_ENABLE
  bool profiling_agent_enable = true;        // EXPANSE_PROFILING_AGENT_ENABLE
  std::string pyspy;                         // EXPANSE_PYSPY ("" = bundled, then PATH)
  std::string dcgmi;                         // EXPANSE_DCGMI ("" = PATH)
  std::string dcgm_host = "localhost:5555";  // EXPANSE_DCGM_HOST
  std::string segment_upload_mode = "auto";  // EXPANSE_SEGMENT_UPLOAD_MODE: auto|direct|relay
  std::string https_proxy;                   // HTTPS_PROXY (or https_proxy)
  std::string no_proxy;                      // NO_PROXY (or no_proxy)
  std::string ssl_cert_file;                 // SSL_CERT_FILE
  // EXPANSE_NVML_LIBRARY: absolute path of the libnvidia-ml.so.1 to load ("" = the dynamic
  // loader's search). The --nvml-library flag wins over it.
  std::string nvml_library;

  // Python stack sampling of job processes (src/pystack).
  bool pystacks_enable = true;            // EXPANSE_PYSTACKS_ENABLE
  std::string pystacks_backend = "auto";  // EXPANSE_PYSTACKS_BACKEND: auto | native | py-spy
  double pystacks_hz = 1.0;               // EXPANSE_PYSTACKS_HZ, 0.1..10
  double pystacks_burst_hz = 10.0;        // EXPANSE_PYSTACKS_BURST_HZ, 0.1..10
  int pystacks_burst_seconds = 20;        // EXPANSE_PYSTACKS_BURST_SECONDS, 0..600 (0: no bursts)
  double pystacks_cpu_percent = 1.0;      // EXPANSE_PYSTACKS_CPU_PERCENT of one core, 0.1..10
  int pystacks_window_seconds = 60;       // EXPANSE_PYSTACKS_WINDOW_SECONDS, 10..3600

  // The controller's live detection (agent/live_detector.h): a running job stuck or without
  // processes on its GPUs this long gets a stack burst on all its nodes.
  bool live_detection = true;         // EXPANSE_LIVE_DETECTION
  int live_stuck_after_s = 600;       // EXPANSE_LIVE_STUCK_AFTER_S, 10..86400
  int live_no_process_after_s = 600;  // EXPANSE_LIVE_NO_PROCESS_AFTER_S, 10..86400

  // EXPANSE_* keys the daemon does not know: almost always a typo, so they are reported.
  std::vector<std::string> unknown_keys;
  // Where each value came from, for diagnostics: key -> "environment" or the file path.
  std::vector<std::pair<std::string, std::string>> sources;
};

// Applies `entries` (from the environment or the file) over `settings`. A bad value fails with
// its key and the accepted values, e.g. `EXPANSE_CUPTI_ENABLE="yes": expected 0 or 1`.
Status ApplySettings(const EnvFile& entries, const std::string& source, RuntimeSettings& settings);

// The process environment, then the file at `path` (a missing file is fine: every setting
// has a default; an unreadable or malformed one is an error naming the path).
Result<RuntimeSettings> LoadRuntimeSettings(const std::string& path,
                                            const std::map<std::string, std::string>& environment);
// The same with the environment as `environ` holds it ("NAME=value" entries, null-terminated).
Result<RuntimeSettings> LoadRuntimeSettings(const std::string& path, char** environ_entries);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_RUNTIME_SETTINGS_H_
