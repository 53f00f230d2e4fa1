#include "agent/segment_grant_files.h"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "net/url_policy.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"
#include "wire/trace_segment_header.h"

namespace expanse::agent {
namespace {

constexpr std::string_view kRequestPrefix = "request-";
constexpr std::string_view kGrantPrefix = "grant-";
constexpr std::string_view kGrantSuffix = ".json";
constexpr size_t kMaxGrantBytes = 2048;
constexpr size_t kMaxUrlBytes = 1024;

Status BadGrantFile(const std::string& why) {
  return InvalidArgumentError("segment grant file: " + why).WithReason("bad_grant_file");
}

}  // namespace

std::string SegmentGrantRoot(const std::string& shared_prefix) {
  return shared_prefix + "/spool/segment-grants";
}

bool IsSha256Hex(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string SegmentGrantRequestName(const SegmentGrantRequest& request) {
  return std::string(kRequestPrefix) + request.sha256 + "-" + std::to_string(request.bytes);
}

std::optional<SegmentGrantRequest> ParseSegmentGrantRequestName(std::string_view name) {
  if (name.substr(0, kRequestPrefix.size()) != kRequestPrefix)
    return std::nullopt;
  name.remove_prefix(kRequestPrefix.size());
  if (name.size() < 66 || name[64] != '-' || !IsSha256Hex(name.substr(0, 64)))
    return std::nullopt;
  const std::string_view digits = name.substr(65);
  if (digits.empty() || digits.size() > 12 || digits[0] == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  uint64_t bytes = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), bytes);
  if (bytes > wire::kMaxTraceSegmentBytes)
    return std::nullopt;
  return SegmentGrantRequest{std::string(name.substr(0, 64)), bytes};
}

std::string SegmentGrantFileName(std::string_view sha256) {
  return std::string(kGrantPrefix) + std::string(sha256) + std::string(kGrantSuffix);
}

bool IsSegmentGrantFileName(std::string_view name) {
  return name.size() == kGrantPrefix.size() + 64 + kGrantSuffix.size() &&
         name.substr(0, kGrantPrefix.size()) == kGrantPrefix &&
         name.substr(name.size() - kGrantSuffix.size()) == kGrantSuffix &&
         IsSha256Hex(name.substr(kGrantPrefix.size(), 64));
}

std::string EncodeSegmentGrantFile(const SegmentGrantFile& file) {
  return nlohmann::json{
      {"grant", file.grant}, {"upload_url", file.upload_url}, {"expires_at_ms", file.expires_at_ms}}
      .dump();
}

Result<SegmentGrantFile> DecodeSegmentGrantFile(std::string_view bytes) {
  if (bytes.size() > kMaxSegmentGrantFileBytes)
    return BadGrantFile("larger than " + std::to_string(kMaxSegmentGrantFileBytes) + " bytes");
  Result<nlohmann::json> doc = wire::ParseJson(
      bytes,
      wire::JsonLimits{.max_depth = 2, .max_values = 16, .max_string_bytes = kMaxGrantBytes});
  if (!doc.ok())
    return BadGrantFile(doc.status().message());
  if (!doc->is_object())
    return BadGrantFile("not a JSON object");
  const auto grant = doc->find("grant");
  const auto url = doc->find("upload_url");
  const auto expires = doc->find("expires_at_ms");
  if (grant == doc->end() || !grant->is_string() || url == doc->end() || !url->is_string() ||
      expires == doc->end() || !expires->is_number_integer())
    return BadGrantFile("expected grant, upload_url (text) and expires_at_ms (an integer)");
  SegmentGrantFile out;
  out.grant = grant->get<std::string>();
  out.upload_url = url->get<std::string>();
  out.expires_at_ms = expires->get<int64_t>();
  const bool printable =
      std::all_of(out.grant.begin(), out.grant.end(), [](char c) { return c > ' ' && c < 0x7f; });
  if (out.grant.rfind("exp_sg_", 0) != 0 || !printable)
    return BadGrantFile("the grant is not an exp_sg_ token");
  if (out.upload_url.size() > kMaxUrlBytes)
    return BadGrantFile("the upload URL is longer than " + std::to_string(kMaxUrlBytes) + " bytes");
  if (Status allowed = net::CheckUrlAllowed(out.upload_url); !allowed.ok())
    return BadGrantFile("upload URL: " + allowed.message());
  return out;
}

Result<SegmentGrantFile> GrantFileFromAnswer(std::string_view body,
                                             const std::string& fallback_upload_url) {
  constexpr char kReason[] = "bad_grant_answer";
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("the server's segment grant answer: " + why).WithReason(kReason);
  };
  if (body.size() > kMaxSegmentGrantFileBytes)
    return bad("larger than " + std::to_string(kMaxSegmentGrantFileBytes) + " bytes");
  Result<nlohmann::json> answer = wire::ParseJson(
      body, wire::JsonLimits{.max_depth = 2, .max_values = 16, .max_string_bytes = 4096});
  if (!answer.ok())
    return bad(answer.status().message());
  Result<wire::FieldReader> reader = wire::FieldReader::Object(*answer, "", kReason);
  if (!reader.ok())
    return bad(reader.status().message());
  SegmentGrantFile file;
  Result<std::string> grant = reader->Text("grant", kMaxGrantBytes, wire::Need::kRequired);
  Result<int64_t> expires =
      reader->Int("expires_at_ms", 0, wire::kMaxTimeMs, wire::Need::kRequired);
  Result<std::string> url = reader->Text("upload_url", kMaxUrlBytes, wire::Need::kOptional);
  for (const Status* problem : {&grant.status(), &expires.status(), &url.status()}) {
    if (!problem->ok())
      return bad(problem->message());
  }
  file.grant = *grant;
  file.expires_at_ms = *expires;
  file.upload_url = *url;
  // A server that does not know its public data-plane URL answers a bare path: the worker
  // then sends where this controller does.
  if (file.upload_url.rfind("https://", 0) != 0 && file.upload_url.rfind("http://", 0) != 0)
    file.upload_url = fallback_upload_url;
  // Checked as the worker will read it, so that an unusable grant never reaches the spool.
  if (Result<SegmentGrantFile> checked = DecodeSegmentGrantFile(EncodeSegmentGrantFile(file));
      !checked.ok()) {
    return bad(checked.status().message());
  }
  return file;
}

}  // namespace expanse::agent
