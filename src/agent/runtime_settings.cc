#include "agent/runtime_settings.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

namespace expanse::agent {
namespace {

Status ParseFlag(std::string_view key, std::string_view value, bool& out) {
  if (value == "1") {
    out = true;
  } else if (value == "0") {
    out = false;
  } else {
    return InvalidArgumentError(std::string(key) + "=\"" + std::string(value) +
                                "\": expected 0 or 1")
        .WithReason("invalid_setting");
  }
  return OkStatus();
}

// A decimal number in [min, max] ("0.5", "2", "1e1"); no sign, spaces, inf or nan.
Status ParseNumberInRange(std::string_view key, std::string_view value, double min, double max,
                          double& out) {
  double parsed = 0;
  const char* end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || error != std::errc() || stop != end || !std::isfinite(parsed) ||
      parsed < min || parsed > max) {
    return InvalidArgumentError(
               fmt::format("{}=\"{}\": expected a number from {} to {}", key, value, min, max))
        .WithReason("invalid_setting");
  }
  out = parsed;
  return OkStatus();
}

// A whole number in [min, max].
Status ParseIntegerInRange(std::string_view key, std::string_view value, int min, int max,
                           int& out) {
  int parsed = 0;
  const char* end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || error != std::errc() || stop != end || parsed < min || parsed > max) {
    return InvalidArgumentError(fmt::format("{}=\"{}\": expected a whole number from {} to {}", key,
                                            value, min, max))
        .WithReason("invalid_setting");
  }
  out = parsed;
  return OkStatus();
}

bool IsKnownNonExpanseKey(std::string_view key) {
  return key == "HTTPS_PROXY" || key == "https_proxy" || key == "NO_PROXY" || key == "no_proxy" ||
         key == "SSL_CERT_FILE";
}

}  // namespace

Status ApplySettings(const EnvFile& entries, const std::string& source, RuntimeSettings& settings) {
  for (const EnvEntry& e : entries.entries()) {
    const std::string_view key = e.key;
    const std::string& value = e.value;
    bool known = true;
    if (key == "EXPANSE_CUPTI_ENABLE") {
      EXPANSE_RETURN_IF_ERROR(ParseFlag(key, value, settings.cupti_enable));
    } else if (key == "EXPANSE_CUPTI_HELPER") {
      // Empty: the per-node install (FindCuptiHelper). A relative path is kept, not refused:
      // the daemon must not stop over it (as a bad EXPANSE_DCGMI costs only DCGM), and the
      // counter helper does not run it (it would resolve against the daemon's working
      // directory), its `cupti` capability saying why (CounterHelper::Describe).
      settings.cupti_helper = value;
    } else if (key == "EXPANSE_PROFILING_ENABLE") {
      EXPANSE_RETURN_IF_ERROR(ParseFlag(key, value, settings.profiling_enable));
    } else if (key == "EXPANSE_PROFILING_AGENT_ENABLE") {
      EXPANSE_RETURN_IF_ERROR(ParseFlag(key, value, settings.profiling_agent_enable));
    } else if (key == "EXPANSE_PYSPY") {
      settings.pyspy = value;
    } else if (key == "EXPANSE_DCGMI") {
      settings.dcgmi = value;
    } else if (key == "EXPANSE_DCGM_HOST") {
      if (value.empty()) {
        return InvalidArgumentError("EXPANSE_DCGM_HOST is empty: expected host:port")
            .WithReason("invalid_setting");
      }
      settings.dcgm_host = value;
    } else if (key == "EXPANSE_SEGMENT_UPLOAD_MODE") {
      if (value != "auto" && value != "direct" && value != "relay") {
        return InvalidArgumentError("EXPANSE_SEGMENT_UPLOAD_MODE=\"" + value +
                                    "\": expected auto, direct or relay")
            .WithReason("invalid_setting");
      }
      settings.segment_upload_mode = value;
    } else if (key == "EXPANSE_PYSTACKS_ENABLE") {
      EXPANSE_RETURN_IF_ERROR(ParseFlag(key, value, settings.pystacks_enable));
    } else if (key == "EXPANSE_PYSTACKS_BACKEND") {
      if (value != "auto" && value != "native" && value != "py-spy") {
        return InvalidArgumentError("EXPANSE_PYSTACKS_BACKEND=\"" + value +
                                    "\": expected auto, native or py-spy")
            .WithReason("invalid_setting");
      }
      settings.pystacks_backend = value;
    } else if (key == "EXPANSE_PYSTACKS_HZ") {
      EXPANSE_RETURN_IF_ERROR(ParseNumberInRange(key, value, 0.1, 10, settings.pystacks_hz));
    } else if (key == "EXPANSE_PYSTACKS_BURST_HZ") {
      EXPANSE_RETURN_IF_ERROR(ParseNumberInRange(key, value, 0.1, 10, settings.pystacks_burst_hz));
    } else if (key == "EXPANSE_PYSTACKS_BURST_SECONDS") {
      EXPANSE_RETURN_IF_ERROR(
          ParseIntegerInRange(key, value, 0, 600, settings.pystacks_burst_seconds));
    } else if (key == "EXPANSE_PYSTACKS_CPU_PERCENT") {
      EXPANSE_RETURN_IF_ERROR(
          ParseNumberInRange(key, value, 0.1, 10, settings.pystacks_cpu_percent));
    } else if (key == "EXPANSE_LIVE_DETECTION") {
      EXPANSE_RETURN_IF_ERROR(ParseFlag(key, value, settings.live_detection));
    } else if (key == "EXPANSE_LIVE_STUCK_AFTER_S") {
      EXPANSE_RETURN_IF_ERROR(
          ParseIntegerInRange(key, value, 10, 86400, settings.live_stuck_after_s));
    } else if (key == "EXPANSE_LIVE_NO_PROCESS_AFTER_S") {
      EXPANSE_RETURN_IF_ERROR(
          ParseIntegerInRange(key, value, 10, 86400, settings.live_no_process_after_s));
    } else if (key == "EXPANSE_PYSTACKS_WINDOW_SECONDS") {
      EXPANSE_RETURN_IF_ERROR(
          ParseIntegerInRange(key, value, 10, 3600, settings.pystacks_window_seconds));
    } else if (key == "EXPANSE_NVML_LIBRARY") {
      if (!value.starts_with('/')) {
        return InvalidArgumentError("EXPANSE_NVML_LIBRARY=\"" + value +
                                    "\": expected the absolute path of libnvidia-ml.so.1")
            .WithReason("invalid_setting");
      }
      settings.nvml_library = value;
    } else if (key == "HTTPS_PROXY" || key == "https_proxy") {
      settings.https_proxy = value;
    } else if (key == "NO_PROXY" || key == "no_proxy") {
      settings.no_proxy = value;
    } else if (key == "SSL_CERT_FILE") {
      settings.ssl_cert_file = value;
    } else {
      known = false;
      // Keys the daemon itself uses that are not operator settings.
      if (key.starts_with("EXPANSE_") && key != "EXPANSE_DAEMON_CONFIG" &&
          key != "EXPANSE_INSTALL_TOKEN" && !key.starts_with("EXPANSE_FAKE_")) {
        settings.unknown_keys.push_back(std::string(key) + " (" + source + ")");
      }
    }
    if (known || IsKnownNonExpanseKey(key))
      settings.sources.emplace_back(e.key, source);
  }
  return OkStatus();
}

