#include "install/daemon_env.h"

#include <string>
#include <utility>

#include "core/path_rules.h"

namespace expanse::install {
namespace {

// Written at the top of a file the installer creates; an existing file is never given one.
constexpr std::string_view kNewFileHeader =
    "# Runtime settings for this node's Expanse service (expanse-daemon or expanse-sampler).\n"
    "# `expanse compute install` adds its network settings here and keeps every other line.\n"
    "# Restart the service after editing. Never put the install token in this file.\n";

Status InvalidSetting(std::string message) {
  return InvalidArgumentError(std::move(message)).WithReason("invalid_env_setting");
}

Status SecretRefused(std::string message) {
  return InvalidArgumentError("refusing to write daemon.env: " + std::move(message) +
                              "; the install token and credentials are never stored there")
      .WithReason("secret_in_env_file");
}

bool IsNetworkKey(std::string_view key) {
  return key == "HTTPS_PROXY" || key == "https_proxy" || key == "NO_PROXY" || key == "no_proxy" ||
         key == "SSL_CERT_FILE";
}

// Values may hold proxy credentials, so messages name the key only.
Status CheckValue(std::string_view key, std::string_view value) {
  for (char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      return InvalidSetting("the value of " + std::string(key) +
                            " contains a control character (newline, tab, ...)");
    }
  }
  return OkStatus();
}

Status SetChecked(EnvFile& updates, std::string_view key, std::string_view value) {
  EXPANSE_RETURN_IF_ERROR(CheckValue(key, value));
  Status set = updates.Set(key, value);
  if (!set.ok())
    return InvalidSetting("cannot set " + std::string(key) + ": " + set.message());
  return OkStatus();
}

// Sets `upper`, and `lower` too when the file already spells it that way: libcurl reads the
// lower-case name first, so a stale lower-case entry would win over the one we write.
Status SetProxyKey(EnvFile& updates, const EnvFile& existing, std::string_view upper,
                   std::string_view lower, const std::optional<std::string>& value) {
  if (!value)
    return OkStatus();
  EXPANSE_RETURN_IF_ERROR(SetChecked(updates, upper, *value));
  if (existing.Get(lower))
    EXPANSE_RETURN_IF_ERROR(SetChecked(updates, lower, *value));
  return OkStatus();
}

Result<EnvFile> BuildUpdates(const EnvFile& existing, const SeedValues& values) {
  EnvFile updates;
  const NetworkSettings& network = values.network;
  EXPANSE_RETURN_IF_ERROR(
      SetProxyKey(updates, existing, "HTTPS_PROXY", "https_proxy", network.https_proxy));
  EXPANSE_RETURN_IF_ERROR(SetProxyKey(updates, existing, "NO_PROXY", "no_proxy", network.no_proxy));
  if (network.ssl_cert_file) {
    Status absolute = CheckAbsolutePath("SSL_CERT_FILE", *network.ssl_cert_file);
    if (!absolute.ok())
      return InvalidSetting(absolute.message());
    EXPANSE_RETURN_IF_ERROR(SetChecked(updates, "SSL_CERT_FILE", *network.ssl_cert_file));
  }
  for (const EnvEntry& entry : values.runtime_settings) {
    if (!IsValidEnvKey(entry.key)) {
      return InvalidSetting("runtime setting key \"" + entry.key +
                            "\" is not valid: keys match [A-Za-z_][A-Za-z0-9_]*");
    }
    if (entry.key == kInstallTokenKey)
      return SecretRefused(std::string(kInstallTokenKey) + " was passed as a runtime setting");
    if (IsNetworkKey(entry.key)) {
      return InvalidSetting(entry.key +
                            " is a network setting; pass it as one, not as a runtime setting");
    }
    EXPANSE_RETURN_IF_ERROR(SetChecked(updates, entry.key, entry.value));
  }
  return updates;
}

Status CheckNoSecrets(const std::string& text, const SeedValues& values) {
  Result<EnvFile> parsed = ParseEnvFile(text);
  if (!parsed.ok())  // MergeEnvFile's output always parses; this is a bug if reached.
    return InternalError("seeded daemon.env does not parse: " + parsed.status().message());
  for (const EnvEntry& entry : parsed->entries()) {
    if (entry.key == kInstallTokenKey) {
      return SecretRefused("the existing file sets " + std::string(kInstallTokenKey) +
                           "; remove that line");
    }
  }
  for (const std::string& secret : values.secrets) {
    if (secret.empty())
      continue;
    // Values are checked after unquoting as well as in the raw text: an escaped rendering
    // ("\$") would hide a secret from a plain text search.
    for (const EnvEntry& entry : parsed->entries()) {
      if (entry.value.find(secret) != std::string::npos)
        return SecretRefused("the value of " + entry.key + " contains a secret");
    }
    if (text.find(secret) != std::string::npos)
      return SecretRefused("the file's text (a comment?) contains a secret; remove it");
  }
  return OkStatus();
}

void AddFirstDifferent(const EnvFile& from, const EnvFile& other, std::vector<std::string>& only,
                       std::vector<std::string>* changed) {
  for (const EnvEntry& entry : from.entries()) {
    const std::optional<std::string_view> value = other.Get(entry.key);
    if (!value) {
      only.push_back(entry.key);
    } else if (changed != nullptr && *value != entry.value) {
      changed->push_back(entry.key);
    }
  }
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names)
    out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

NetworkSettings NetworkSettingsFromEnvironment(
    const std::map<std::string, std::string>& environment) {
  auto first_set = [&](std::initializer_list<const char*> names) -> std::optional<std::string> {
    for (const char* name : names) {
      auto it = environment.find(name);
      if (it != environment.end() && !it->second.empty())
        return it->second;
    }
    return std::nullopt;
  };
  NetworkSettings settings;
  settings.https_proxy = first_set({"https_proxy", "HTTPS_PROXY"});
  settings.no_proxy = first_set({"no_proxy", "NO_PROXY"});
  settings.ssl_cert_file = first_set({"SSL_CERT_FILE"});
  return settings;
}

Result<std::string> SeedDaemonEnv(std::string_view existing_text, const SeedValues& values) {
  Result<EnvFile> existing = ParseEnvFile(existing_text);
  if (!existing.ok()) {
    return InvalidArgumentError("daemon.env: " + existing.status().message() +
                                "; fix the file by hand, the installer does not rewrite a file "
                                "it cannot read")
        .WithReason("env_file_invalid");
  }
  EXPANSE_ASSIGN_OR_RETURN(EnvFile updates, BuildUpdates(*existing, values));
  const std::string base =
      existing_text.empty() ? std::string(kNewFileHeader) : std::string(existing_text);
  EXPANSE_ASSIGN_OR_RETURN(std::string merged, MergeEnvFile(base, updates));
  EXPANSE_RETURN_IF_ERROR(CheckNoSecrets(merged, values));
  return merged;
}

Result<EnvKeyChanges> DiffEnvKeys(std::string_view before_text, std::string_view after_text) {
  EXPANSE_ASSIGN_OR_RETURN(EnvFile before, ParseEnvFile(before_text));
  EXPANSE_ASSIGN_OR_RETURN(EnvFile after, ParseEnvFile(after_text));
  EnvKeyChanges changes;
  AddFirstDifferent(after, before, changes.added, &changes.changed);
  AddFirstDifferent(before, after, changes.removed, nullptr);
  return changes;
}

std::string DescribeEnvKeyChanges(std::string_view path, const EnvKeyChanges& changes) {
  std::string out(path);
  out += ':';
  if (changes.empty())
    return out + " unchanged";
  std::string separator = " ";
  auto add = [&](const char* verb, const std::vector<std::string>& names) {
    if (names.empty())
      return;
    out += separator + verb + " " + JoinNames(names);
    separator = "; ";
  };
  add("added", changes.added);
  add("changed", changes.changed);
  add("removed", changes.removed);
  return out;
}

}  // namespace expanse::install
