// rendezvous.h: where a library client finds the gswapd of its GPU. One rule, used by both
// sides: the runtime directory is the configured one, else $XDG_RUNTIME_DIR/gswap, else
// /run/gswap; in it, "<GPU UUID>.sock" is the daemon's socket and "<GPU UUID>.lock" the lock a
// running daemon holds.
//
// Used inside the preload library: no allocation; results go into caller buffers, and a result
// that does not fit is refused (false) rather than truncated.
#pragma once

#include <cstddef>

namespace gswap::proto {

// `configured` may be null or empty; `xdg` is $XDG_RUNTIME_DIR (null or empty when unset).
bool runtime_dir(const char* configured, const char* xdg, char* out, std::size_t size);
// A Unix socket path must fit sockaddr_un::sun_path (108 bytes with its NUL).
inline constexpr std::size_t kMaxSocketPath = 108;
bool socket_path(const char* dir, const char* uuid_text, char* out, std::size_t size);
bool lock_path(const char* dir, const char* uuid_text, char* out, std::size_t size);

}  // namespace gswap::proto
