// SpoolHandoff: puts each NodeCollection's records into the node's spool batch and tells the
// collector, once the batch's fate is known, which hook event files and capture aggregates to
// delete (the batch became a spool file) and which to offer again (it was dropped).
//
// Bounded whatever the spool does: what the batch refuses (it is full, e.g. while the shared
// mount fails every write) goes back to the collector at once, so its events and capture
// windows are collected again rather than deleted unsent; series it refuses are dropped and
// counted by the writer. What the batch took is remembered by file names and stack windows
// only, never its series, for as long as writes fail.
#ifndef EXPANSE_AGENT_SPOOL_HANDOFF_H_
#define EXPANSE_AGENT_SPOOL_HANDOFF_H_

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/node_collector.h"
#include "core/status.h"
#include "spool/spool_writer.h"

namespace expanse::agent {

// How the sampler dumps every record and its health report: with the replace handler, so a
// field that is not UTF-8 (a process name, a refused file's message) costs a character, never
// the record (a throw would end the sampler).
std::string DumpJson(const nlohmann::json& value);

struct SpoolHandoffCallbacks {
  std::function<void(const NodeCollection&)> commit;   // NodeCollector::Commit
  std::function<void(const NodeCollection&)> restore;  // NodeCollector::Restore
};

class SpoolHandoff {
 public:
  SpoolHandoff(spool::SpoolWriter& writer, SpoolHandoffCallbacks callbacks)
      : writer_(writer), callbacks_(std::move(callbacks)) {}

  // Adds the collection's records to the batch; restores at once what the batch refused.
  void Put(const NodeCollection& collection);
  // Flushes the writer, then commits what a written file holds or restores what a full spool
  // dropped. Returns the writer's status; `*wrote` whether a file was written.
  Status Flush(bool force, bool* wrote);

  // Collections in the batch whose fate is not known yet (file names and stacks only).
  size_t pending() const { return pending_.size(); }

 private:
  bool Add(std::string_view kind, const std::string& payload);

  spool::SpoolWriter& writer_;
  SpoolHandoffCallbacks callbacks_;
  std::vector<NodeCollection> pending_;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_SPOOL_HANDOFF_H_
