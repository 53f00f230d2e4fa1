// The persistence interface for SLURM jobs as the data plane learns about them: the job records
// (what was requested, where and when it ran), the exact per-node start and end from the Prolog
// and Epilog hooks, and which GPU each job held on each node over which time.
//
// Usage numbers (SM utilisation, memory, ...) are not here: they live in the telemetry store as
// per-GPU series, and a job's usage is computed by joining those series with the job's GPU
// allocations. Keeping the job out of series keys avoids per-job label explosion.
//
// Every write is idempotent, because ingest batches are delivered at least once.
#ifndef EXPANSE_STORE_JOB_STORE_H_
#define EXPANSE_STORE_JOB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace expanse::store {

struct JobRecord {
  std::string compute_id;
  // SLURM's id as text: "123", array tasks "123_4", heterogeneous components "123+1".
  std::string job_id;
  std::string name;
  std::string user;
  std::string account;
  std::string partition;
  std::string state;  // SLURM's base state: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
  std::string nodes;  // SLURM host list expression, e.g. "gpu[01-04]"
  int64_t submit_ms = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;  // 0 while running
  // Requested TRES.
  int64_t req_nodes = 0;
  int64_t req_cpus = 0;
  int64_t req_gpus = 0;
  int64_t req_mem_mib = 0;
  int64_t time_limit_s = 0;  // 0 = unlimited
  // When the daemon observed this version of the record; an older observation never
  // overwrites a newer one.
  int64_t observed_ms = 0;
};

struct JobNodeEvent {
  std::string compute_id;
  std::string job_id;
  std::string host;
  std::string kind;  // "start" (Prolog) or "end" (Epilog)
  int64_t at_ms = 0;
};

struct GpuAllocation {
  std::string compute_id;
  std::string job_id;
  std::string host;
  std::string gpu_uuid;
  int64_t gpu_index = -1;  // NVML index on that host, -1 unknown
  int64_t gpu_minor = -1;  // /dev/nvidiaN minor, -1 unknown
  int64_t from_ms = 0;
  int64_t to_ms = 0;  // 0 = still allocated
};

// Python stacks of a job's processes, sampled by the daemon and folded per aggregation window.
inline constexpr std::size_t kMaxFoldedStackBytes = 16 * 1024;
// Far above what a window of sampling can count; keeps sums over a job's stacks below 2^63.
inline constexpr int64_t kMaxStackSampleCount = 1'000'000'000;
inline constexpr int kMaxJobStacksLimit = 10'000;
// The folded text one JobStacks read returns by default (kMaxJobStacksLimit stacks of
// kMaxFoldedStackBytes would be 160 MiB).
inline constexpr size_t kMaxJobStacksBytes = size_t{16} << 20;
// Rows one retention call deletes at most: the store's writers wait while it runs.
inline constexpr int kMaxExpireStacksLimit = 10'000;

// One folded stack's count for one job, host and window. The thread states are the ones
// thread_state may hold: "gil" (held the GIL), "running", "idle", and "" for unknown.
struct StackSample {
  std::string compute_id;
  std::string job_id;
  std::string host;
  // The daemon's aggregation window, [window_start_ms, window_end_ms).
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;
  // "file.py:func:line;file.py:func:line;...", root frame first, leaf last; valid UTF-8
  // without control characters, no empty frame, at most kMaxFoldedStackBytes bytes.
  std::string folded;
  std::string thread_state;
  int64_t count = 0;      // samples of this stack in the window, 1..kMaxStackSampleCount
  bool gpu_idle = false;  // sampled while the job's GPUs were idle (burst mode)
};

// One window of one process's CUDA activity from the capture agent (docs/capture-agent.md): the
// aggregate document as the daemon sent it (wire/capture_records.h), which the store keeps
// whole; the server reads it back to sum a job's kernels, copies and synchronisation.
inline constexpr std::size_t kMaxCaptureWindowBytes = 128 * 1024;
inline constexpr int kMaxJobCaptureWindows = 100'000;
struct CaptureWindow {
  std::string compute_id;
  std::string job_id;
  std::string host;
  int64_t pid = 0;              // > 0
  int64_t window_start_ms = 0;  // > 0
  int64_t window_end_ms = 0;    // > window_start_ms
  std::string doc;              // a JSON object, 2..kMaxCaptureWindowBytes bytes
};

