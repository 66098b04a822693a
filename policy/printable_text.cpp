// printable_text.cpp: see printable_text.h.
#include "policy/printable_text.h"

#include <cstdint>

#include <fmt/format.h>

namespace gswap::policy {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] and its code point, or 0 when the byte
// there does not start one (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t* cp) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  std::size_t len;
  std::uint32_t c;
  if (b < 0x80) return *cp = b, 1;
  if (b >= 0xc2 && b <= 0xdf) {
    len = 2, c = b & 0x1f;
  } else if (b >= 0xe0 && b <= 0xef) {
    len = 3, c = b & 0x0f;
  } else if (b >= 0xf0 && b <= 0xf4) {
    len = 4, c = b & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    c = (c << 6) | (byte(i + k) & 0x3f);
  }
  if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
      (c >= 0xd800 && c <= 0xdfff))
    return 0;
  return *cp = c, len;
}

}  // namespace

std::string printable_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size();) {
    std::uint32_t cp = 0;
    std::size_t len = utf8_sequence(raw, i, &cp);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(raw[i]));
      ++i;
    } else if (cp < 0x20 || cp == 0x7f) {
      out += fmt::format("\\x{:02x}", cp);
      i += len;
    } else if (cp >= 0x80 && cp <= 0x9f) {
      out += fmt::format("\\u{:04x}", cp);
      i += len;
    } else {
      out.append(raw.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace gswap::policy
