#include "http/body_decoder.h"

#include <zlib.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "http/error.h"
#include "http/request_checks.h"

namespace expanse::http_internal {

namespace {

// Output is produced into a buffer of this size and counted before it joins the body, so
// the body never holds more than the limit, whatever the compression ratio.
constexpr size_t kInflateStep = 16 * 1024;

// zlib's windowBits: 15 plus 32 detects a gzip or zlib header; negative means raw deflate.
constexpr int kGzipOrZlibWindow = 15 + 32;
constexpr int kZlibWindow = 15;
constexpr int kRawDeflateWindow = -15;

std::string_view TrimSpaces(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

// RFC 1950 §2.2: compression method 8 (deflate), a window of at most 32 KiB, and the two
// bytes, read as a big-endian number, a multiple of 31. Raw deflate data matches this by
// chance only rarely, and RFC 9110 says "deflate" means the zlib format, so it wins a tie.
bool IsZlibHeader(unsigned char cmf, unsigned char flg) {
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0;
}

http::Response TooLarge(size_t limit) {
  return http::ErrorResponse(413, "body_too_large",
                             "the request body is larger than " + std::to_string(limit) + " bytes");
}

http::Response Corrupt(std::string_view name, std::string_view why) {
  return http::ErrorResponse(
      400, "bad_request",
      "the request body is not valid " + std::string(name) + " data: " + std::string(why));
}

http::Response ZlibFailed() {
  // Only Z_MEM_ERROR in practice; Z_STREAM_ERROR would be a bug here, not the client's.
  return http::ErrorResponse(500, "internal", "could not decompress the request body");
}

}  // namespace

struct BodyDecoder::Inflater {
  explicit Inflater(bool is_gzip) : gzip(is_gzip) {}
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  ~Inflater() {
    if (started) {
      inflateEnd(&z);
    }
  }

  const char* name() const { return gzip ? "gzip" : "deflate"; }

  // Inflates the next piece of compressed input onto `out`, which never grows past `limit`.
  // The answer to send instead when that fails.
  std::optional<http::Response> Feed(std::string_view input, size_t limit, std::string& out) {
    if (!started) {
      int window = kGzipOrZlibWindow;
      if (!gzip) {
        if (head.size() + input.size() < 2) {
          head.append(input);
          return std::nullopt;
        }
        const std::string first_two = head + std::string(input.substr(0, 2 - head.size()));
        window = IsZlibHeader(static_cast<unsigned char>(first_two[0]),
                              static_cast<unsigned char>(first_two[1]))
                     ? kZlibWindow
                     : kRawDeflateWindow;
      }
      if (inflateInit2(&z, window) != Z_OK) {
        return ZlibFailed();
      }
      started = true;
      const std::string held = std::move(head);
      head.clear();
      if (auto error = FeedStarted(held, limit, out)) {
        return error;
      }
    }
    return FeedStarted(input, limit, out);
  }

  // The stream must have ended: the answer to send when it did not.
  std::optional<http::Response> Finish() const {
    if (ended || (!started && head.empty())) {
      // An empty body with a Content-Encoding is taken as empty: there is nothing to misread.
      return std::nullopt;
    }
    return http::ErrorResponse(400, "bad_request",
                               "the " + std::string(name()) +
                                   " request body is truncated: it ends before its " +
                                   "compressed data does");
  }

  // Lives on the heap and never moves: zlib's state points back at it.
  z_stream z{};
  const bool gzip;       // else deflate
  bool started = false;  // inflateInit2 succeeded
  bool ended = false;    // the compressed stream (for gzip, the last member so far) ended
  // For "deflate": the first byte, held until a second tells the zlib format from raw deflate.
  std::string head{};

 private:
  std::optional<http::Response> FeedStarted(std::string_view input, size_t limit,
                                            std::string& out) {
    // avail_in is 32 bits wide.
    constexpr size_t kMaxSlice = size_t{1} << 30;
    while (!input.empty()) {
      const std::string_view slice = input.substr(0, kMaxSlice);
      input.remove_prefix(slice.size());
      // inflate() only reads through next_in; zlib declares it non-const without ZLIB_CONST.
      z.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(slice.data()));
      z.avail_in = static_cast<uInt>(slice.size());
      if (auto error = Inflate(limit, out)) {
        return error;
      }
    }
    return std::nullopt;
  }

