// Internal to the release module: SHA-256 over data that arrives in pieces (archive entries
// and files too large to hold twice in memory), on OpenSSL's EVP interface.

#ifndef EXPANSE_RELEASE_SHA256_STREAM_H_
#define EXPANSE_RELEASE_SHA256_STREAM_H_

#include <memory>
#include <string>
#include <string_view>

namespace expanse::release_internal {

class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(std::string_view bytes);
  // 64 lowercase hex digits of everything given to Update; the stream is spent afterwards.
  std::string FinishHex();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

}  // namespace expanse::release_internal

#endif  // EXPANSE_RELEASE_SHA256_STREAM_H_
