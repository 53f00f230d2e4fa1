#include "server/segment_grant.h"

#include <nlohmann/json.hpp>

#include "crypto/hash.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::server {
namespace {

constexpr size_t kMaxGrantBytes = 2048;

// Keeps the MAC's key apart from any other use of the stored hash.
std::string Mac(std::string_view payload_hex, std::string_view credential_hash) {
  return crypto::HmacSha256Hex(
      std::string("expanse segment grant v1\n") + std::string(credential_hash), payload_hex);
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0)
    return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

Status Invalid(std::string_view why) {
  return UnauthenticatedError("not a valid segment grant: " + std::string(why))
      .WithReason("grant_invalid");
}

// The hex payload and the MAC of a token, or empty views when it has not that shape.
std::pair<std::string_view, std::string_view> Split(std::string_view token) {
  const std::string_view prefix(kSegmentGrantPrefix);
  if (token.size() > kMaxGrantBytes || token.substr(0, prefix.size()) != prefix)
    return {};
  token.remove_prefix(prefix.size());
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos)
    return {};
  return {token.substr(0, dot), token.substr(dot + 1)};
}

}  // namespace

std::string EncodeSegmentGrant(const SegmentGrant& g, std::string_view credential_hash) {
  const nlohmann::json payload = {{"v", 1},           {"k", g.credential_id}, {"c", g.compute_id},
                                  {"h", g.host},      {"s", g.sha256},        {"b", g.bytes},
                                  {"e", g.expires_ms}};
  const std::string hex = Hex(payload.dump());
  return std::string(kSegmentGrantPrefix) + hex + "." + Mac(hex, credential_hash);
}

Result<SegmentGrant> DecodeSegmentGrant(std::string_view token) {
  const auto [payload_hex, mac] = Split(token);
  if (payload_hex.empty() || mac.size() != 64)
    return Invalid("malformed");
  const std::optional<std::string> text = Unhex(payload_hex);
  if (!text)
    return Invalid("malformed payload");
  wire::JsonLimits limits;
  limits.max_depth = 2;
  limits.max_values = 32;
  limits.max_string_bytes = 512;
  Result<nlohmann::json> doc = wire::ParseJson(*text, limits);
  if (!doc.ok())
    return Invalid("payload is not JSON");
  Result<wire::FieldReader> r = wire::FieldReader::Object(*doc, "grant", "grant_invalid");
  if (!r.ok())
    return Invalid("payload is not an object");
  SegmentGrant g;
  Result<int64_t> version = r->Int("v", 1, 1, wire::Need::kRequired);
  Result<int64_t> credential = r->Int("k", 1, INT64_MAX, wire::Need::kRequired);
  Result<std::string> compute = r->Text("c", 64, wire::Need::kRequired);
  Result<std::string> host = r->Text("h", 64, wire::Need::kRequired);
  Result<std::string> sha = r->Name("s", 64, "", false, wire::Need::kRequired);
  Result<int64_t> bytes = r->Int("b", 1, int64_t{1} << 40, wire::Need::kRequired);
  Result<int64_t> expires = r->Int("e", 1, wire::kMaxTimeMs, wire::Need::kRequired);
  if (!version.ok() || !credential.ok() || !compute.ok() || !host.ok() || !sha.ok() ||
      sha->size() != 64 || !bytes.ok() || !expires.ok())
    return Invalid("payload fields");
  g.credential_id = *credential;
  g.compute_id = *compute;
  g.host = *host;
  g.sha256 = *sha;
  g.bytes = *bytes;
  g.expires_ms = *expires;
  return g;
}

bool SegmentGrantSignedBy(std::string_view token, std::string_view credential_hash) {
  const auto [payload_hex, mac] = Split(token);
  if (payload_hex.empty())
    return false;
  return crypto::ConstantTimeEquals(mac, Mac(payload_hex, credential_hash));
}

}  // namespace expanse::server
