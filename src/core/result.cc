#include "core/result.h"

#include <cstdio>
#include <cstdlib>

namespace expanse::internal {

void DieOnBadResultAccess(const Status& status) {
  // stdio rather than a logger: this runs in whatever state the broken caller left.
  std::fprintf(stderr, "expanse: Result::value() called on an error: %s\n",
               status.ToString().c_str());
  std::abort();
}

}  // namespace expanse::internal
