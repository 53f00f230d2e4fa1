#include "install/install_state.h"

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

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
            {"cupti_variant", s.cupti_variant},
            {"bundled_pyspy", s.bundled_pyspy},
            {"installed_ms", s.installed_ms}};
  return j.dump(2) + "\n";
}

// The state file is the installer's own, but it outlives versions and can be damaged or edited:
// it is read with wire's checked reader, and a member of the wrong type is a refusal naming it.
Result<InstallState> ParseInstallState(const std::string& text) {
  constexpr size_t kMaxText = 4096;
  constexpr size_t kMaxPaths = 100'000;
  constexpr wire::Need kOptional = wire::Need::kOptional;
  Result<json> j = wire::ParseJson(text, wire::JsonLimits{.max_depth = 4});
  if (!j.ok() || !j->is_object())
    return DataLossError("the install state is not a format-1 JSON document");
  Result<wire::FieldReader> reader = wire::FieldReader::Object(*j, "install state", "bad_state");
  if (!reader->Expect("format", 1).ok())
    return DataLossError("the install state is not a format-1 JSON document");
  const wire::FieldReader& r = *reader;
  InstallState s;
  Status status = [&]() -> Status {
    for (auto [key, field] :
         {std::pair{"role", &s.role}, std::pair{"daemon_version", &s.daemon_version},
          std::pair{"highest_version", &s.highest_version},
          std::pair{"shared_prefix", &s.shared_prefix}, std::pair{"config_path", &s.config_path},
          std::pair{"user", &s.user}, std::pair{"unit_name", &s.unit_name},
          std::pair{"unit_path", &s.unit_path}, std::pair{"slurm_conf", &s.slurm_conf},
          std::pair{"sampler_bootstrap", &s.sampler_bootstrap},
          std::pair{"cupti_mode", &s.cupti_mode}, std::pair{"cupti_variant", &s.cupti_variant}}) {
      EXPANSE_ASSIGN_OR_RETURN(*field, r.Text(key, kMaxText, kOptional));
    }
    for (auto [key, list] : {std::pair{"wired_files", &s.wired_files}, std::pair{"files", &s.files},
                             std::pair{"trees", &s.trees}}) {
      EXPANSE_ASSIGN_OR_RETURN(*list, r.Texts(key, kMaxPaths, kMaxText, kOptional));
    }
    EXPANSE_ASSIGN_OR_RETURN(s.profiling_agent, r.Bool("profiling_agent", true));
    // A state written before these were recorded: what those installers always did.
    EXPANSE_ASSIGN_OR_RETURN(s.bundled_pyspy, r.Bool("bundled_pyspy", true));
    EXPANSE_ASSIGN_OR_RETURN(s.installed_ms, r.Int("installed_ms", 0, wire::kMaxTimeMs, kOptional));
    return OkStatus();
  }();
  if (!status.ok())
    return DataLossError("the install state has a field of the wrong type: " + status.message());
  if (s.role != "controller" && s.role != "sampler")
    return DataLossError("the install state names an unknown role '" + s.role + "'");
  for (const auto* list : {&s.wired_files, &s.files, &s.trees}) {
    for (const std::string& p : *list) {
      if (p.empty() || p.front() != '/' || p.find("/../") != std::string::npos)
        return DataLossError("the install state lists a path that is not absolute: " + p);
    }
  }
  return s;
}

Result<std::optional<InstallState>> LoadInstallState(Host& host, const std::string& state_dir,
                                                     const std::string& role) {
  const std::string path = StatePath(state_dir, role);
  EXPANSE_ASSIGN_OR_RETURN(std::optional<std::string> text, host.ReadFile(path, 1 << 20));
  if (!text)
    return std::optional<InstallState>();
  Result<InstallState> s = ParseInstallState(*text);
  if (!s.ok())
    return Status(s.status().code(), path + ": " + s.status().message());
  return std::optional<InstallState>(std::move(*s));
}

}  // namespace expanse::install
