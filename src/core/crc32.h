// CRC-32 (zlib's, the IEEE polynomial) of our binary formats' records and files.
#ifndef EXPANSE_CORE_CRC32_H_
#define EXPANSE_CORE_CRC32_H_

#include <cstdint>
#include <string_view>

namespace expanse {

// The CRC-32 of `bytes` continued from `crc` (0 to start), so a checksum over several pieces
// is Crc32(b, Crc32(a)).
uint32_t Crc32(std::string_view bytes, uint32_t crc = 0);

}  // namespace expanse

#endif  // EXPANSE_CORE_CRC32_H_
