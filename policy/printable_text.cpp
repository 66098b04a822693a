// printable_text.cpp: see printable_text.h.
#include "policy/printable_text.h"

#include <cstdint>

#include <fmt/format.h>

#include "proto/utf8.h"

namespace gswap::policy {

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
    } else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0xfffe || cp == 0xffff) {
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
