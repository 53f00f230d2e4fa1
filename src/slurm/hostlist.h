// SLURM hostlist expressions: "gpu[01-04,07]", "vm,worker[1-2]", "rack[1-2]-n[1-3]". Pure. Used
// for scontrol's Nodes= lines and for gres.conf's NodeName= and File= (src/attribution).
//
// An expression is a comma-separated list of names; a name may hold bracketed numeric ranges,
// each expanding in turn (several in one name give every combination):
//   "gpu[01-04,07]"        gpu01 gpu02 gpu03 gpu04 gpu07
//   "rack[1-2]-n[1-2]"     rack1-n1 rack1-n2 rack2-n1 rack2-n2
//   "/dev/nvidia[0-3]"     /dev/nvidia0 ... /dev/nvidia3
// As in SLURM (src/common/hostlist.c), a range's numbers are zero-padded to the width of its first
// bound: "[01-10]" gives 01..10, "[1-10]" gives 1..10.
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

// Every name, in order; duplicates are kept. kInvalidArgument, reason "hostlist_malformed", for
// a syntax error (unbalanced or nested brackets, a bound that is not a number of at most 9
// digits, lo > hi, an empty name, a blank or NUL, an empty expression); kResourceExhausted,
// reason "hostlist_too_large", past `max_hosts`.
Result<std::vector<std::string>> ExpandHostList(std::string_view expression,
                                                size_t max_hosts = kMaxHostListHosts);

// Whether `name` is one of the expression's names, without expanding it, so a large node range
// costs no more than a small one. Same syntax errors as ExpandHostList.
Result<bool> HostListContains(std::string_view expression, std::string_view name);

}  // namespace expanse::slurm

#endif  // EXPANSE_SLURM_HOSTLIST_H_