  // Runs inflate() until it has taken all of z.avail_in and given all the output it can.
  std::optional<http::Response> Inflate(size_t limit, std::string& out) {
    while (true) {
      if (ended) {
        if (z.avail_in == 0) {
          return std::nullopt;
        }
        if (!gzip) {
          return Corrupt(name(), "data follows the end of the compressed stream");
        }
        // Another gzip member: RFC 1952 §2.2 lets a file hold several, and gunzip and zlib's
        // gzread() decode them one after the other, so we do too. Trailing bytes that are not
        // a gzip member (padding, garbage) fail its header check: 400.
        if (inflateReset(&z) != Z_OK) {
          return ZlibFailed();
        }
        ended = false;
      }
      unsigned char buffer[kInflateStep];
      z.next_out = buffer;
      z.avail_out = sizeof(buffer);
      const int rc = inflate(&z, Z_NO_FLUSH);
      const size_t produced = sizeof(buffer) - z.avail_out;
      if (produced > limit - out.size()) {
        return TooLarge(limit);
      }
      out.append(reinterpret_cast<const char*>(buffer), produced);
      switch (rc) {
        case Z_STREAM_END:
          ended = true;
          break;
        case Z_OK:
          if (z.avail_in == 0 && z.avail_out != 0) {
            return std::nullopt;  // all input taken, all output given
          }
          break;
        case Z_BUF_ERROR:
          return std::nullopt;  // no progress possible: it needs more input
        case Z_NEED_DICT:
          return Corrupt(name(), "it needs a preset dictionary");
        case Z_DATA_ERROR:
          return Corrupt(name(), z.msg != nullptr ? z.msg : "corrupt data");
        default:
          return ZlibFailed();
      }
    }
  }
};

BodyDecoder BodyDecoder::For(std::string_view content_encoding, size_t limit) {
  BodyDecoder decoder;
  decoder.limit_ = limit;
  const std::string_view trimmed = TrimSpaces(content_encoding);
  const std::string encoding = Lower(trimmed);
  if (encoding.empty() || encoding == "identity") {
    return decoder;
  }
  if (encoding == "gzip" || encoding == "x-gzip" || encoding == "deflate") {
    // inflateInit2 runs on the first compressed bytes, when "deflate" can tell its format.
    decoder.inflater_ = std::make_unique<Inflater>(/*is_gzip=*/encoding != "deflate");
    return decoder;
  }
  // A list ("gzip, gzip") lands here too: undoing codings in turn would multiply a bomb's
  // ratio, and no client of ours sends one.
  decoder.Fail(http::ErrorResponse(415, "unsupported_media_type",
                                   "Content-Encoding " + Quote(trimmed) +
                                       " is not supported; send gzip, deflate or no encoding"));
  return decoder;
}

BodyDecoder::BodyDecoder(BodyDecoder&&) noexcept = default;
BodyDecoder& BodyDecoder::operator=(BodyDecoder&&) noexcept = default;
BodyDecoder::~BodyDecoder() = default;

void BodyDecoder::Fail(http::Response response) {
  error_ = std::move(response);
  inflater_.reset();  // zlib's state (about 40 KiB) is not needed any more
}

bool BodyDecoder::Append(std::string_view chunk) {
  if (error_) {
    return false;
  }
  if (chunk.empty()) {
    return true;  // so an empty compressed body stays "nothing received" for Finish()
  }
  if (inflater_) {
    if (auto error = inflater_->Feed(chunk, limit_, out_)) {
      Fail(*std::move(error));
      return false;
    }
    return true;
  }
  if (chunk.size() > limit_ - out_.size()) {
    Fail(TooLarge(limit_));
    return false;
  }
  out_.append(chunk);
  return true;
}

bool BodyDecoder::Finish() {
  if (error_) {
    return false;
  }
  if (inflater_) {
    if (auto error = inflater_->Finish()) {
      Fail(*std::move(error));
      return false;
    }
  }
  return true;
}

}  // namespace expanse::http_internal
