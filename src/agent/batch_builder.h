// BatchBuilder: gathers what one ingest batch carries (docs/formats/ingest-batch.md) — series
// from any host, job records, per-node job events and GPU allocations — and renders it as the
// JSON document for a given stream sequence (the outbox assigns the sequence at enqueue time).
//
// Everything is held as wire records (wire/records.h) and encoded once, by Render. What a
// worker wrote is hostile input: AddSpoolRecord decodes every element with the same decoders
// the server applies and keeps only what passes. So one bad element is dropped and counted,
// and never makes the server refuse the whole batch with every other worker's samples in it.
#ifndef EXPANSE_AGENT_BATCH_BUILDER_H_
#define EXPANSE_AGENT_BATCH_BUILDER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/job_events.h"
#include "core/result.h"
#include "wire/capture_records.h"
#include "wire/records.h"

namespace expanse::agent {

class BatchBuilder {
 public:
  // This host's own records, which need no checks.
  void AddSeries(std::vector<wire::SeriesRecord> series);
  void AddJobEvent(const JobEvent& event);
  // One GPU of a job on a host; `to_ms` 0 while allocated.
  void AddAllocation(wire::GpuAllocationRecord allocation);
  // A job record (squeue/sacct).
  void AddJob(wire::JobRecord job);
  // Folded Python stacks per job and window.
  void AddStacks(std::vector<wire::StackRecord> stacks);
  // The capture agents' per-process windows (this host's sampler already checked them).
  void AddCaptureAggregates(std::vector<wire::CaptureAggregateRecord> aggregates);
  // What AddSpoolRecord took of one record.
  struct Intake {
    uint64_t accepted = 0;  // elements added
    uint64_t refused = 0;   // elements dropped; a payload refused whole counts 1
    // The first refusal: kInvalidArgument naming the bad field's path
    // ("gpu_series[2].t0 must be an integer from 0 to ..."), reason "bad_record" or the
    // parser's ("invalid_json", "json_too_deep", "json_too_large").
    Status first_refusal;
  };
  // Adds what is valid of a worker's spool record, by kind ("gpu_series", "job_event",
  // "gpu_allocation", "py_stacks", "capture_aggregates"); kinds from a newer sampler are ignored
  // (workers can be upgraded first). `only_host`, when not empty, is the host whose spool directory
  // the record came from: a series or stack naming any other host is refused (reason "wrong_host"),
  // so a worker cannot report GPUs or stacks for another node. Job events and allocations are not
  // checked: they carry SLURM's NodeName (SLURMD_NODENAME), which a site may set apart from
  // the host's name. Never throws.
  Intake AddSpoolRecord(std::string_view kind, std::string_view payload,
                        std::string_view only_host = {});

  // Replaces job ids by what `rename` returns for them (nullopt: keep): in job events, GPU
  // allocations and "job/<id>" series devices. The hooks know a job only by SLURM_JOB_ID, while
  // an array task is "123_4" to squeue and the server (SLURM 22.05 gives the Prolog no array ids).
  void RenameJobs(const std::function<std::optional<std::string>(const std::string&)>& rename);

  bool empty() const;
  const std::vector<wire::GpuAllocationRecord>& allocations() const { return allocations_; }
  const std::vector<wire::SeriesRecord>& series() const { return series_; }
  size_t samples() const { return samples_; }
  // The document with "sequence": sequence. The builder keeps its contents (the outbox may
  // call the payload builder again).
  nlohmann::json Render(uint64_t sequence, const std::string& stream) const;

 private:
  std::vector<wire::SeriesRecord> series_;
  std::vector<wire::JobRecord> jobs_;
  std::vector<wire::JobEventRecord> job_events_;
  std::vector<wire::GpuAllocationRecord> allocations_;
  std::vector<wire::StackRecord> stacks_;
  std::vector<wire::CaptureAggregateRecord> captures_;
  size_t samples_ = 0;
};

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_BATCH_BUILDER_H_
