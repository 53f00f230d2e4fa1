// Internal to the spool module: the writer's small local state file, which carries the last
// sequence number it used across a restart of the sampler (docs/formats/spool.md, "Writer
// state"). It lives on local disk, not on the share: the controller deletes drained files,
// so the spool directory alone cannot tell a restarted writer where it stopped.
#ifndef EXPANSE_SPOOL_WRITER_STATE_H_
#define EXPANSE_SPOOL_WRITER_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace expanse::spool {

inline constexpr char kWriterStateFileName[] = "spool-writer.state";

struct WriterState {
  std::string boot_id;
  uint64_t sequence = 0;  // the last sequence number handed out in that boot
};

std::string FormatWriterState(const WriterState& state);
// nullopt for anything FormatWriterState did not write.
std::optional<WriterState> ParseWriterState(std::string_view text);

}  // namespace expanse::spool

#endif  // EXPANSE_SPOOL_WRITER_STATE_H_
