// PcProfile: where a process's warps stood during a Phase B window, from CUPTI's PC sampling
// (cuda/pc_sampling.h): for each sampled instruction (function, cubin, PC offset) how many
// samples found its warp stalled for each reason, summed over the window. A trace segment
// carries it in otherData.pc_sampling (docs/formats/capture-spool.md), with the state that says
// whether the node let the job's process sample at all.
//
// Bounded (it lives in the job's process): at most kMaxFunctions functions, kMaxPcsPerFunction
// PCs each and kMaxPcs in all are kept; samples of others are counted in `unkept_samples`. The JSON
// holds the kTopFunctions functions with the most samples, each with its kTopPcs busiest PCs.
#ifndef EXPANSE_CAPTURE_PC_PROFILE_H_
#define EXPANSE_CAPTURE_PC_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

namespace expanse::capture {

// One (instruction, stall reason) count as CUPTI reports it in one GetData buffer. CUPTI may
// split one PC's samples over several buffers of a window; Add sums them.
struct PcSample {
  std::string_view function;
  uint64_t cubin_crc = 0;
  uint64_t pc_offset = 0;
  std::string_view stall_reason;
  uint64_t samples = 0;
};

enum class PcSamplingState {
  kNotTried,    // the window ended before sampling could start (no segment field)
  kSampled,     // sampled on at least one CUDA context
  kRestricted,  // the node or the driver does not let the job's process sample
  kUnavailable  // turned off, no PC sampling in the libraries, or a CUPTI error: `reason`
};

class PcProfile {
 public:
  static constexpr size_t kMaxFunctions = 2048;
  static constexpr size_t kMaxPcsPerFunction = 256;
  static constexpr size_t kMaxPcs = 16384;
  static constexpr size_t kMaxNameBytes = 512;
  static constexpr size_t kTopFunctions = 50;
  static constexpr size_t kTopPcs = 16;

  // `reason` is cut to kMaxNameBytes, control characters made spaces.
  void SetState(PcSamplingState state, std::string reason = "");
  PcSamplingState state() const { return state_; }
  const std::string& reason() const { return reason_; }
  // The sampling period CUPTI was given (2^period cycles between samples per SM).
  void SetPeriod(uint32_t period) { period_ = period; }

  void Add(const PcSample& sample);
  // One GetData buffer's totals: every sample taken (any reason, any kernel), those CUPTI lost,
  // and whether the hardware buffer had filled.
  void AddTotals(uint64_t total_samples, uint64_t dropped_samples, bool hardware_buffer_full);

  // Adds everything `other` counted (its state and period are not taken).
  void Merge(const PcProfile& other);

  uint64_t kept_samples() const { return kept_samples_; }

  // {"state": "sampled", "period": 2^k exponent, "total_samples", "dropped_samples",
  //  "hardware_buffer_full", "unkept_samples", "stall_reasons": {reason: samples},
  //  "functions": [{"name", "samples", "stall_reasons": {…},
  //                 "pcs": [{"cubin_crc", "pc_offset", "samples", "stall_reasons": {…}}]}]}
  // or {"state": "restricted" | "unavailable", "reason": "…"}.
  nlohmann::json ToJson() const;

 private:
  struct Pc {
    uint64_t samples = 0;
    std::map<std::string, uint64_t, std::less<>> stalls;
  };
  struct Function {
    uint64_t samples = 0;
    std::map<std::string, uint64_t, std::less<>> stalls;
    std::map<std::pair<uint64_t, uint64_t>, Pc> pcs;  // (cubin crc, pc offset)
  };

  PcSamplingState state_ = PcSamplingState::kNotTried;
  std::string reason_;
  uint32_t period_ = 0;
  std::map<std::string, Function, std::less<>> functions_;
  std::map<std::string, uint64_t, std::less<>> stalls_;
  size_t pcs_ = 0;
  uint64_t kept_samples_ = 0;
  uint64_t unkept_samples_ = 0;
  uint64_t total_samples_ = 0;
  uint64_t dropped_samples_ = 0;
  uint64_t hardware_buffer_full_ = 0;
};

}  // namespace expanse::capture

#endif  // EXPANSE_CAPTURE_PC_PROFILE_H_
