// libFuzzer target for the controller's credential config (src/deploy/daemon_config.h), which
// the daemon reads at start from a file an operator may have edited by hand.
//
// Beyond "no crash, no throw, no sanitizer report": a config that parses renders to a
// document that parses back to the same values, so what the installer writes the daemon reads.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "deploy/daemon_config.h"

namespace {

bool Same(const expanse::deploy::DaemonConfig& a, const expanse::deploy::DaemonConfig& b) {
  return a.compute_id == b.compute_id && a.organization == b.organization &&
         a.credential_id == b.credential_id && a.credential == b.credential &&
         a.control_plane_url == b.control_plane_url && a.data_plane_url == b.data_plane_url &&
         a.shared_prefix == b.shared_prefix && a.daemon_user == b.daemon_user &&
         a.written_ms == b.written_ms;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = expanse::deploy::ParseDaemonConfig(text);
  if (!config.ok())
    return 0;
  auto again = expanse::deploy::ParseDaemonConfig(expanse::deploy::RenderDaemonConfig(*config));
  if (!again.ok() || !Same(*config, *again)) {
    std::fprintf(stderr, "fuzz_daemon_config: a parsed config does not survive render\n");
    std::abort();
  }
  return 0;
}
