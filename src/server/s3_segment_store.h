// Trace segment bytes in an S3-compatible bucket (docs/formats/segment-store.md), the store
// that replicas of the server share: every replica reaches the bucket, none needs a shared file
// system. Objects are <prefix><compute id>/<first two hex digits>/<sha256>.json, written with a
// single PUT (an object appears whole or not at all), addressed path-style
// (<endpoint>/<bucket>/<key>), signed with AWS Signature Version 4.
//
// A failed request is kUnavailable (reason segment_store_unavailable): the server answers 503
// and keeps no record of the segment, and the sender tries again later.
//
// Requests to the bucket go over kBucketConnections connections at once, each its own libcurl
// handle; a request that finds all of them busy for kWaitForConnection is kUnavailable too. One
// handle for all (as until 2026-12-08) let one slow PUT hold every other upload, download and
// retention DELETE behind it, and with them the server's request workers.
#ifndef EXPANSE_SERVER_S3_SEGMENT_STORE_H_
#define EXPANSE_SERVER_S3_SEGMENT_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "net/http_client.h"
#include "server/segment_store.h"

namespace expanse::server {

struct S3SegmentStoreOptions {
  // https://host[:port]/bucket[/prefix] (http only to loopback); path-style.
  std::string url{};
  std::string region = "us-east-1";
  std::string access_key{};
  std::string secret_key{};
  std::string ca_file{};  // "" = the system's
};

// The longest error code S3ErrorCode hands back.
inline constexpr size_t kMaxS3ErrorCodeBytes = 64;

// The <Code> of an S3 error answer (an XML body, searched as text, not parsed), which the store's
// errors name: 1 to kMaxS3ErrorCodeBytes of [A-Za-z0-9._-], or "" when the body holds no such
// code (a proxy's page, an empty body, a code with other bytes): whatever answered, only those
// bytes reach a message or a log line.
std::string S3ErrorCode(std::string_view body);

class S3SegmentStore final : public SegmentStore {
 public:
  static constexpr size_t kBucketConnections = 4;
  static constexpr std::chrono::milliseconds kWaitForConnection{2000};

  // Checks the URL and that the bucket answers to the key (HEAD): a wrong key or a missing
  // bucket is reported at start, by name.
  static Result<std::unique_ptr<S3SegmentStore>> Open(S3SegmentStoreOptions options);

  Status Put(std::string_view compute_id, std::string_view sha256, std::string_view bytes) override;
  Result<std::optional<std::string>> Get(std::string_view compute_id,
                                         std::string_view sha256) override;
  Status Remove(std::string_view compute_id, std::string_view sha256) override;

 private:
  S3SegmentStore(S3SegmentStoreOptions options, std::string bucket_url, std::string prefix,
                 std::vector<std::unique_ptr<net::HttpClient>> clients);
  Result<std::string> UrlOf(std::string_view compute_id, std::string_view sha256) const;
  Result<net::HttpResponse> Send(std::string method, std::string url, std::string body,
                                 std::string_view body_sha256);

  S3SegmentStoreOptions options_;
  std::string bucket_url_;                                 // <endpoint>/<bucket>
  std::string prefix_;                                     // "" or ending in '/'
  std::vector<std::unique_ptr<net::HttpClient>> clients_;  // kBucketConnections
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::vector<net::HttpClient*> idle_;  // of clients_, not sending now
};

}  // namespace expanse::server

#endif  // EXPANSE_SERVER_S3_SEGMENT_STORE_H_
