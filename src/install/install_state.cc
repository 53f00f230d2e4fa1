#include "install/install_state.h"

#include <nlohmann/json.hpp>

#include "core/file_util.h"

namespace expanse::install {

using nlohmann::json;

std::string StatePath(const std::string& state_dir, const std::string& role) {
  return state_dir + "/" + role + ".json";
}

std::string RenderInstallState(const InstallState& s) {
  json j = {{"format", 1},
            {"role", s.role},
            {"daemon_version", s.daemon_version},
            {"highest_version", s.highest_version},
            {"shared_prefix", s.shared_prefix},
            {"config_path", s.config_path},
            {"user", s.user},
            {"unit_name", s.unit_name},
            {"unit_path", s.unit_path},
            {"slurm_conf", s.slurm_conf},
            {"wired_files", s.wired_files},
            {"files", s.files},
            {"trees", s.trees},
            {"profiling_agent", s.profiling_agent},
            {"sampler_bootstrap", s.sampler_bootstrap},
            {"cupti_mode", s.cupti_mode},
            {"installed_ms", s.installed_ms}};
  return j.dump(2) + "\n";
}

Result<InstallState> ParseInstallState(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || j.value("format", 0) != 1)
    return DataLossError("the install state is not a format-1 JSON document");
  try {
    InstallState s;
    s.role = j.value("role", "");
    s.daemon_version = j.value("daemon_version", "");
    s.highest_version = j.value("highest_version", "");
    s.shared_prefix = j.value("shared_prefix", "");
    s.config_path = j.value("config_path", "");
    s.user = j.value("user", "");
    s.unit_name = j.value("unit_name", "");
    s.unit_path = j.value("unit_path", "");
    s.slurm_conf = j.value("slurm_conf", "");
    s.wired_files = j.value("wired_files", std::vector<std::string>{});
    s.files = j.value("files", std::vector<std::string>{});
    s.trees = j.value("trees", std::vector<std::string>{});
    s.profiling_agent = j.value("profiling_agent", true);
    s.sampler_bootstrap = j.value("sampler_bootstrap", "");
    s.cupti_mode = j.value("cupti_mode", "");
    s.installed_ms = j.value("installed_ms", int64_t{0});
    if (s.role != "controller" && s.role != "sampler")
      return DataLossError("the install state names an unknown role '" + s.role + "'");
    for (const auto* list : {&s.wired_files, &s.files, &s.trees}) {
      for (const std::string& p : *list) {
        if (p.empty() || p.front() != '/' || p.find("/../") != std::string::npos)
          return DataLossError("the install state lists a path that is not absolute: " + p);
      }
    }
    return s;
  } catch (const json::exception& e) {
    return DataLossError(std::string("the install state has a field of the wrong type: ") +
                         e.what());
  }
}

Result<std::optional<InstallState>> LoadInstallState(const std::string& state_dir,
                                                     const std::string& role) {
  const std::string path = StatePath(state_dir, role);
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text, fs::ReadSmallFile(path, 1 << 20));
  if (!text)
    return std::optional<InstallState>();
  Result<InstallState> s = ParseInstallState(*text);
  if (!s.ok())
    return Status(s.status().code(), path + ": " + s.status().message());
  return std::optional<InstallState>(std::move(*s));
}

}  // namespace expanse::install
