#include "agent/spool_handoff.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/job_events.h"
#include "wire/records.h"

namespace expanse::agent {

namespace {

// Stack windows and capture aggregates go in records of at most this many bytes each (a
// record's payload is capped at 8 MiB).
constexpr size_t kChunkRecordBytes = 4 << 20;

// Encodes `items` into JSON arrays of at most kChunkRecordBytes and hands each to `added`,
// with the range [from, to) of the items it holds.
template <typename Item, typename Encode, typename Added>
void AddInChunks(const std::vector<Item>& items, Encode encode, Added added) {
  nlohmann::json chunk = nlohmann::json::array();
  size_t bytes = 0, first = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    nlohmann::json entry = encode(items[i]);
    const size_t size = DumpJson(entry).size() + 1;
    if (!chunk.empty() && bytes + size > kChunkRecordBytes) {
      added(DumpJson(chunk), first, i);
      chunk = nlohmann::json::array();
      bytes = 0;
      first = i;
    }
    chunk.push_back(std::move(entry));
    bytes += size;
  }
  if (!chunk.empty())
    added(DumpJson(chunk), first, items.size());
}

}  // namespace

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool SpoolHandoff::Add(std::string_view kind, const std::string& payload) {
  // A refused record is counted by the writer.
  return writer_.Add(kind, payload).ok();
}

void SpoolHandoff::Put(const NodeCollection& c) {
  NodeCollection taken, refused;
  if (!c.series.empty()) {
    nlohmann::json series = nlohmann::json::array();
    for (const wire::SeriesRecord& s : c.series)
      series.push_back(wire::Encode(s));
    Add("gpu_series", DumpJson(series));
  }
  // The job events and the allocations derived from them go together or not at all: an event
  // taken with its opening refused would lose the opening for good (its file is deleted, and
  // openings are derived from events only), and a start refused with its end taken would make
  // the end's job look open again when the start is read again. Closes are kept until the
  // batch's fate is known, like the files: an event read again does not derive them again (an
  // Epilog's close, or a crashed run's, comes from allocations since closed).
  using Records = std::vector<std::pair<std::string, std::string>>;
  Records events, allocations;
  for (const JobEvent& e : c.events)
    events.emplace_back("job_event", DumpJson(ToJson(e)));
  for (const wire::GpuAllocationRecord& a : c.allocations)
    allocations.emplace_back("gpu_allocation", DumpJson(wire::Encode(a)));
  // c.allocations is in time order (Collect): an opening begins at its start event's time, so
  // the records before the first event's time are all closes (kept when refused, so they may
  // go one by one), and the first `k` events go with every record from there up to the k-th
  // one's time. (Such a prefix may hold a later event's close, or an opening of a later event
  // in the same millisecond: sent again with it, a duplicate the server keeps once.)
  const auto by_time = [&](int64_t t) {
    return static_cast<size_t>(std::upper_bound(c.allocations.begin(), c.allocations.end(), t,
                                                [](int64_t at, const wire::GpuAllocationRecord& a) {
                                                  return at < a.from_ms;
                                                }) -
                               c.allocations.begin());
  };
  const size_t closes_first =
      events.empty() ? allocations.size() : by_time(c.events.front().at_ms - 1);
  const auto cut = [&](size_t k) {
    return k == events.size() ? allocations.size() : by_time(c.events[k - 1].at_ms);
  };
  const auto prefix = [&](size_t k) {  // k >= 1 events, after the closes before them
    Records group(events.begin(), events.begin() + static_cast<ptrdiff_t>(k));
    group.insert(group.end(), allocations.begin() + static_cast<ptrdiff_t>(closes_first),
                 allocations.begin() + static_cast<ptrdiff_t>(cut(k)));
    return group;
  };
  size_t events_taken = 0, allocations_taken = 0;
  Records whole = events;
  whole.insert(whole.end(), allocations.begin(), allocations.end());
  if (const Status all = writer_.AddAll(whole); all.ok()) {
    events_taken = events.size();
    allocations_taken = allocations.size();
  } else if (all.reason() == "spool_group_too_large") {
    // More than a whole batch (thousands of events, or closes kept through an outage): the
    // closes before the first event one by one, then the longest run of events that fits with
    // its records; the rest waits for the next collection.
    while (allocations_taken < closes_first &&
           Add(allocations[allocations_taken].first, allocations[allocations_taken].second))
      ++allocations_taken;
    if (allocations_taken == closes_first && !events.empty()) {
      size_t lo = 0, hi = events.size();
      while (lo < hi) {
        const size_t mid = (lo + hi + 1) / 2;
        if (writer_.Fits(prefix(mid)))
          lo = mid;
        else
          hi = mid - 1;
      }
      if (lo > 0 && writer_.AddAll(prefix(lo)).ok()) {
        events_taken = lo;
        allocations_taken = cut(lo);
      }
    }
    // With every event in, the closes left (none is an opening) go one by one, in order.
    while (events_taken == events.size() && allocations_taken >= closes_first &&
           allocations_taken < allocations.size() &&
           Add(allocations[allocations_taken].first, allocations[allocations_taken].second))
      ++allocations_taken;
  }
  for (size_t i = 0; i < c.events.size() && i < c.event_files.size(); ++i)
    (i < events_taken ? taken : refused).event_files.push_back(c.event_files[i]);
  for (size_t i = 0; i < c.allocations.size(); ++i) {
    if (c.allocations[i].to_ms != 0)
      (i < allocations_taken ? taken : refused).allocations.push_back(c.allocations[i]);
  }
  AddInChunks(
      c.stacks, [](const wire::StackRecord& r) { return wire::Encode(r); },
      [&](const std::string& payload, size_t from, size_t to) {
        NodeCollection& fate = Add("py_stacks", payload) ? taken : refused;
        fate.stacks.insert(fate.stacks.end(), c.stacks.begin() + from, c.stacks.begin() + to);
      });
  // The capture agents' windows, a few KiB each; an aggregate's file is aggregates[i]'s.
  AddInChunks(
      c.captures, [](const wire::CaptureAggregateRecord& r) { return wire::Encode(r); },
      [&](const std::string& payload, size_t from, size_t to) {
        NodeCollection& fate = Add("capture_aggregates", payload) ? taken : refused;
        for (size_t i = from; i < to && i < c.capture_files.size(); ++i)
          fate.capture_files.push_back(c.capture_files[i]);
      });
  const auto holds = [](const NodeCollection& part) {
    return !part.event_files.empty() || !part.stacks.empty() || !part.capture_files.empty() ||
           !part.allocations.empty();
  };
  if (holds(refused))
    callbacks_.restore(refused);
  // One entry even when empty, so that the next written file still commits (the collector
  // also deletes its malformed event files then); more only with something to commit.
  if (holds(taken) || pending_.empty())
    pending_.push_back(std::move(taken));
}

Status SpoolHandoff::Flush(bool force, bool* wrote) {
  const spool::SpoolWriterCounters before = writer_.counters();
  Status flushed = writer_.Flush(force);
  const spool::SpoolWriterCounters after = writer_.counters();
  *wrote = after.files_written > before.files_written;
  if (after.records_dropped_spool_full > before.records_dropped_spool_full) {
    // The batch was dropped: its events and windows are collected again once there is room.
    for (const NodeCollection& p : pending_)
      callbacks_.restore(p);
    pending_.clear();
  } else if (*wrote) {
    for (const NodeCollection& p : pending_)
      callbacks_.commit(p);
    pending_.clear();
  }
  return flushed;
}

}  // namespace expanse::agent