Result<RuntimeSettings> LoadRuntimeSettings(const std::string& path, char** environ_entries) {
  std::map<std::string, std::string> environment;
  for (char** entry = environ_entries; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t eq = text.find('=');
    if (eq != std::string_view::npos)
      environment.insert_or_assign(std::string(text.substr(0, eq)),
                                   std::string(text.substr(eq + 1)));
  }
  return LoadRuntimeSettings(path, environment);
}

Result<RuntimeSettings> LoadRuntimeSettings(const std::string& path,
                                            const std::map<std::string, std::string>& environment) {
  RuntimeSettings settings;
  EnvFile from_environment;
  for (const auto& [key, value] : environment) {
    if (!key.starts_with("EXPANSE_") && !IsKnownNonExpanseKey(key))
      continue;
    // Entries that break the env-file invariant (not UTF-8, say) are not settings.
    (void)from_environment.Set(key, value);
  }
  EXPANSE_RETURN_IF_ERROR(ApplySettings(from_environment, "environment", settings));

  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return settings;
    return FailedPreconditionError("cannot read " + path + ": " + std::strerror(errno))
        .WithReason("settings_unreadable");
  }
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError("cannot read " + path + ": not a regular file")
        .WithReason("settings_unreadable");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) {
    return FailedPreconditionError("cannot read " + path + ": " + std::strerror(errno))
        .WithReason("settings_unreadable");
  }
  std::ostringstream text;
  text << file.rdbuf();
  if (text.str().size() > kMaxEnvFileBytes) {
    return InvalidArgumentError(path + " is larger than 1 MiB; is it the right file?")
        .WithReason("invalid_setting");
  }
  Result<EnvFile> parsed = ParseEnvFile(text.str());
  if (!parsed.ok()) {
    return InvalidArgumentError(path + ": " + parsed.status().message())
        .WithReason("invalid_setting");
  }
  Status applied = ApplySettings(*parsed, path, settings);
  if (!applied.ok()) {
    return InvalidArgumentError(path + ": " + applied.message()).WithReason("invalid_setting");
  }
  return settings;
}

}  // namespace expanse::agent
