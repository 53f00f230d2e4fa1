// SLURM host list expressions: "gpu[01-04]", "vm,worker[1-2]", "rack[1-2]-n[1-3]".
#ifndef EXPANSE_SLURM_HOSTLIST_H_
#define EXPANSE_SLURM_HOSTLIST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::slurm {

// Far more hosts than one job line names; bounds the work a hostile "n[0-999999999]" can cause.
inline constexpr size_t kMaxHostListHosts = 65536;

// The host names, in the order written. Comma-separated items; each may hold bracket groups of
// numbers and ranges ("[1-3,7]"), expanded as a cartesian product. A range keeps the width of
// its first number, so "n[08-10]" is n08 n09 n10 (as in SLURM's src/common/hostlist.c).
// Errors are kInvalidArgument: unbalanced brackets, a bad range, more than `max_hosts` hosts.
Result<std::vector<std::string>> ExpandHostList(std::string_view text,
                                                size_t max_hosts = kMaxHostListHosts);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_HOSTLIST_H_
