// write_file.h: writing an output file whole, or saying why not and leaving no file cut short.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace gswap::policy {

// Writes what `write` writes to the file at `path`, as it writes it (nothing held whole), or
// throws "cannot write PATH: reason" (the path shown with control characters escaped). A regular
// file that was opened and then could not be written whole (a full disk, a file size limit) is
// removed rather than left looking complete, the file itself where PATH is a link to it (the link
// stays); a device or a pipe named as the output is left alone.
void write_file(const std::string& path, const std::function<void(std::ostream&)>& write);
// The same with `text`.
void write_file(const std::string& path, const std::string& text);

}  // namespace gswap::policy
