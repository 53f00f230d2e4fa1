// Internal to the crypto module: libsodium's one-time initialisation.

#ifndef EXPANSE_CRYPTO_SODIUM_INIT_H_
#define EXPANSE_CRYPTO_SODIUM_INIT_H_

namespace expanse::crypto_internal {

// Runs sodium_init() exactly once per process; every public crypto function calls
// this first, so callers never have to. Aborts when libsodium cannot initialise
// (no usable randomness source): handing out predictable secrets would be worse.
void EnsureSodiumInitialized();

}  // namespace expanse::crypto_internal

#endif  // EXPANSE_CRYPTO_SODIUM_INIT_H_
