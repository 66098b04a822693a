// rendezvous.cpp: the runtime directory and socket naming rule (see rendezvous.h).
#include "proto/rendezvous.h"

#include <cstdio>

namespace gswap::proto {
namespace {
bool fits(int n, std::size_t size) {
  return n > 0 && static_cast<std::size_t>(n) < size;
}
}  // namespace

bool runtime_dir(const char* configured, const char* xdg, char* out, std::size_t size) {
  if (configured && *configured) return fits(std::snprintf(out, size, "%s", configured), size);
  if (xdg && *xdg) return fits(std::snprintf(out, size, "%s/gswap", xdg), size);
  return fits(std::snprintf(out, size, "/run/gswap"), size);
}

bool socket_path(const char* dir, const char* uuid_text, char* out, std::size_t size) {
  if (size > kMaxSocketPath) size = kMaxSocketPath;
  return fits(std::snprintf(out, size, "%s/%s.sock", dir, uuid_text), size);
}

bool lock_path(const char* dir, const char* uuid_text, char* out, std::size_t size) {
  return fits(std::snprintf(out, size, "%s/%s.lock", dir, uuid_text), size);
}

}  // namespace gswap::proto
