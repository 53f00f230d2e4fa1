// The control plane's answers to the installer (docs/api.md, "/cp/v1"), decoded apart from the
// HTTP calls that fetch them (control_plane_client.h) so that each decoder can be held to any
// bytes (fuzz/fuzz_control_plane_answers.cc). TLS says who answered, not that the answer is
// well formed: a proxy, an older or newer server, or something that is not Expanse at all.
//
// Every decoder refuses a body that is not the documented shape by name (reason
// invalid_answer), never throws, and every text it hands back is clean (wire::IsCleanText:
// valid UTF-8, no control characters) and at most 4 KiB: the installer prints the compute's
// and organisation's names and the server's error messages to a terminal.

#ifndef EXPANSE_INSTALL_CONTROL_PLANE_ANSWERS_H_
#define EXPANSE_INSTALL_CONTROL_PLANE_ANSWERS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace expanse::install {

struct ComputeSummary {
  std::string id;
  std::string name;
  std::string state;
  std::string organization_slug;
  std::string organization_name;
  std::string control_plane_url;
  std::string data_plane_url;
  std::string pinned_daemon_version;
};

struct ExchangedCredential {
  std::string credential;  // exp_cc_…
  std::string credential_id;
  ComputeSummary compute;
};

struct Enrolment {
  bool enrolled = false;
  // The compute's last heartbeat on the server's clock; 0: none yet, or a server that does not
  // say.
  int64_t last_heartbeat_ms = 0;
};

// The longest text member an answer may carry.
inline constexpr size_t kMaxAnswerFieldBytes = 4096;

// 200 to POST /cp/v1/install-tokens/introspect: which compute a token belongs to.
Result<ComputeSummary> DecodeIntrospection(std::string_view body);
// 200 to POST /cp/v1/install-tokens/exchange: the credential (which must start "exp_cc_"), its
// id and the compute.
Result<ExchangedCredential> DecodeExchange(std::string_view body);
// 200 to GET /cp/v1/enrolment.
Result<Enrolment> DecodeEnrolment(std::string_view body);

// Any other status: a Status whose reason is the server's error code (snake_case), else
// "http_<status>", and whose message names `what` (the caller's own words, such as the method
// and path) with the status, the code and the server's message.
Status StatusFromControlPlaneAnswer(int http_status, std::string_view body, std::string_view what);

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_CONTROL_PLANE_ANSWERS_H_
