// Test-only: a listening TCP socket on 127.0.0.1 at a port the kernel picks, for the tests'
// hand-written servers (a proxy that refuses, a receiver that holds a request). Header-only so
// that any module's tests can use it without linking more.
#ifndef EXPANSE_CORE_TEST_LOOPBACK_H_
#define EXPANSE_CORE_TEST_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace expanse::testing {

// The socket, with its port in *port. Failing throws, which GoogleTest reports as a failure of
// the test that wanted it.
inline int ListenOnLoopback(int backlog, int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  auto* generic = reinterpret_cast<sockaddr*>(&address);
  if (fd < 0 || ::bind(fd, generic, length) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, generic, &length) != 0) {
    const int error = errno;
    if (fd >= 0)
      ::close(fd);
    throw std::system_error(error, std::generic_category(), "a loopback listening socket");
  }
  *port = ntohs(address.sin_port);
  return fd;
}

}  // namespace expanse::testing

#endif  // EXPANSE_CORE_TEST_LOOPBACK_H_
