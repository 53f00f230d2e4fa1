// The installer's calls to the control plane (docs/api.md, "/cp/v1"): introspect an install
// token without using it, exchange it for the compute credential, wait for the first heartbeat
// that carries a credential, and deprovision on uninstall. Bodies carry the token or
// credential; neither ever appears in an error message. The answers are decoded by
// control_plane_answers.h.

#ifndef EXPANSE_INSTALL_CONTROL_PLANE_CLIENT_H_
#define EXPANSE_INSTALL_CONTROL_PLANE_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "install/control_plane_answers.h"
#include "net/http_client.h"

namespace expanse::install {

struct ExchangeRequest {
  std::string hostname;
  std::string daemon_version;
  std::string slurm_version;
  std::string role = "controller";
};

class ControlPlaneClient {
 public:
  // `ca_file` as for net::HttpClient ("" = system trust store).
  static Result<ControlPlaneClient> Create(std::string control_plane_url, std::string ca_file);

  // Which compute the token belongs to; does not consume it. Errors keep the server's code as
  // the reason (install_token_invalid, install_token_expired, install_token_replaced, ...).
  Result<ComputeSummary> Introspect(std::string_view token);
  Result<ExchangedCredential> Exchange(std::string_view token, const ExchangeRequest& request);
  // True once a heartbeat carrying `credential` has arrived (later than `after_ms` on the
  // server's clock, when that is not 0); polls in ≤ 10 s long-polls until `timeout` has passed.
  Result<bool> WaitForHeartbeat(std::string_view credential, std::chrono::milliseconds timeout,
                                int64_t after_ms = 0);
  // The compute's last heartbeat on the server's clock (0: none yet, or a server that does not
  // say), the baseline a reinstall waits to see passed by its new daemon.
  Result<int64_t> LastHeartbeatMs(std::string_view credential);
  Status Deprovision(std::string_view credential);

  const std::string& url() const { return url_; }

 private:
  ControlPlaneClient(std::string url, std::shared_ptr<net::HttpClient> http)
      : url_(std::move(url)), http_(std::move(http)) {}
  Result<std::string> Call(const std::string& method, const std::string& path,
                           const std::string& body, std::string_view bearer);

  std::string url_;
  std::shared_ptr<net::HttpClient> http_;
};

}  // namespace expanse::install

#endif  // EXPANSE_INSTALL_CONTROL_PLANE_CLIENT_H_
