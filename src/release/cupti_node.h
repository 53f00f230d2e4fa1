// A node's CUPTI build on the shared mount. The controller install leaves every signed CUPTI
// archive of the release in <prefix>/lib/cupti-artifacts/ (each with its .sig, plus the public key
// that verified them), so workers need no outbound access; each node then picks the variant its
// own NVIDIA driver supports and unpacks it into <prefix>/lib/cupti-nodes/<host>/. Called by the
// installer (controller and sampler roles) and by a worker's Prolog bootstrap.

#ifndef EXPANSE_RELEASE_CUPTI_NODE_H_
#define EXPANSE_RELEASE_CUPTI_NODE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::release {

inline constexpr char kCuptiArtifactsDir[] = "lib/cupti-artifacts";
inline constexpr char kCuptiNodesDir[] = "lib/cupti-nodes";
inline constexpr char kArtifactsKeyName[] = "release.pub";
// <prefix>/lib/cupti-nodes/<host>/NOTE: the note of the node's last EnsureNodeCupti, one line of
// at most this many bytes (the sampler's cupti capability quotes it when the helper is missing).
inline constexpr char kNodeCuptiNoteName[] = "NOTE";
inline constexpr size_t kMaxNodeCuptiNoteBytes = 1024;

struct NodeCupti {
  std::string variant;   // "" when the node gets none
  std::string dir;       // <prefix>/lib/cupti-nodes/<host>, when variant is set
  bool changed = false;  // unpacked now (new, or another variant/version than before)
  std::string note;      // for logs: what was chosen and why, or why nothing was
};

// The note EnsureNodeCupti left for the node whose helper is `helper_path` (the installed
// <prefix>/lib/cupti-nodes/<host>/bin/expanse-cupti-helper; "" for any other path, or without a
// note), made printable: control characters become '?'. A link is not followed.
std::string NodeCuptiNoteFor(const std::string& helper_path);

// The NVIDIA driver version from nvidia-smi ("580.159.04"), or nullopt with the reason in `why`.
std::optional<std::string> LocalDriverVersion(std::string& why);

// Verifies the staged archives with `key_pem` ("" = the key stored beside them, else the
// embedded release key), selects by `driver` (or the `pinned` variant) and makes
// <prefix>/lib/cupti-nodes/<host> hold exactly that build, replacing another one in one rename.
// Never fails: missing CUPTI must not stop anything, so every problem ends up in `note`, which
// is also left in <prefix>/lib/cupti-nodes/<host>/NOTE (kNodeCuptiNoteName).
NodeCupti EnsureNodeCupti(const std::string& prefix, const std::string& host,
                          const std::optional<std::string>& driver, std::string_view pinned,
                          std::string_view key_pem = "");

}  // namespace expanse::release

#endif  // EXPANSE_RELEASE_CUPTI_NODE_H_
