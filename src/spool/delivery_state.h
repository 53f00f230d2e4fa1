// Internal to the spool module: which (host, boot id, sequence) the aggregator already handed
// to its sink, so a spool file that re-appears (its delete failed after the sink took it, or
// a restart raced the delete) is not delivered twice. Persisted as a small text file with a
// crc32 line (docs/formats/spool.md, "Delivery state").
//
// Per (host, boot) it keeps the highest delivered sequence and up to kMaxGapsPerBoot lower
// sequences that were skipped on the way up: a file that shows up late (a stale NFS directory
// listing, a slow rename) is still delivered, while everything else at or below the high
// mark counts as a duplicate. Writers number from 1 per boot; a host keeps its
// kMaxBootsPerHost most recently delivered boots.
#ifndef EXPANSE_SPOOL_DELIVERY_STATE_H_
#define EXPANSE_SPOOL_DELIVERY_STATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::spool {

class DeliveryState {
 public:
  static constexpr size_t kMaxBootsPerHost = 4;
  static constexpr size_t kMaxGapsPerBoot = 8;
  static constexpr size_t kMaxHosts = 1'000'000;
  static constexpr size_t kMaxSerializedBytes = 256u << 20;

  bool WasDelivered(std::string_view host, std::string_view boot_id, uint64_t sequence) const;
  void MarkDelivered(std::string_view host, std::string_view boot_id, uint64_t sequence,
                     int64_t now_ms);
  // The time of the last delivery from this boot (the aggregator's clock); nullopt for a boot
  // it does not remember.
  std::optional<int64_t> LastDeliveredMs(std::string_view host, std::string_view boot_id) const;

  std::string Serialize() const;
  // kDataLoss (reason "spool_state_corrupt") for anything Serialize did not write.
  static Result<DeliveryState> Parse(std::string_view text);

  friend bool operator==(const DeliveryState&, const DeliveryState&) = default;

 private:
  struct Boot {
    std::string boot_id;
    uint64_t high = 0;
    std::vector<uint64_t> gaps;  // ascending, all < high
    int64_t updated_ms = 0;

    friend bool operator==(const Boot&, const Boot&) = default;
  };
  const Boot* FindBoot(std::string_view host, std::string_view boot_id) const;

  std::map<std::string, std::vector<Boot>, std::less<>> hosts_;
};

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_DELIVERY_STATE_H_
