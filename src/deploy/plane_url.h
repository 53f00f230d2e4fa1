// The check for a control- or data-plane URL that an operator pastes (install flags, the
// console's templates) or that a config file holds. Written by hand on purpose: the server and
// the templates must not link libcurl. The daemon's HTTP client applies net/url_policy.h (on
// libcurl's own parser) to every request as well, so a URL that slipped past this check would
// still never be fetched over plain HTTP off loopback.
#ifndef EXPANSE_DEPLOY_PLANE_URL_H_
#define EXPANSE_DEPLOY_PLANE_URL_H_

#include <string_view>

#include "core/status.h"

namespace expanse::deploy {

// kInvalidArgument (reason invalid_url) naming `field` unless `url` is https:// (or http:// to
// a loopback host, core/loopback.h) with a valid host and port, no user part, no fragment, and
// only characters RFC 3986 allows, within 2048 bytes.
Status CheckPlaneUrl(std::string_view field, std::string_view url);

}  // namespace expanse::deploy

#endif  // EXPANSE_DEPLOY_PLANE_URL_H_
