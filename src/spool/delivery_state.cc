#include "spool/delivery_state.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "core/crc32.h"
#include "spool/spool_names.h"

namespace expanse::spool {
namespace {

constexpr std::string_view kHeaderLine = "expanse-spool-delivered 1\n";
constexpr std::string_view kCrcPrefix = "crc32 ";

Status Corrupt(const std::string& what) {
  return DataLossError("spool: delivery state is corrupt: " + what)
      .WithReason("spool_state_corrupt");
}

template <typename Int>
bool ParseInt(std::string_view text, Int& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos)
      return parts;
    text.remove_prefix(at + 1);
  }
}

}  // namespace

const DeliveryState::Boot* DeliveryState::FindBoot(std::string_view host,
                                                   std::string_view boot_id) const {
  const auto it = hosts_.find(host);
  if (it == hosts_.end())
    return nullptr;
  for (const Boot& boot : it->second) {
    if (boot.boot_id == boot_id)
      return &boot;
  }
  return nullptr;
}

bool DeliveryState::WasDelivered(std::string_view host, std::string_view boot_id,
                                 uint64_t sequence) const {
  const Boot* boot = FindBoot(host, boot_id);
  return boot != nullptr && sequence <= boot->high &&
         !std::binary_search(boot->gaps.begin(), boot->gaps.end(), sequence);
}

std::optional<int64_t> DeliveryState::LastDeliveredMs(std::string_view host,
                                                      std::string_view boot_id) const {
  const Boot* boot = FindBoot(host, boot_id);
  return boot == nullptr ? std::nullopt : std::optional<int64_t>(boot->updated_ms);
}

void DeliveryState::MarkDelivered(std::string_view host, std::string_view boot_id,
                                  uint64_t sequence, int64_t now_ms) {
  auto it = hosts_.find(host);
  if (it == hosts_.end())
    it = hosts_.emplace(std::string(host), std::vector<Boot>()).first;
  std::vector<Boot>& boots = it->second;
  auto boot =
      std::find_if(boots.begin(), boots.end(), [&](const Boot& b) { return b.boot_id == boot_id; });
  if (boot == boots.end()) {
    if (boots.size() >= kMaxBootsPerHost) {
      boots.erase(std::min_element(boots.begin(), boots.end(), [](const Boot& a, const Boot& b) {
        return a.updated_ms < b.updated_ms;
      }));
    }
    boots.push_back({std::string(boot_id), 0, {}, now_ms});
    boot = boots.end() - 1;
  }
  boot->updated_ms = now_ms;
  if (sequence > boot->high) {
    // Only the kMaxGapsPerBoot sequences right below the new mark can still be waited for.
    const uint64_t window_floor = sequence > kMaxGapsPerBoot ? sequence - kMaxGapsPerBoot : 1;
    for (uint64_t gap = std::max(boot->high + 1, window_floor); gap < sequence; ++gap)
      boot->gaps.push_back(gap);
    boot->high = sequence;
    if (boot->gaps.size() > kMaxGapsPerBoot)
      boot->gaps.erase(boot->gaps.begin(), boot->gaps.end() - kMaxGapsPerBoot);
    return;
  }
  const auto gap = std::lower_bound(boot->gaps.begin(), boot->gaps.end(), sequence);
  if (gap != boot->gaps.end() && *gap == sequence)
    boot->gaps.erase(gap);
}

std::string DeliveryState::Serialize() const {
  std::string out(kHeaderLine);
  for (const auto& [host, boots] : hosts_) {
    for (const Boot& boot : boots) {
      out += host;
      out += ' ';
      out += boot.boot_id;
      out += ' ';
      out += std::to_string(boot.high);
      out += ' ';
      out += std::to_string(boot.updated_ms);
      out += ' ';
      if (boot.gaps.empty())
        out += '-';
      for (size_t i = 0; i < boot.gaps.size(); ++i) {
        if (i > 0)
          out += ',';
        out += std::to_string(boot.gaps[i]);
      }
      out += '\n';
    }
  }
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x\n", Crc32(out));
  out += kCrcPrefix;
  out += crc;
  return out;
}

Result<DeliveryState> DeliveryState::Parse(std::string_view text) {
  if (!text.starts_with(kHeaderLine))
    return Corrupt("missing header line");
  if (text.size() > kMaxSerializedBytes)
    return Corrupt("larger than " + std::to_string(kMaxSerializedBytes) + " bytes");
  const size_t crc_line = text.rfind(kCrcPrefix);
  if (crc_line == std::string_view::npos || text.back() != '\n' ||
      (crc_line > 0 && text[crc_line - 1] != '\n')) {
    return Corrupt("missing crc32 line");
  }
  uint32_t crc = 0;
  const std::string_view crc_hex =
      text.substr(crc_line + kCrcPrefix.size(), text.size() - 1 - crc_line - kCrcPrefix.size());
  const auto [end, error] =
      std::from_chars(crc_hex.data(), crc_hex.data() + crc_hex.size(), crc, 16);
  if (error != std::errc() || end != crc_hex.data() + crc_hex.size() || crc_hex.size() != 8 ||
      crc != Crc32(text.substr(0, crc_line))) {
    return Corrupt("crc32 mismatch");
  }
  DeliveryState state;
  std::string_view body = text.substr(kHeaderLine.size(), crc_line - kHeaderLine.size());
  size_t line_number = 1;
  while (!body.empty()) {
    ++line_number;
    const size_t eol = body.find('\n');
    const std::string_view line = body.substr(0, eol);
    body.remove_prefix(eol + 1);  // the crc line check guarantees a final '\n'
    const std::vector<std::string_view> fields = Split(line, ' ');
    const std::string where = "line " + std::to_string(line_number);
    Boot boot;
    if (fields.size() != 5 || !IsValidHostName(fields[0]) || !IsValidBootId(fields[1]) ||
        !ParseInt(fields[2], boot.high) || !ParseInt(fields[3], boot.updated_ms)) {
      return Corrupt(where + ": expected \"host boot_id high updated_ms gaps\"");
    }
    boot.boot_id = std::string(fields[1]);
    if (fields[4] != "-") {
      for (const std::string_view gap_text : Split(fields[4], ',')) {
        uint64_t gap = 0;
        if (!ParseInt(gap_text, gap) || gap >= boot.high ||
            (!boot.gaps.empty() && gap <= boot.gaps.back()) ||
            boot.gaps.size() >= kMaxGapsPerBoot) {
          return Corrupt(where + ": bad gap list");
        }
        boot.gaps.push_back(gap);
      }
    }
    std::vector<Boot>& boots = state.hosts_[std::string(fields[0])];
    if (boots.size() >= kMaxBootsPerHost || state.hosts_.size() > kMaxHosts)
      return Corrupt(where + ": too many boots or hosts");
    for (const Boot& other : boots) {
      if (other.boot_id == boot.boot_id)
        return Corrupt(where + ": boot listed twice");
    }
    boots.push_back(std::move(boot));
  }
  return state;
}

}  // namespace expanse::spool
