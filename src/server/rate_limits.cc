#include <algorithm>

#include "server/routes.h"

namespace expanse::server {

Result<RateLimits> RateLimits::Default(Clock& clock, double credential_per_second) {
  RateLimits limits;
  // Guessing a password or a 192-bit token online must be hopeless: a handful of tries per
  // minute per address (and per account for logins), a short burst for honest retries.
  EXPANSE_ASSIGN_OR_RETURN(
      limits.login_per_address,
      http::RateLimiter::Create({.rate_per_second = 10.0 / 60, .burst = 10}, clock));
  EXPANSE_ASSIGN_OR_RETURN(
      limits.login_per_email,
      http::RateLimiter::Create({.rate_per_second = 5.0 / 60, .burst = 5}, clock));
  EXPANSE_ASSIGN_OR_RETURN(
      limits.token_per_address,
      http::RateLimiter::Create({.rate_per_second = 30.0 / 60, .burst = 20}, clock));
  // A daemon heartbeats every few seconds and uploads in batches; this leaves ample room.
  EXPANSE_ASSIGN_OR_RETURN(
      limits.per_credential,
      http::RateLimiter::Create({.rate_per_second = credential_per_second,
                                 .burst = std::max(100.0, 5 * credential_per_second)},
                                clock));
  EXPANSE_ASSIGN_OR_RETURN(limits.per_principal,
                           http::RateLimiter::Create({.rate_per_second = 50, .burst = 200}, clock));
  return limits;
}

}  // namespace expanse::server
