#include <algorithm>

#include "server/routes.h"

namespace expanse::server {

Result<RateLimits> RateLimits::Default(Clock& clock, double credential_per_second) {
  RateLimits limits;
  // Guessing a password or a 192-bit token online must be hopeless: a handful of tries per
  // minute per address (and per account for logins), a short burst for honest retries.
  // Every sign-in request from an address counts, a malformed body included, and an address
  // with none left is refused before its body is parsed. The token routes and every
  // authenticated route take their token before parsing too, so no parse is free.
  EXPANSE_ASSIGN_OR_RETURN(
      limits.login_per_address,
      http::RateLimiter::Create({.rate_per_second = 10.0 / 60, .burst = 10}, clock));
  EXPANSE_ASSIGN_OR_RETURN(
      limits.login_per_email,
      http::RateLimiter::Create({.rate_per_second = 5.0 / 60, .burst = 5}, clock));
  // Many addresses guessing at one account: 100 an hour (burst 100) over all of them, which
  // caps online guessing at ~2,400 a day per account while its owner, signing in from an
  // address of their own, stays under both limits.
  EXPANSE_ASSIGN_OR_RETURN(
      limits.login_per_account,
      http::RateLimiter::Create({.rate_per_second = 100.0 / 3600, .burst = 100}, clock));
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
