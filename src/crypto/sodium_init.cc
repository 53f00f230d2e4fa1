#include "crypto/sodium_init.h"

#include <sodium.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace expanse::crypto_internal {

void EnsureSodiumInitialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    // 0: initialised now, 1: someone else in the process already did it.
    if (sodium_init() < 0) {
      std::fputs("expanse: libsodium failed to initialise (no randomness source?)\n", stderr);
      std::abort();
    }
  });
}

}  // namespace expanse::crypto_internal
