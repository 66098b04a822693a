// utf8.h: UTF-8 as the text clients send (kernel and allocation names) is checked by the library,
// gswapd and the tools alike. Header-only and free of any library, so that libgswap (which links
// nothing it need not) and the planner's tools read text the same way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gswap::proto {

// Length of the valid UTF-8 sequence that starts at s[0] (n > 0 bytes available), or 0 when none
// does (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF); *cp: its code point.
inline std::size_t utf8_sequence(const unsigned char* s, std::size_t n, std::uint32_t* cp) {
  std::size_t len;
  std::uint32_t c;
  if (s[0] < 0x80) return *cp = s[0], 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    len = 2, c = s[0] & 0x1f;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    len = 3, c = s[0] & 0x0f;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    len = 4, c = s[0] & 0x07;
  } else {
    return 0;
  }
  if (len > n) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((s[k] & 0xc0) != 0x80) return 0;
    c = (c << 6) | (s[k] & 0x3f);
  }
  if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
      (c >= 0xd800 && c <= 0xdfff))
    return 0;
  return *cp = c, len;
}

// How many of the n bytes at s to keep within `room`: all of them when they fit, else the longest
// start that does not end inside a valid UTF-8 sequence (one the cut would split is left out
// whole; bytes that are no valid UTF-8 are kept as they are). n may exceed room by up to 3 for the
// character at the cut to be seen.
inline std::size_t utf8_prefix(const unsigned char* s, std::size_t n, std::size_t room) {
  if (n <= room) return n;
  // The character that holds byte `room` starts at most three bytes before it.
  for (std::size_t back = 1; back <= 3 && back <= room; ++back) {
    const std::size_t start = room - back;
    std::uint32_t cp;
    if (utf8_sequence(s + start, n - start, &cp) > back) return start;
    if ((s[start] & 0xc0) != 0x80) break;  // starts no character that reaches the cut
  }
  return room;
}

}  // namespace gswap::proto