// One trace segment of the capture agent (docs/formats/trace-segment.md) as the server lists
// it: the facts of its otherData and the SHA-256 of its bytes, under which the segment store
// (server/segment_store.h) keeps them. Keyed by (compute_id, sha256): the same bytes delivered
// twice, by a retry or by both transports, are one segment.
inline constexpr int kMaxJobTraceSegments = 10'000;
struct TraceSegmentRecord {
  std::string compute_id;
  std::string sha256;  // 64 lowercase hex digits
  std::string job_id;
  std::string host;
  int64_t pid = 0;              // 1..2^31
  int64_t window_start_ms = 0;  // > 0
  int64_t window_end_ms = 0;    // > window_start_ms
  std::string trigger_id;       // 1..128 bytes
  std::string trigger_reason;   // 1..64 bytes
  int64_t bytes = 0;            // > 0
  int64_t events = 0;           // >= 0
  int64_t received_ms = 0;      // > 0, when the server first stored it
  // The window's PC sampling in brief (wire::TraceSegmentHeader::pc_sampling): "" when it has
  // none, else a JSON object of at most kMaxSegmentPcSamplingBytes.
  std::string pc_sampling;
};
inline constexpr std::size_t kMaxSegmentPcSamplingBytes = 4096;

// One folded stack summed over the hosts and windows of a query.
struct StackTotal {
  std::string folded;
  std::string thread_state;
  int64_t count = 0;
  int64_t gpu_idle_count = 0;  // the part of count sampled while the job's GPUs were idle
};

// Keyed by job id: the batch reads of one compute's jobs.
using NodeEventsByJob = std::map<std::string, std::vector<JobNodeEvent>>;
using GpuAllocationsByJob = std::map<std::string, std::vector<GpuAllocation>>;

struct JobFilter {
  std::vector<std::string> compute_ids;  // required: the computes the caller may see
  std::vector<std::string> states;       // empty = any
  std::string user;                      // "" = any
  std::string account;
  std::string partition;
  // Jobs whose [start, end) overlaps [from_ms, to_ms); a running job overlaps everything after
  // its start. 0 = open bound.
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int limit = 100;  // 1..1000
  int offset = 0;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Every method: kInvalidArgument naming the field for an empty compute_id, job_id, host or
  // gpu_uuid, a job_id over 64 bytes, a negative time or count, an interval ending before it
  // starts; kNotFound naming the compute when it is unknown. A write batch is one
  // transaction: one bad record and nothing of the batch is stored.

  // Inserts or updates by (compute_id, job_id); a record whose observed_ms is older than the
  // stored one is ignored. All records in one transaction.
  virtual Status UpsertJobs(const std::vector<JobRecord>& jobs) = 0;
  // Idempotent on (compute_id, job_id, host, kind): a repeated event is ignored (the first
  // at_ms stays). kind is "start" or "end", at_ms > 0. The job record need not exist yet.
  // kInvalidArgument (nothing of the call stored) when a job would have more than
  // kMaxRowsPerJob events.
  virtual Status AddNodeEvents(const std::vector<JobNodeEvent>& events) = 0;
  // Inserts or updates by (compute_id, job_id, host, gpu_uuid): a later to_ms closes an
  // allocation; from_ms keeps the earliest value seen. from_ms > 0; a known gpu_index or
  // gpu_minor is not replaced by -1. kInvalidArgument (nothing of the call stored) when a
  // job would hold more than kMaxRowsPerJob allocations.
  virtual Status PutGpuAllocations(const std::vector<GpuAllocation>& allocations) = 0;
  // The most GPU allocations, and node events, one job may have: 2,048 nodes of 8 GPUs. Every
  // read of the job loads them all (and the job list asks the telemetry store about each), so
  // a compute's daemon naming made-up hosts or GPUs must not grow one job without end.
  static constexpr int64_t kMaxRowsPerJob = 16'384;
  // Idempotent on (compute_id, job_id, host, window_start_ms, folded, thread_state, gpu_idle):
  // a window's aggregate is final, so a repeat replaces count (and window_end_ms), never adds
  // to it. Also kInvalidArgument for a window that does not end after it starts, a
  // non-positive or oversized count, a thread_state outside the set, or a folded stack that
  // is empty, too long, not UTF-8, holds a control character or an empty frame.
  virtual Status PutStacks(const std::vector<StackSample>& stacks) = 0;
  // Retention: deletes up to `limit` (1..kMaxExpireStacksLimit) stack windows that ended
  // before `before_ms`, oldest first, and returns how many. kInvalidArgument for a limit out of
  // range.
  virtual Result<int64_t> ExpireStacks(int64_t before_ms, int limit) = 0;
  // Idempotent on (compute_id, job_id, host, pid, window_start_ms): a repeat replaces the
  // window. kInvalidArgument for an empty key, a pid or window out of range, or a doc that is
  // not 2..kMaxCaptureWindowBytes bytes; kNotFound for an unknown compute.
  virtual Status PutCaptureWindows(const std::vector<CaptureWindow>& windows) = 0;

