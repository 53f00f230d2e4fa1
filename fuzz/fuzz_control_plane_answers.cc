// The control plane's answers as the installer reads them (src/install/control_plane_answers.h):
// TLS says who answered, not that the answer is well formed (a proxy, an older or newer server,
// something else). Input: one selector byte, then the answer's bytes, read as
//   0: the token introspection,  1: the token exchange,  2: the enrolment,
//   3: an error answer, its HTTP status taken from the next two bytes (0 to 999, as libcurl
//      reads a status line's three digits).
// Properties:
// - nothing throws or crashes;
// - every text the installer prints or writes (the compute's id, name and state, the
//   organisation's name and slug, the plane URLs, the credential) is clean text (valid UTF-8,
//   no control characters) of at most 4 KiB;
// - an accepted exchange carries an exp_cc_ credential;
// - an error's reason is snake_case (the server's code or http_<status>) and its message clean.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/result.h"
#include "install/control_plane_answers.h"
#include "wire/field_reader.h"

namespace {

using namespace expanse::install;

bool Shown(std::string_view text) {
  return text.size() <= kMaxAnswerFieldBytes && expanse::wire::IsCleanText(text);
}

void CheckSummary(const ComputeSummary& s) {
  for (const std::string_view text :
       {std::string_view(s.id), std::string_view(s.name), std::string_view(s.state),
        std::string_view(s.organization_slug), std::string_view(s.organization_name),
        std::string_view(s.control_plane_url), std::string_view(s.data_plane_url),
        std::string_view(s.pinned_daemon_version)}) {
    if (!Shown(text))
      std::abort();
  }
}

void CheckError(int http_status, std::string_view body) {
  const expanse::Status s = StatusFromControlPlaneAnswer(http_status, body, "POST /cp/v1/x");
  if (s.ok() || s.reason().empty() || !expanse::wire::IsCleanText(s.message()))
    std::abort();
  if (!expanse::wire::IsName(s.reason(), 64, "_", false))
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      if (const expanse::Result<ComputeSummary> s = DecodeIntrospection(body); s.ok())
        CheckSummary(*s);
      break;
    case 1:
      if (const expanse::Result<ExchangedCredential> c = DecodeExchange(body); c.ok()) {
        if (!c->credential.starts_with("exp_cc_") || !Shown(c->credential) ||
            !Shown(c->credential_id))
          std::abort();
        CheckSummary(c->compute);
      }
      break;
    case 2:
      if (const expanse::Result<Enrolment> e = DecodeEnrolment(body);
          e.ok() && e->last_heartbeat_ms < 0)
        std::abort();
      break;
    default: {
      const int status =
          body.size() < 2
              ? 0
              : (static_cast<uint8_t>(body[0]) << 8 | static_cast<uint8_t>(body[1])) % 1000;
      CheckError(status, body.size() < 2 ? body : body.substr(2));
      break;
    }
  }
  return 0;
}
