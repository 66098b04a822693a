// printable_text.h: text from outside (kernel names in a trace file, a client's executable, kernel
// and region names) made safe to print, log and put in JSON.
//
// A trace file is input like any other: a kernel name may hold a newline that would forge a
// second line of gswapctl's output, or an escape sequence that rewrites the terminal. What the
// commands print from a trace passes through printable_text() first; gswapd passes what a
// client sends through it once, where it is received (daemon/untrusted_text.h).
#pragma once

#include <string>
#include <string_view>

namespace gswap::policy {

// Valid UTF-8 is kept as it is, except control characters (C0, DEL and C1), which become `\xNN`
// (`\u0085` for C1 characters), U+FFFE and U+FFFF, which XML does not allow (`\ufffe`), and the
// bidirectional formatting characters and line and paragraph separators, which reorder or break
// the rest of the line (`\u202e`); a byte that is not part of a valid UTF-8 sequence becomes
// `\xNN`.
// A printable string comes back unchanged.
std::string printable_text(std::string_view raw);

}  // namespace gswap::policy
