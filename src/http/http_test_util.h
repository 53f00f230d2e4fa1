// Test-only helpers for tests that talk to a listener below httplib's client: a raw request
// over a loopback socket (optionally from another 127.0.0.0/8 source address), and a gzip body.
// Header-only, so the http and server tests share it without linking more.
#ifndef EXPANSE_HTTP_HTTP_TEST_UTIL_H_
#define EXPANSE_HTTP_HTTP_TEST_UTIL_H_

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace expanse::http::testing {

// Sends `request` as is to 127.0.0.1:port, from `source` when given, and returns everything
// the server wrote until it closed the connection.
inline std::string SendRawRequest(int port, const std::string& request,
                                  const std::string& source = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (!source.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &local.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local), 0) << source;
  }
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(static_cast<uint16_t>(port));
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server), 0);
  EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string answer;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0)
    answer.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return answer;
}

// gzip of `plain`, for bodies sent with Content-Encoding: gzip.
inline std::string Gzip(const std::string& plain) {
  std::string compressed;
  httplib::detail::gzip_compressor compressor;
  const bool ok = compressor.compress(plain.data(), plain.size(), /*last=*/true,
                                      [&](const char* data, size_t n) {
                                        compressed.append(data, n);
                                        return true;
                                      });
  EXPECT_TRUE(ok);
  return compressed;
}

}  // namespace expanse::http::testing

#endif  // EXPANSE_HTTP_HTTP_TEST_UTIL_H_
