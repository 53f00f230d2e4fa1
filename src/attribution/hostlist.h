// SLURM hostlist expressions, as gres.conf uses them for NodeName= and File=. Pure.
//
// An expression is a comma-separated list of names; a name may hold bracketed numeric ranges,
// each expanding in turn (several in one name give every combination):
//   "gpu[01-04,07]"        gpu01 gpu02 gpu03 gpu04 gpu07
//   "rack[1-2]-n[1-2]"     rack1-n1 rack1-n2 rack2-n1 rack2-n2
//   "/dev/nvidia[0-3]"     /dev/nvidia0 ... /dev/nvidia3
// As in SLURM, a range's numbers are zero-padded to the width of its first bound: "[01-10]"
// gives 01..10, "[1-10]" gives 1..10.
#ifndef EXPANSE_ATTRIBUTION_HOSTLIST_H_
#define EXPANSE_ATTRIBUTION_HOSTLIST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace expanse::attribution {

// Bounds the work a hostile or mistaken expression can cause ("n[0-999999999]").
inline constexpr size_t kMaxHostlistNames = 4096;

// Every name, in order; duplicates are kept. kInvalidArgument, reason "hostlist_malformed", for
// a syntax error (unbalanced or nested brackets, a bound that is not a number, lo > hi, an
// empty name); kResourceExhausted, reason "hostlist_too_large", past `max_names`.
Result<std::vector<std::string>> ExpandHostlist(std::string_view expression,
                                                size_t max_names = kMaxHostlistNames);

// Whether `name` is one of the expression's names, without expanding it, so a large node range
// costs no more than a small one. Same syntax errors as ExpandHostlist.
Result<bool> HostlistContains(std::string_view expression, std::string_view name);

}  // namespace expanse::attribution

#endif  // EXPANSE_ATTRIBUTION_HOSTLIST_H_
