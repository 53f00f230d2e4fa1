#include "pystack/memory_image.h"

#include <cstring>

namespace expanse::pystack {

void MemoryImage::Map(std::uint64_t address, std::string bytes) {
  regions_[address] = std::move(bytes);
}

std::string* MemoryImage::Find(std::uint64_t address, std::size_t length, std::size_t& offset) {
  auto it = regions_.upper_bound(address);
  if (it == regions_.begin()) {
    return nullptr;
  }
  --it;
  const std::uint64_t start = address - it->first;
  if (start > it->second.size() || it->second.size() - start < length) {
    return nullptr;
  }
  offset = static_cast<std::size_t>(start);
  return &it->second;
}

bool MemoryImage::Write(std::uint64_t address, std::span<const std::uint8_t> bytes) {
  std::size_t offset = 0;
  std::string* region = Find(address, bytes.size(), offset);
  if (region == nullptr) {
    return false;
  }
  if (!bytes.empty()) {
    std::memcpy(region->data() + offset, bytes.data(), bytes.size());
  }
  return true;
}

Status MemoryImage::ReadInto(std::uint64_t address, std::span<std::uint8_t> out) {
  ++reads_;
  std::size_t offset = 0;
  const std::string* region = Find(address, out.size(), offset);
  if (region == nullptr) {
    return UnreadableAddress(address, out.size(), "not mapped in the image");
  }
  if (!out.empty()) {
    std::memcpy(out.data(), region->data() + offset, out.size());
  }
  return OkStatus();
}

}  // namespace expanse::pystack
