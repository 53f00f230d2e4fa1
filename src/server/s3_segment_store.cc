#include "server/s3_segment_store.h"

#include <utility>

#include "core/quote.h"
#include "crypto/hash.h"
#include "net/url_policy.h"
#include "wire/trace_segment_header.h"

namespace expanse::server {
namespace {

// SHA-256 of no bytes: the payload hash of a GET, HEAD or DELETE.
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

bool IsBucketName(std::string_view name) {
  if (name.size() < 3 || name.size() > 63)
    return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
      return false;
  }
  return true;
}

bool IsKeyPrefix(std::string_view prefix) {
  for (char c : prefix) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.' || c == '_' || c == '/'))
      return false;
  }
  return prefix.find("//") == std::string_view::npos && prefix.find("..") == std::string_view::npos;
}

// What S3's codes are made of (NoSuchKey, SlowDown, XAmzContentSHA256Mismatch) and all that
// may reach a log line from the body.
bool IsS3ErrorCodeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

Status Unavailable(std::string message) {
  return UnavailableError(std::move(message)).WithReason("segment_store_unavailable");
}

}  // namespace

std::string S3ErrorCode(std::string_view body) {
  constexpr std::string_view kOpen = "<Code>";
  const size_t open = body.find(kOpen);
  if (open == std::string_view::npos)
    return "";
  const size_t from = open + kOpen.size();
  const size_t close = body.find("</Code>", from);
  if (close == std::string_view::npos || close - from > kMaxS3ErrorCodeBytes)
    return "";
  const std::string_view code = body.substr(from, close - from);
  for (const char c : code) {
    if (!IsS3ErrorCodeChar(c))
      return "";
  }
  return std::string(code);
}

S3SegmentStore::S3SegmentStore(S3SegmentStoreOptions options, std::string bucket_url,
                               std::string prefix,
                               std::vector<std::unique_ptr<net::HttpClient>> clients)
    : options_(std::move(options)),
      bucket_url_(std::move(bucket_url)),
      prefix_(std::move(prefix)),
      clients_(std::move(clients)) {
  for (const auto& client : clients_)
    idle_.push_back(client.get());
}

Result<std::unique_ptr<S3SegmentStore>> S3SegmentStore::Open(S3SegmentStoreOptions options) {
  const std::string& url = options.url;
  const auto bad = [&](const std::string& why) {
    return InvalidArgumentError("--segment-s3-url " + QuoteForMessage(url, 200) + ": " + why);
  };
  if (Status allowed = net::CheckUrlAllowed(url); !allowed.ok())
    return bad(allowed.message());
  const size_t authority = url.find("://") + 3;
  const size_t path = url.find('/', authority);
  if (path == std::string::npos)
    return bad("expected https://host[:port]/bucket[/prefix]");
  if (url.find_first_of("?#", path) != std::string::npos)
    return bad("no query or fragment: the bucket and key prefix are the path");
  std::string rest = url.substr(path + 1);
  const size_t slash = rest.find('/');
  const std::string bucket = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (!IsBucketName(bucket))
    return bad("the bucket name must be 3 to 63 lowercase letters, digits, '-' or '.'");
  if (!IsKeyPrefix(prefix))
    return bad("the key prefix may hold letters, digits, '-', '.', '_' and single '/'");
  if (!prefix.empty() && prefix.back() != '/')
    prefix += '/';
  if (options.access_key.empty() || options.secret_key.empty())
    return InvalidArgumentError("the S3 segment store needs an access key and a secret key");

  net::HttpClientOptions http;
  http.ca_file = options.ca_file;
  http.user_agent = "expanse-server";
  // A segment is at most 64 MiB; a GET's answer holds one.
  http.max_response_bytes = wire::kMaxTraceSegmentBytes + 1;
  std::vector<std::unique_ptr<net::HttpClient>> clients;
  for (size_t i = 0; i < kBucketConnections; ++i) {
    EXPANSE_ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> client,
                             net::HttpClient::Create(http));
    clients.push_back(std::move(client));
  }
  std::unique_ptr<S3SegmentStore> store(new S3SegmentStore(std::move(options),
                                                           url.substr(0, path) + "/" + bucket,
                                                           std::move(prefix), std::move(clients)));

  EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse head,
                           store->Send("HEAD", store->bucket_url_, "", kEmptySha256));
  if (head.status == 404)
    return NotFoundError("S3 segment store: no bucket " + QuoteForMessage(bucket) + " at " +
                         QuoteForMessage(store->bucket_url_, 200) + " (create it first)");
  if (head.status == 403 || head.status == 401) {
    return PermissionDeniedError("S3 segment store: " + QuoteForMessage(store->bucket_url_, 200) +
                                 " refuses the access key (HTTP " + std::to_string(head.status) +
                                 "): check --segment-s3-credentials-file and the bucket's policy");
  }
  if (head.status != 200) {
    return Unavailable("S3 segment store: HEAD " + store->bucket_url_ + " answered HTTP " +
                       std::to_string(head.status));
  }
  return store;
}

