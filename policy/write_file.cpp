// write_file.cpp: see write_file.h.
#include "policy/write_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "policy/printable_text.h"

namespace gswap::policy {

void write_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const bool opened = static_cast<bool>(f);
  if (f) write(f);
  if (f) f.close();
  if (f) return;
  const std::string reason = std::strerror(errno);
  // The file written, through any links: removing a link would leave what was cut short.
  struct stat st {};
  if (char* written = opened ? ::realpath(path.c_str(), nullptr) : nullptr) {
    if (::stat(written, &st) == 0 && S_ISREG(st.st_mode)) ::unlink(written);
    std::free(written);
  }
  throw std::runtime_error("cannot write " + printable_text(path) + ": " + reason);
}

void write_file(const std::string& path, const std::string& text) {
  write_file(path, [&](std::ostream& f) { f << text; });
}

}  // namespace gswap::policy
