// printable_text.cpp: see printable_text.h.
#include "policy/printable_text.h"

#include <cstdint>

#include <fmt/format.h>

#include "proto/utf8.h"

namespace gswap::policy {
namespace {

// Characters that change how the rest of a line is shown or where it breaks: the bidirectional
// marks, embeddings, overrides and isolates (a kernel name could make the words after it read
// backwards), and the line and paragraph separators.
bool reorders(std::uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string printable_text(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size();) {
    std::uint32_t cp = 0;
    std::size_t len = proto::utf8_sequence(reinterpret_cast<const unsigned char*>(raw.data()) + i,
                                           raw.size() - i, &cp);
    if (len == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(raw[i]));
      ++i;
    } else if (cp < 0x20 || cp == 0x7f) {
      out += fmt::format("\\x{:02x}", cp);
      i += len;
    } else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0xfffe || cp == 0xffff || reorders(cp)) {
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