Result<std::string> S3SegmentStore::UrlOf(std::string_view compute_id,
                                          std::string_view sha256) const {
  EXPANSE_ASSIGN_OR_RETURN(const std::string name, SegmentObjectName(compute_id, sha256));
  return bucket_url_ + "/" + prefix_ + name;
}

Result<net::HttpResponse> S3SegmentStore::Send(std::string method, std::string url,
                                               std::string body, std::string_view body_sha256) {
  net::HttpRequest request;
  request.method = std::move(method);
  request.url = std::move(url);
  request.headers = {{"x-amz-content-sha256", std::string(body_sha256)}};
  if (request.method == "PUT")
    request.headers.emplace_back("Content-Type", "application/json");
  request.body = std::move(body);
  request.aws_sigv4 = net::AwsSigV4{.region = options_.region,
                                    .access_key = options_.access_key,
                                    .secret_key = options_.secret_key};
  net::HttpClient* client = nullptr;
  {
    std::unique_lock lock(idle_mu_);
    if (!idle_cv_.wait_for(lock, kWaitForConnection, [&] { return !idle_.empty(); })) {
      return Unavailable("S3 segment store: all " + std::to_string(kBucketConnections) +
                         " connections to the bucket are busy");
    }
    client = idle_.back();
    idle_.pop_back();
  }
  // Given back however Send leaves (an exception included).
  struct GiveBack {
    S3SegmentStore* store;
    net::HttpClient* client;
    ~GiveBack() {
      {
        std::lock_guard lock(store->idle_mu_);
        store->idle_.push_back(client);
      }
      store->idle_cv_.notify_one();
    }
  } give_back{this, client};
  Result<net::HttpResponse> response = client->Send(request);
  if (!response.ok())
    return Unavailable("S3 segment store: " + response.status().message());
  return response;
}

Status S3SegmentStore::Put(std::string_view compute_id, std::string_view sha256,
                           std::string_view bytes) {
  EXPANSE_ASSIGN_OR_RETURN(std::string url, UrlOf(compute_id, sha256));
  // The key is the content's hash: a PUT of what is there writes the same bytes again.
  EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse r,
                           Send("PUT", url, std::string(bytes), crypto::Sha256Hex(bytes)));
  if (r.status == 200)
    return OkStatus();
  return Unavailable("S3 segment store: PUT " + url + " answered HTTP " + std::to_string(r.status) +
                     " " + S3ErrorCode(r.body));
}

Result<std::optional<std::string>> S3SegmentStore::Get(std::string_view compute_id,
                                                       std::string_view sha256) {
  EXPANSE_ASSIGN_OR_RETURN(std::string url, UrlOf(compute_id, sha256));
  EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse r, Send("GET", url, "", kEmptySha256));
  if (r.status == 404)
    return std::optional<std::string>();
  if (r.status != 200) {
    return Unavailable("S3 segment store: GET " + url + " answered HTTP " +
                       std::to_string(r.status) + " " + S3ErrorCode(r.body));
  }
  // Whoever else can write to the bucket could change an object: it must still be what its
  // name says.
  if (crypto::Sha256Hex(r.body) != sha256) {
    return DataLossError("S3 segment store: " + url + " does not hold the bytes its name hashes")
        .WithReason("segment_bytes_changed");
  }
  return std::optional<std::string>(std::move(r.body));
}

Status S3SegmentStore::Remove(std::string_view compute_id, std::string_view sha256) {
  EXPANSE_ASSIGN_OR_RETURN(std::string url, UrlOf(compute_id, sha256));
  EXPANSE_ASSIGN_OR_RETURN(net::HttpResponse r, Send("DELETE", url, "", kEmptySha256));
  if (r.status == 204 || r.status == 200 || r.status == 404)
    return OkStatus();
  return Unavailable("S3 segment store: DELETE " + url + " answered HTTP " +
                     std::to_string(r.status) + " " + S3ErrorCode(r.body));
}

}  // namespace expanse::server
