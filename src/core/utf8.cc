#include "core/utf8.h"

#include <cstddef>
#include <cstdint>

namespace expanse {

bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<std::uint8_t>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The lead byte fixes the sequence length and the smallest code point that may
    // use it (anything smaller is an overlong form).
    std::size_t length = 0;
    std::uint32_t code_point = 0;
    std::uint32_t min_code_point = 0;
    if ((lead & 0xE0) == 0xC0) {
      length = 2;
      code_point = lead & 0x1Fu;
      min_code_point = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      code_point = lead & 0x0Fu;
      min_code_point = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      code_point = lead & 0x07u;
      min_code_point = 0x10000;
    } else {
      return false;  // a continuation byte without a lead, or 0xF8..0xFF
    }
    if (text.size() - i < length) {
      return false;
    }
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<std::uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) {
        return false;
      }
      code_point = (code_point << 6) | (next & 0x3Fu);
    }
    if (code_point < min_code_point || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string CleanText(std::string text, std::size_t max_bytes) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  }
  if (text.size() > max_bytes) {
    // Back off over continuation bytes (10xxxxxx) to a character's start: at most three in
    // UTF-8, so invalid text cannot pull the cut further. What is past the cut is not judged.
    std::size_t cut = max_bytes;
    for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++i)
      --cut;
    text.resize(cut);
  }
  if (!IsValidUtf8(text)) {
    for (char& c : text) {
      if (static_cast<unsigned char>(c) >= 0x80)
        c = '?';
    }
  }
  return text;
}

}  // namespace expanse
