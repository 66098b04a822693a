// untrusted_text.h: text a client sends (its executable name, kernel and region names) made safe
// to print, log and put in JSON.
//
// Those bytes come from another process and are hostile like everything else it sends: they need
// not be UTF-8 (a Latin-1 file name, a name cut at 64 bytes in the middle of a character) and may
// hold newlines that would forge log lines or terminal escapes. Every such string is passed
// through printable_text() once, where it is received, so nothing downstream has to care.
#pragma once

#include "policy/printable_text.h"

namespace gswap::daemon {

// The rules are policy/printable_text.h's: valid UTF-8 kept, control characters and invalid
// bytes as `\xNN`.
using policy::printable_text;

}  // namespace gswap::daemon
