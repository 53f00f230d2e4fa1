#include "core/crc32.h"

#include <zlib.h>

namespace expanse {

uint32_t Crc32(std::string_view bytes, uint32_t crc) {
  // crc32_z takes a size_t length; an empty piece leaves the value as it is.
  if (bytes.empty())
    return crc;
  return static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

}  // namespace expanse
