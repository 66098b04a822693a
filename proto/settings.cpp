// settings.cpp: parsers for setting values. Shared by the preload library and the daemon, so it
// allocates nothing and throws nothing.
#include "settings.h"

#include <cmath>

namespace gswap::settings {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// Parses a non-negative decimal number with an optional fraction; returns the characters used.
std::size_t parse_number(std::string_view s, long double* out) {
  long double value = 0;
  std::size_t i = 0;
  bool digits = false;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    value = value * 10 + (s[i] - '0');
    ++i;
    digits = true;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    long double scale = 0.1L;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      value += (s[i] - '0') * scale;
      scale /= 10;
      ++i;
      digits = true;
    }
  }
  if (!digits) return 0;
  *out = value;
  return i;
}

}  // namespace

bool parse_size(std::string_view text, Size* out) {
  std::string_view s = trim(text);
  long double value = 0;
  std::size_t used = parse_number(s, &value);
  if (used == 0) return false;
  std::string_view unit = trim(s.substr(used));
  if (unit == "%") {
    if (!(value > 0 && value <= 100)) return false;
    *out = Size{true, static_cast<double>(value), 0};
    return true;
  }
  struct Unit {
    const char* name;
    long double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"b", 1},
      {"k", 1024.0L},
      {"kib", 1024.0L},
      {"kb", 1e3L},
      {"m", 1048576.0L},
      {"mib", 1048576.0L},
      {"mb", 1e6L},
      {"g", 1073741824.0L},
      {"gib", 1073741824.0L},
      {"gb", 1e9L},
      {"t", 1099511627776.0L},
      {"tib", 1099511627776.0L},
      {"tb", 1e12L},
  };
  for (const Unit& u : kUnits) {
    if (iequals(unit, u.name)) {
      long double bytes = std::floor(value * u.factor);
      if (bytes > 18446744073709551615.0L) return false;
      *out = Size{false, 0, static_cast<std::uint64_t>(bytes)};
      return true;
    }
  }
  return false;
}

bool parse_bool(std::string_view text, bool* out) {
  std::string_view s = trim(text);
  for (const char* t : {"1", "true", "yes", "on"})
    if (iequals(s, t)) return *out = true, true;
  for (const char* f : {"0", "false", "no", "off"})
    if (iequals(s, f)) return *out = false, true;
  return false;
}

bool parse_uint(std::string_view text, std::uint64_t* out) {
  std::string_view s = trim(text);
  if (s.empty()) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool enum_allows(std::string_view type, std::string_view value) {
  constexpr std::string_view kPrefix = "Enum:";
  if (type.substr(0, kPrefix.size()) != kPrefix) return false;
  std::string_view alts = type.substr(kPrefix.size());
  while (true) {
    std::size_t bar = alts.find('|');
    if (alts.substr(0, bar) == value) return true;
    if (bar == std::string_view::npos) return false;
    alts.remove_prefix(bar + 1);
  }
}

const Declaration* find(std::string_view ident) {
  for (const Declaration& d : kDeclarations)
    if (ident == d.ident) return &d;
  return nullptr;
}

}  // namespace gswap::settings
