// Which listen addresses count as loopback, for the rule that plain HTTP is served
// only where no other machine can connect.

#ifndef EXPANSE_HTTP_HOST_H_
#define EXPANSE_HTTP_HOST_H_

#include <string_view>

namespace expanse::http {

// True for "localhost", an IPv4 address in 127.0.0.0/8, "::1", and "::ffff:127.x.y.z".
// Other names are false even when they resolve to loopback: resolution can change
// after the check, the rule must not.
bool IsLoopbackHost(std::string_view host);

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_HOST_H_
