// settings.h: the declared settings (settings.def) and the parsers every side shares.
//
// This header is used inside the preload library, so it follows the library's rules: no
// allocation, no exceptions, no iostreams. Parsers return false on bad input and never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gswap::settings {

struct Declaration {
  const char* ident;
  const char* env;       // "" when file-only
  const char* json_key;  // "" when environment-only
  const char* type;      // "Size", "Bool", "String", "Uint", "Double", "Enum:a|b"
  const char* default_value;
  const char* scope;  // "lib", "daemon" or "both"
  const char* doc;
};

inline constexpr Declaration kDeclarations[] = {
#define GSWAP_SETTING(ident, env, json_key, type, def, scope, doc) \
  Declaration{#ident, env, json_key, type, def, scope, doc},
#include "settings.def"
#undef GSWAP_SETTING
};

inline constexpr std::size_t kNumDeclarations = sizeof(kDeclarations) / sizeof(kDeclarations[0]);

// A size is either absolute bytes or a percentage of some reference (the device, the trace peak).
struct Size {
  bool is_percent = false;
  double percent = 0;  // 0 < percent <= 100 when is_percent
  std::uint64_t bytes = 0;

  // Resolves against the reference size. Percentages round down to whole bytes.
  std::uint64_t resolve(std::uint64_t reference) const {
    return is_percent
               ? static_cast<std::uint64_t>(static_cast<long double>(reference) * percent / 100.0L)
               : bytes;
  }
};

// Parses "123", "6GiB", "512MiB", "1.5GB", "64K", "75%". Units: B, K/KB/KiB, M/MB/MiB, G/GB/GiB,
// T/TB/TiB (case-insensitive); decimal units (KB, MB, ...) are powers of 1000, binary ones and the
// bare letters powers of 1024. Percentages must lie in (0, 100]. Surrounding spaces are allowed.
bool parse_size(std::string_view text, Size* out);

// "1", "0", "true", "false", "yes", "no", "on", "off" (case-insensitive).
bool parse_bool(std::string_view text, bool* out);

// A non-negative decimal integer that fits in 64 bits.
bool parse_uint(std::string_view text, std::uint64_t* out);

// True when `value` is one of the alternatives of an "Enum:a|b|c" type string.
bool enum_allows(std::string_view type, std::string_view value);

// The declaration with this identifier, or nullptr.
const Declaration* find(std::string_view ident);

}  // namespace gswap::settings
