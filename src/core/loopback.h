// Which hosts count as loopback: the one rule behind "plain HTTP only where no other
// machine can connect", for listeners (http), outgoing URLs (net) and the URLs an
// operator pastes into the install script (deploy).
#ifndef EXPANSE_CORE_LOOPBACK_H_
#define EXPANSE_CORE_LOOPBACK_H_

#include <string_view>

namespace expanse {

// True for "localhost", an IPv4 address in 127.0.0.0/8, "::1" and "::ffff:127.x.y.z", the
// IPv6 forms also in URL brackets ("[::1]"). Other names are false even when they resolve
// to loopback: resolution can change after the check, the rule must not.
bool IsLoopbackHost(std::string_view host);

}  // namespace expanse

#endif  // EXPANSE_CORE_LOOPBACK_H_
