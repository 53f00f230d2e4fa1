// The doctor's judgement: pure functions from gathered facts (facts.h) to findings
// (findings.h). Nothing here reads the machine, so each broken setup is a unit test over facts.
// The codes, what each means and its fix: docs/formats/doctor.md.
#ifndef EXPANSE_DOCTOR_CHECKS_H_
#define EXPANSE_DOCTOR_CHECKS_H_

#include <cstdint>
#include <vector>

#include "doctor/facts.h"
#include "doctor/findings.h"

namespace expanse::doctor {

// Thresholds; the defaults are the daemon's own limits where it has one.
struct CheckLimits {
  int64_t report_max_age_ms = 2 * 60 * 1000;  // the aggregator's health_max_age_ms
  int64_t clock_skew_max_ms = 60 * 1000;      // a minute off already blurs job timelines
  int64_t sample_max_age_ms = 2 * 60 * 1000;  // a report without fresh samples
  uint64_t spool_backlog_max_files = 1000;    // the controller drains every few seconds
  double outbox_full_fraction = 0.8;          // past this the oldest data is close to dropped
  double disk_free_min_fraction = 0.05;
  uint64_t disk_free_min_bytes = uint64_t{1} << 30;
};

// Every check over `facts`; facts left unset (nullopt, e.g. with --host) are not judged.
// Findings come in a stable order: deployment-wide first, then node by node.
std::vector<Finding> RunChecks(const DeploymentFacts& facts, const CheckLimits& limits = {});

// The parts, for tests and for reuse.
void CheckSlurmConf(const SlurmConfFacts& conf, std::vector<Finding>& out);
void CheckCgroupConf(const CgroupConfFacts& conf, std::vector<Finding>& out);
void CheckSpool(const SpoolFacts& spool, const AccountFacts& user, const CheckLimits& limits,
                std::vector<Finding>& out);
void CheckCredential(const CredentialFacts& credential, std::vector<Finding>& out);
void CheckDisks(const std::vector<DiskFacts>& disks, const std::optional<OutboxFacts>& outbox,
                const CheckLimits& limits, std::vector<Finding>& out);
void CheckNode(const NodeFacts& node, int64_t now_ms, const CheckLimits& limits,
               std::vector<Finding>& out);
void CheckGres(const NodeFacts& node, std::vector<Finding>& out);
void CheckAttribution(const NodeFacts& node, std::vector<Finding>& out);
// Across nodes: one GPU UUID reported by two hosts.
void CheckUuids(const std::vector<NodeFacts>& nodes, std::vector<Finding>& out);

// Whether an account (uid, gid) may create files in a directory with this owner and mode,
// as the kernel decides it for a non-root user (supplementary groups are not considered).
bool AccountCanWrite(const DirFacts& dir, const AccountFacts& account);

}  // namespace expanse::doctor

#endif  // EXPANSE_DOCTOR_CHECKS_H_
