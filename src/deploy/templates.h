// The two texts the console's Add compute panel offers for a SLURM compute, filled in with that
// compute's deployment values: a reusable controller install script, and a prompt that lets an
// AI assistant with shell access carry out the install. Neither ever holds a credential: the
// person types the install token into the script's hidden prompt. What the texts contain and
// how the script handles the token is in docs/formats/install-templates.md.

#ifndef EXPANSE_DEPLOY_TEMPLATES_H_
#define EXPANSE_DEPLOY_TEMPLATES_H_

#include <string>

#include "core/result.h"
#include "core/status.h"

namespace expanse::deploy {

// Where the controller's preflight leaves a file that workers look for to prove they see the
// same shared mount (`expanse compute install` writes it; the install script checks it).
inline constexpr char kPreflightSentinelName[] = ".expanse-preflight-sentinel";

struct TemplateValues {
  std::string daemon_version;     // e.g. 1.8.0 or v1.8.0-rc.1
  std::string shared_prefix;      // absolute path mounted on every node
  std::string control_plane_url;  // https://…, or http:// to a loopback host (core/loopback.h)
  std::string data_plane_url;     // same rule
};

// kInvalidArgument (reason invalid_template_value) naming the flag the value is for:
// a version that is not MAJOR.MINOR.PATCH[-pre][+build] with an optional leading v; a prefix
// that fails CheckAbsolutePath; a URL that is not https (or http to a loopback host), has a
// user part (credentials), a fragment, whitespace or characters outside RFC 3986.
Status ValidateTemplateValues(const TemplateValues& values);

// A bash script for a fresh controller install: reads the token (hidden prompt on a terminal,
// the first line of stdin otherwise), passes it to `expanse compute install` through sudo's
// environment, never as an argument, and runs the installer with every flag explicit.
Result<std::string> RenderInstallScript(const TemplateValues& values);

// Step-by-step instructions for an assistant: controller install (through the script above),
// samplers on static workers, verification, and the rule never to ask for, print or store the
// token.
Result<std::string> RenderAssistantPrompt(const TemplateValues& values);

}  // namespace expanse::deploy

#endif  // EXPANSE_DEPLOY_TEMPLATES_H_
