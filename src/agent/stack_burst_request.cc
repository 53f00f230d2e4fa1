#include "agent/stack_burst_request.h"

#include <charconv>
#include <cstdint>
#include <random>

#include <nlohmann/json.hpp>

#include "spool/spool_names.h"
#include "wire/field_reader.h"
#include "wire/json_parse.h"

namespace expanse::agent {
namespace {

constexpr std::string_view kPrefix = "burst-";
constexpr std::string_view kSuffix = ".json";
constexpr char kReason[] = "bad_request";

bool IsLowerHex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

Status Refuse(std::string_view reason, const std::string& message) {
  return InvalidArgumentError(message).WithReason(std::string(reason));
}

}  // namespace

std::string ControlTreeRoot(const std::string& shared_prefix) {
  return shared_prefix + "/spool/control";
}

std::string StackBurstFileName(const StackBurstRequest& r) {
  return std::string(kPrefix) + std::to_string(r.trigger_ms) + "-" + r.nonce + std::string(kSuffix);
}

std::string NewStackBurstNonce() {
  std::random_device random;
  std::string nonce;
  static constexpr char kHex[] = "0123456789abcdef";
  while (nonce.size() < kStackBurstNonceHexDigits) {
    uint32_t word = random();
    for (int i = 0; i < 8 && nonce.size() < kStackBurstNonceHexDigits; ++i, word >>= 4)
      nonce.push_back(kHex[word & 0xf]);
  }
  return nonce;
}

std::string EncodeStackBurstRequest(const StackBurstRequest& r) {
  return nlohmann::json{{"version", kStackBurstRequestVersion},
                        {"job_id", r.job_id},
                        {"slurm_job_id", r.slurm_job_id},
                        {"reason", r.reason},
                        {"trigger_ms", r.trigger_ms},
                        {"since_ms", r.since_ms},
                        {"nonce", r.nonce}}
      .dump();
}

Result<StackBurstRequest> DecodeStackBurstRequest(std::string_view name, std::string_view bytes) {
  // burst-<trigger_ms>-<nonce>.json
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix))
    return Refuse("bad_name", "not a burst request's name");
  const std::string_view middle =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const size_t dash = middle.find('-');
  if (dash == std::string_view::npos)
    return Refuse("bad_name", "not a burst request's name");
  const std::string_view time_text = middle.substr(0, dash);
  const std::string_view name_nonce = middle.substr(dash + 1);
  int64_t name_ms = 0;
  const auto [end, error] =
      std::from_chars(time_text.data(), time_text.data() + time_text.size(), name_ms);
  if (time_text.empty() || time_text.size() > 15 || time_text[0] == '0' || error != std::errc() ||
      end != time_text.data() + time_text.size() ||
      name_nonce.size() != kStackBurstNonceHexDigits || !IsLowerHex(name_nonce)) {
    return Refuse("bad_name", "not a burst request's name");
  }
  if (bytes.size() > kMaxStackBurstRequestBytes)
    return Refuse("too_large",
                  "more than " + std::to_string(kMaxStackBurstRequestBytes) + " bytes");

  EXPANSE_ASSIGN_OR_RETURN(
      nlohmann::json doc,
      wire::ParseJson(bytes,
                      wire::JsonLimits{.max_depth = 2, .max_values = 32, .max_string_bytes = 128}));
  EXPANSE_ASSIGN_OR_RETURN(wire::FieldReader r,
                           wire::FieldReader::Object(doc, "stack_burst", kReason));
  EXPANSE_RETURN_IF_ERROR(r.Expect("version", kStackBurstRequestVersion));
  StackBurstRequest out;
  EXPANSE_ASSIGN_OR_RETURN(out.job_id, r.Text("job_id", 64, wire::Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.slurm_job_id,
                           r.Int("slurm_job_id", 0, 4'294'967'295, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(out.reason, r.Name("reason", 32, "_", false, wire::Need::kRequired));
  if (out.reason != "stuck" && out.reason != "no_process")
    return r.Bad("reason", "must be stuck or no_process");
  EXPANSE_ASSIGN_OR_RETURN(out.trigger_ms,
                           r.Int("trigger_ms", 1, wire::kMaxTimeMs, wire::Need::kRequired));
  EXPANSE_ASSIGN_OR_RETURN(out.since_ms,
                           r.Int("since_ms", 0, wire::kMaxTimeMs, wire::Need::kOptional));
  EXPANSE_ASSIGN_OR_RETURN(
      out.nonce, r.Name("nonce", kStackBurstNonceHexDigits, "", false, wire::Need::kRequired));
  if (out.nonce != name_nonce || out.trigger_ms != name_ms)
    return Refuse("nonce_mismatch", "the name's time or nonce is not the body's");
  return out;
}

Status WriteStackBurstRequest(Host& host_seam, const std::string& control_root,
                              const std::string& host, const StackBurstRequest& request) {
  if (!spool::IsValidHostName(host))
    return Refuse("bad_host", "not a host name the spool accepts");
  const std::string dir = control_root + "/" + host;
  EXPANSE_RETURN_IF_ERROR(host_seam.MakeDirectories(dir, 0755));
  // -1: keep the writer's own owner, which is the sampler's (one daemon account everywhere).
  return host_seam.WriteFile(dir + "/" + StackBurstFileName(request),
                             EncodeStackBurstRequest(request), 0644, static_cast<uid_t>(-1),
                             static_cast<gid_t>(-1));
}

}  // namespace expanse::agent
