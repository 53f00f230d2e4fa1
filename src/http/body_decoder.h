// Internal to the http module: undoes a request body's Content-Encoding within a byte limit.
//
//   EXPANSE_ASSIGN_OR_RETURN(BodyDecoder decoder, BodyDecoder::For(encoding, limit));
//   decoder.Append(chunk) ... decoder.Finish();   // any failure: decoder.error()
//   std::string body = decoder.Take();
//
// A gzip or deflate body is inflated with zlib as it arrives, counting the output against
// the limit, so a bomb (1 KB inflating to 1 GB) is refused after at most `limit` bytes have
// been produced. The answers are our JSON errors: 413 body_too_large past the limit, 400
// bad_request for corrupt or truncated compressed data, 415 unsupported_media_type for an
// encoding we do not undo (br, compress, a list of several).

#ifndef EXPANSE_HTTP_BODY_DECODER_H_
#define EXPANSE_HTTP_BODY_DECODER_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace expanse::http_internal {

class BodyDecoder {
 public:
  // `content_encoding`: the header's value, "" when absent. Accepted, case-insensitively and
  // with surrounding spaces ignored: "", "identity", "gzip", "x-gzip", "deflate" (zlib
  // wrapper, or raw deflate as some clients send). Anything else: a decoder whose error() is
  // the 415 answer, naming the encoding. `limit`: the most decoded bytes, > 0.
  static BodyDecoder For(std::string_view content_encoding, size_t limit);

  BodyDecoder(BodyDecoder&&) noexcept;
  BodyDecoder& operator=(BodyDecoder&&) noexcept;
  ~BodyDecoder();

  // Feeds the next piece of the body as received. false once an error is set (then every
  // later call does nothing and returns false).
  bool Append(std::string_view chunk);
  // The body is complete: a compressed stream must have ended exactly. false on error.
  bool Finish();

  // The answer to send instead of running the handler, once anything failed.
  const std::optional<http::Response>& error() const { return error_; }
  size_t decoded_bytes() const { return out_.size(); }
  // The decoded body; call after Finish() succeeded.
  std::string Take() { return std::move(out_); }

 private:
  struct Inflater;  // zlib's z_stream

  BodyDecoder() = default;
  void Fail(http::Response response);

  size_t limit_ = 0;
  std::unique_ptr<Inflater> inflater_{};  // null: identity
  std::string out_{};
  std::optional<http::Response> error_{};
};

}  // namespace expanse::http_internal

#endif  // EXPANSE_HTTP_BODY_DECODER_H_
