#include "capture/pc_profile.h"

#include <algorithm>
#include <vector>

namespace expanse::capture {
namespace {

std::string Cut(std::string_view name) {
  return std::string(name.substr(0, PcProfile::kMaxNameBytes));
}

// The entries of `items` with the most samples first (ties by key, so the output is stable),
// at most `limit` of them.
template <typename Map>
std::vector<typename Map::const_iterator> Busiest(const Map& items, size_t limit) {
  std::vector<typename Map::const_iterator> order;
  for (auto it = items.begin(); it != items.end(); ++it)
    order.push_back(it);
  std::stable_sort(order.begin(), order.end(),
                   [](auto a, auto b) { return a->second.samples > b->second.samples; });
  if (order.size() > limit)
    order.resize(limit);
  return order;
}

const char* StateName(PcSamplingState state) {
  switch (state) {
    case PcSamplingState::kSampled:
      return "sampled";
    case PcSamplingState::kRestricted:
      return "restricted";
    case PcSamplingState::kUnavailable:
      return "unavailable";
    case PcSamplingState::kNotTried:
      break;
  }
  return "not_tried";
}

}  // namespace

void PcProfile::SetState(PcSamplingState state, std::string reason) {
  state_ = state;
  reason_ = Cut(reason);
  for (char& c : reason_) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = ' ';
  }
}

void PcProfile::Add(const PcSample& sample) {
  if (sample.samples == 0)
    return;
  auto fn = functions_.find(sample.function.substr(0, kMaxNameBytes));
  if (fn == functions_.end()) {
    if (functions_.size() >= kMaxFunctions) {
      unkept_samples_ += sample.samples;
      return;
    }
    fn = functions_.emplace(Cut(sample.function), Function{}).first;
  }
  const std::pair<uint64_t, uint64_t> key{sample.cubin_crc, sample.pc_offset};
  auto pc = fn->second.pcs.find(key);
  if (pc == fn->second.pcs.end()) {
    if (fn->second.pcs.size() >= kMaxPcsPerFunction || pcs_ >= kMaxPcs) {
      unkept_samples_ += sample.samples;
      return;
    }
    pc = fn->second.pcs.emplace(key, Pc{}).first;
    ++pcs_;
  }
  const std::string reason = Cut(sample.stall_reason);
  pc->second.samples += sample.samples;
  pc->second.stalls[reason] += sample.samples;
  fn->second.samples += sample.samples;
  fn->second.stalls[reason] += sample.samples;
  stalls_[reason] += sample.samples;
  kept_samples_ += sample.samples;
}

void PcProfile::AddTotals(uint64_t total_samples, uint64_t dropped_samples,
                          bool hardware_buffer_full) {
  total_samples_ += total_samples;
  dropped_samples_ += dropped_samples;
  hardware_buffer_full_ += hardware_buffer_full ? 1 : 0;
}

void PcProfile::Merge(const PcProfile& other) {
  for (const auto& [name, fn] : other.functions_) {
    for (const auto& [key, pc] : fn.pcs) {
      for (const auto& [reason, samples] : pc.stalls) {
        Add({.function = name,
             .cubin_crc = key.first,
             .pc_offset = key.second,
             .stall_reason = reason,
             .samples = samples});
      }
    }
  }
  unkept_samples_ += other.unkept_samples_;
  total_samples_ += other.total_samples_;
  dropped_samples_ += other.dropped_samples_;
  hardware_buffer_full_ += other.hardware_buffer_full_;
}

nlohmann::json PcProfile::ToJson() const {
  nlohmann::json out = {{"state", StateName(state_)}};
  if (state_ != PcSamplingState::kSampled) {
    out["reason"] = reason_;
    return out;
  }
  nlohmann::json functions = nlohmann::json::array();
  for (auto fn : Busiest(functions_, kTopFunctions)) {
    nlohmann::json pcs = nlohmann::json::array();
    for (auto pc : Busiest(fn->second.pcs, kTopPcs)) {
      pcs.push_back({{"cubin_crc", pc->first.first},
                     {"pc_offset", pc->first.second},
                     {"samples", pc->second.samples},
                     {"stall_reasons", pc->second.stalls}});
    }
    functions.push_back({{"name", fn->first},
                         {"samples", fn->second.samples},
                         {"stall_reasons", fn->second.stalls},
                         {"pcs", std::move(pcs)}});
  }
  out["period"] = period_;
  out["total_samples"] = total_samples_;
  out["dropped_samples"] = dropped_samples_;
  out["hardware_buffer_full"] = hardware_buffer_full_;
  out["unkept_samples"] = unkept_samples_;
  out["stall_reasons"] = stalls_;
  out["functions"] = std::move(functions);
  return out;
}

}  // namespace expanse::capture