  virtual Result<JobRecord> GetJob(std::string_view compute_id, std::string_view job_id) = 0;
  // Newest start first (pending jobs by submit time), then job id. Text filters match exactly.
  virtual Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // Oldest first. Empty when none were reported.
  virtual Result<std::vector<JobNodeEvent>> NodeEvents(std::string_view compute_id,
                                                       std::string_view job_id) = 0;
  // By host, then GPU index. Empty when none were reported.
  virtual Result<std::vector<GpuAllocation>> GpuAllocations(std::string_view compute_id,
                                                            std::string_view job_id) = 0;
  // NodeEvents and GpuAllocations of many jobs of one compute at once (a page of the job
  // list), each job's list in the same order as there: one read, where a call per job costs a
  // transaction and a query each. Jobs without rows have no entry; a repeated id counts once.
  virtual Result<NodeEventsByJob> NodeEventsFor(std::string_view compute_id,
                                                const std::vector<std::string>& job_ids) = 0;
  virtual Result<GpuAllocationsByJob> GpuAllocationsFor(
      std::string_view compute_id, const std::vector<std::string>& job_ids) = 0;
  // The allocations on one host overlapping [from_ms, to_ms): which job held which GPU when.
  // 0 = open bound, as in JobFilter; an allocation with to_ms 0 overlaps everything after its
  // from_ms. Oldest from_ms first.
  virtual Result<std::vector<GpuAllocation>> HostGpuAllocations(std::string_view compute_id,
                                                                std::string_view host,
                                                                int64_t from_ms, int64_t to_ms) = 0;
  // The job's stacks of the windows overlapping [from_ms, to_ms) (0 = open bound), summed per
  // (folded, thread_state) over hosts and windows: the `limit` (1..kMaxJobStacksLimit) with
  // the highest count, then by folded and thread_state, and no more once their folded stacks
  // hold more than max_folded_bytes (the stack that passes it is the last returned, so a
  // caller sees it was passed; the database sends no more). A window that straddles a bound
  // counts whole. Empty when none were reported; the job record need not exist.
  virtual Result<std::vector<StackTotal>> JobStacks(
      std::string_view compute_id, std::string_view job_id, int64_t from_ms, int64_t to_ms,
      int limit, size_t max_folded_bytes = kMaxJobStacksBytes) = 0;
  // The job's capture windows overlapping [from_ms, to_ms) (0 = open bound), oldest first
  // (then host, pid), at most `limit` (1..kMaxJobCaptureWindows), and no more once their
  // documents hold more than max_doc_bytes (the window that passes it is the last returned, so
  // a caller sees it was passed). Empty when none were reported; the job record need not exist.
  virtual Result<std::vector<CaptureWindow>> JobCaptureWindows(std::string_view compute_id,
                                                               std::string_view job_id,
                                                               int64_t from_ms, int64_t to_ms,
                                                               int limit, size_t max_doc_bytes) = 0;

  // Records a segment whose bytes the segment store holds. True when it is new; false when
  // (compute_id, sha256) was there already (the first record stays). kInvalidArgument for a
  // field out of range, kNotFound for an unknown compute.
  virtual Result<bool> PutTraceSegment(const TraceSegmentRecord& segment) = 0;
  // The job's segments whose windows overlap [from_ms, to_ms) (0 = open bound), oldest window
  // first (then host, pid, sha256), at most `limit` (1..kMaxJobTraceSegments).
  virtual Result<std::vector<TraceSegmentRecord>> JobTraceSegments(std::string_view compute_id,
                                                                   std::string_view job_id,
                                                                   int64_t from_ms, int64_t to_ms,
                                                                   int limit) = 0;
  // kNotFound when the compute has no segment with that sha256.
  virtual Result<TraceSegmentRecord> GetTraceSegment(std::string_view compute_id,
                                                     std::string_view sha256) = 0;
  // Retention: forgets up to `limit` segments received before `before_ms` (oldest first),
  // each once `remove_bytes` removed what the segment store keeps of it, and returns them.
  // remove_bytes runs outside any transaction (a bucket's DELETE holds no store lock). A
  // failing remove_bytes fails the call: the segments before it are forgotten, it and those
  // after it are kept for the next time (bytes already removed are then found gone, which is
  // fine).
  virtual Result<std::vector<TraceSegmentRecord>> ExpireTraceSegments(
      int64_t before_ms, int limit,
      const std::function<Status(const TraceSegmentRecord&)>& remove_bytes) = 0;

