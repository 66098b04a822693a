// untrusted_text.h: text a client sends (its executable name, kernel and region names) made safe
// to print, log and put in JSON.
//
// Those bytes come from another process and are hostile like everything else it sends: they need
// not be UTF-8 (a Latin-1 file name, a name cut at 64 bytes in the middle of a character) and may
// hold newlines that would forge log lines or terminal escapes. Every such string is passed
// through printable_text() once, where it is received, so nothing downstream has to care.
#pragma once

#include <string>
#include <string_view>

namespace gswap::daemon {

// Valid UTF-8 is kept as it is, except control characters (C0, DEL and C1), which become `\xNN`
// (`\u0085` for C1 characters); a byte that is not part of a valid UTF-8 sequence (including
// overlong forms and surrogates) becomes `\xNN`. A backslash stays a backslash. The result is
// valid UTF-8 with no control characters, and a printable string comes back unchanged.
std::string printable_text(std::string_view raw);

}  // namespace gswap::daemon
