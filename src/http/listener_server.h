// Internal to the http module: the httplib server behind a Listener.
//
// httplib::Server keeps its listening socket in a protected member and only closes
// it from stop(), which does nothing before listen_after_bind() has run; a listener
// that was bound but never started would leak the socket. The subclass below gives
// the Listener that socket, to close it and to check which address it is bound to.

#ifndef EXPANSE_HTTP_LISTENER_SERVER_H_
#define EXPANSE_HTTP_LISTENER_SERVER_H_

#include <httplib.h>
#include <unistd.h>

#include <memory>

#include "http/listener.h"

namespace expanse::http {

class ListenSocketAccess {
 public:
  virtual ~ListenSocketAccess() = default;
  virtual int listen_socket() const = 0;
  // Only for a server whose listen loop never ran (or has returned).
  virtual void CloseListenSocket() = 0;
};

template <typename Base>
class AccessibleServer final : public Base, public ListenSocketAccess {
 public:
  using Base::Base;
  int listen_socket() const override { return this->svr_sock_; }
  void CloseListenSocket() override {
    const int sock = this->svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) {
      close(sock);
    }
  }
};

struct Listener::Server {
  std::unique_ptr<httplib::Server> http;  // an AccessibleServer<Server or SSLServer>
  ListenSocketAccess* socket = nullptr;   // the same object
};

}  // namespace expanse::http

#endif  // EXPANSE_HTTP_LISTENER_SERVER_H_