  // The exactly-once record of ingest batches whose samples go to a remote telemetry store
  // (--telemetry-store remote), shared by every replica on the database (docs/scaling.md).
  // ClaimIngestBatch says what the caller must do with batch_id (the batch's idempotency
  // key, which names its compute): kClaimed, write the samples and then
  // MarkIngestBatchStored; kStored, nothing (a repeat); kInFlight, another replica holds a
  // claim younger than lease_ms and is writing it (ask the sender to retry). A claim older
  // than lease_ms is taken over: its holder died or gave up between claim and mark.
  // kCredentialRefused: the batch named a credential (BatchToClaim::credential_hash) that is
  // revoked, unknown, or another compute's; nothing was claimed for it.
  enum class BatchClaim { kClaimed, kStored, kInFlight, kCredentialRefused };
  // The longest batch id the table takes.
  static constexpr size_t kMaxBatchIdBytes = 256;
  // The batched forms take the batches that arrive at a replica together in one statement
  // each, whatever their number (RemoteTelemetryStore writes them in one remote write). Batch
  // ids must be distinct within a call (kInvalidArgument otherwise); answers come in order.
  struct BatchToClaim {
    std::string_view compute_id;
    std::string_view batch_id;
    // When not empty, the batch is claimed only if the credential with this stored hash is
    // live and belongs to compute_id, checked in the claim's own statement: a replica that
    // knows the credential from an earlier request needs no read of its own to authenticate
    // a batch of samples, and a revoked credential still stores nothing.
    std::string_view credential_hash = {};
  };
  Result<std::vector<BatchClaim>> ClaimIngestBatches(const std::vector<BatchToClaim>& batches,
                                                     int64_t now_ms, int64_t lease_ms) {
    return MarkAndClaimIngestBatches({}, batches, now_ms, lease_ms);
  }
  // Marks `to_mark` (batches the caller claimed and has written; may be empty) and claims
  // `batches` (at least one) in one statement: a busy replica marks a written group with the
  // next group's claim, one round trip and commit instead of two. Ids must be distinct across
  // both lists. A name in `to_mark` that was never claimed is not an error here. On
  // PostgreSQL the marks are an UPDATE in the claim's WITH clause, whose row locks can meet
  // another replica's claim of the same batches in the other order: PostgreSQL then aborts one
  // statement (a deadlock), which its caller makes again without the marks.
  virtual Result<std::vector<BatchClaim>> MarkAndClaimIngestBatches(
      const std::vector<std::string_view>& to_mark, const std::vector<BatchToClaim>& batches,
      int64_t now_ms, int64_t lease_ms) = 0;
  // Every claimed batch of batch_ids is marked; kNotFound says how many were never claimed (a
  // caller then answers the whole group with the error: the marked ones are repeats to the
  // retry, the others are claimed and written again).
  virtual Status MarkIngestBatchesStored(const std::vector<std::string_view>& batch_ids,
                                         int64_t now_ms) = 0;
  // Gives up claims whose write failed, so that the sender's retry need not wait out the
  // lease; a stored batch stays stored. Only claims still as the caller made them
  // (claimed_at_ms, its claim's now_ms): one another replica took over after the lease is
  // that replica's, and releasing it would make its mark fail although it wrote the batch.
  virtual Status ReleaseIngestBatches(const std::vector<std::string_view>& batch_ids,
                                      int64_t claimed_at_ms) = 0;
  // One batch.
  Result<BatchClaim> ClaimIngestBatch(std::string_view compute_id, std::string_view batch_id,
                                      int64_t now_ms, int64_t lease_ms) {
    EXPANSE_ASSIGN_OR_RETURN(std::vector<BatchClaim> claims,
                             ClaimIngestBatches({{compute_id, batch_id}}, now_ms, lease_ms));
    return claims.front();
  }
  Status MarkIngestBatchStored(std::string_view batch_id, int64_t now_ms) {
    return MarkIngestBatchesStored({batch_id}, now_ms);
  }
  Status ReleaseIngestBatch(std::string_view batch_id, int64_t claimed_at_ms) {
    return ReleaseIngestBatches({batch_id}, claimed_at_ms);
  }
  // Drops the records of batches claimed before before_ms (a sender's retries stop long
  // before); returns how many.
  virtual Result<int64_t> ForgetIngestBatches(int64_t before_ms) = 0;
};

}  // namespace expanse::store

#endif  // EXPANSE_STORE_JOB_STORE_H_
