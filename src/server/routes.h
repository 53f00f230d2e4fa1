// HTTP bindings of the control plane (for installers and daemons) and of the console/query API.
// See docs/api.md for every endpoint, its body and its error codes.
#ifndef EXPANSE_SERVER_ROUTES_H_
#define EXPANSE_SERVER_ROUTES_H_

#include <memory>

#include "core/clock.h"
#include "http/listener.h"
#include "http/rate_limiter.h"
#include "server/control_plane.h"

namespace expanse::server {

// Brute-force and flood protection. Keys: client address, email, credential.
struct RateLimits {
  std::unique_ptr<http::RateLimiter> login_per_address;
  std::unique_ptr<http::RateLimiter> login_per_email;
  std::unique_ptr<http::RateLimiter> token_per_address;  // introspect and exchange
  std::unique_ptr<http::RateLimiter> per_credential;     // daemon calls
  std::unique_ptr<http::RateLimiter> per_principal;      // console and scripts

  static Result<RateLimits> Default(Clock& clock);
};

struct RouteContext {
  ControlPlane& control;
  Clock& clock;
  RateLimits& limits;
  bool secure_cookies = true;  // false only when the console is plain HTTP on loopback
};

void RegisterControlPlaneRoutes(http::Listener& listener, RouteContext& context);
void RegisterConsoleApiRoutes(http::Listener& listener, RouteContext& context);
void RegisterHealthRoute(http::Listener& listener, std::string_view plane);

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_ROUTES_H_
