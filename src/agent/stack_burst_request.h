// A stack burst request (docs/formats/stack-burst.md): the controller's live detection
// (live_detector.h) asks every node of a stuck or idle job to sample the job's Python stacks at
// once, by writing one small file per node into the shared control tree,
// <prefix>/spool/control/<host>/burst-<trigger_ms>-<nonce>.json, atomically (temporary name,
// rename). The node's sampler reads it as hostile input (burst_inbox.h): anything that can
// write to the shared mount controls its name, type, owner and bytes.
#ifndef EXPANSE_AGENT_STACK_BURST_REQUEST_H_
#define EXPANSE_AGENT_STACK_BURST_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/host.h"
#include "core/result.h"

namespace expanse::agent {

inline constexpr int64_t kStackBurstRequestVersion = 1;
// A request is ~200 bytes; anything past this is not one.
inline constexpr size_t kMaxStackBurstRequestBytes = 1024;
inline constexpr size_t kStackBurstNonceHexDigits = 16;

struct StackBurstRequest {
  std::string job_id;        // as squeue and the server name it; clean text, 1..64
  int64_t slurm_job_id = 0;  // SLURM's number on the node (its cgroup); 0 when unknown
  std::string reason;        // "stuck" or "no_process"
  int64_t trigger_ms = 0;    // the controller's clock when it asked; never a whole second
  int64_t since_ms = 0;      // the start of the state that passed the threshold
  std::string nonce;         // 16 lowercase hex digits, also in the file name
};

// <prefix>/spool/control: the root of the shared control tree, one directory per host below.
std::string ControlTreeRoot(const std::string& shared_prefix);
// "burst-<trigger_ms>-<nonce>.json".
std::string StackBurstFileName(const StackBurstRequest& request);
// 16 lowercase hex digits from the system's random source: tells requests of the same
// millisecond apart and ties a file's name to its body. Not a secret.
std::string NewStackBurstNonce();
// The file's JSON body.
std::string EncodeStackBurstRequest(const StackBurstRequest& request);
// A file named `name` holding `bytes`, both hostile: kInvalidArgument with reason "bad_name"
// (not burst-<digits, no leading zero>-<16 lowercase hex>.json), "too_large", the JSON
// parser's ("invalid_json", "json_too_deep", ...), "unsupported_format" (another version),
// "bad_request" (a member missing, of the wrong type or out of range; the message names it) or
// "nonce_mismatch" (the name's nonce or time is not the body's).
Result<StackBurstRequest> DecodeStackBurstRequest(std::string_view name, std::string_view bytes);

// Writes the request for `host` into <control_root>/<host>/ (created 0755 when absent) through
// `host_seam`, atomically, mode 0644. `host` must be a spool host name ([A-Za-z0-9._-], 1..64,
// not starting with a dot); anything else is kInvalidArgument, reason "bad_host".
Status WriteStackBurstRequest(Host& host_seam, const std::string& control_root,
                              const std::string& host, const StackBurstRequest& request);

}  // namespace expanse::agent

#endif  // EXPANSE_AGENT_STACK_BURST_REQUEST_H_
