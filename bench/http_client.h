// A minimal blocking HTTP/1.1 client for the ingest load generator: one keep-alive
// connection to a loopback server, requests with Content-Length, responses with
// Content-Length (what cpp-httplib and VictoriaMetrics send for these endpoints).
// Bench-only; the product's client is libcurl in the daemon.
#ifndef EXPANSE_BENCH_HTTP_CLIENT_H_
#define EXPANSE_BENCH_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace expanse::bench {

struct HttpResponse {
  int status = 0;  // 0: transport failure
  std::string body;
};

class HttpConnection {
 public:
  HttpConnection(std::string host, int port) : host_(std::move(host)), port_(port) {}
  ~HttpConnection() { Close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // headers: full lines without CRLF, e.g. "Content-Type: application/zstd".
  HttpResponse Request(std::string_view method, std::string_view target,
                       const std::vector<std::string>& headers, std::string_view body) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (fd_ < 0 && !Connect())
        return {};
      std::string req;
      req.reserve(256 + body.size());
      req.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
      req.append(host_).append("\r\nContent-Length: ").append(std::to_string(body.size()));
      req.append("\r\n");
      for (const std::string& h : headers)
        req.append(h).append("\r\n");
      req.append("\r\n").append(body);
      HttpResponse response;
      if (SendAll(req) && ReadResponse(response))
        return response;
      Close();  // a keep-alive connection the server closed: reconnect once
    }
    return {};
  }

 private:
  bool Connect() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      Close();
      return false;
    }
    buffer_.clear();
    return true;
  }
  void Close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }
  bool SendAll(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool Fill() {
    char chunk[1 << 16];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0)
      return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  bool ReadResponse(HttpResponse& out) {
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill())
        return false;
    }
    const std::string head = buffer_.substr(0, end);
    if (head.size() < 12)
      return false;
    out.status = std::atoi(head.c_str() + 9);
    size_t length = 0;
    for (size_t pos = 0; pos < head.size();) {
      size_t eol = head.find("\r\n", pos);
      if (eol == std::string::npos)
        eol = head.size();
      std::string line = head.substr(pos, eol - pos);
      for (char& c : line)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (line.starts_with("content-length:"))
        length = std::strtoull(line.c_str() + 15, nullptr, 10);
      pos = eol + 2;
    }
    while (buffer_.size() < end + 4 + length) {
      if (!Fill())
        return false;
    }
    out.body = buffer_.substr(end + 4, length);
    buffer_.erase(0, end + 4 + length);
    return true;
  }

  std::string host_;
  int port_;
  int fd_ = -1;
  std::string buffer_;  // bytes received and not yet consumed
};

}  // namespace expanse::bench

#endif  // EXPANSE_BENCH_HTTP_CLIENT_H_
