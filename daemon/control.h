// control.h: the control plane between gswapctl and gswapd, and the socket helpers both use.
//
// gswapctl connects to a daemon's SOCK_SEQPACKET socket, sends a Hello of kind kControl, reads the
// HelloReply, then sends one request frame and reads one response frame. A frame is one message
// holding its length (8 bytes, little-endian) followed by messages of at most kChunk bytes. Both
// bodies are JSON; every size is checked against a limit before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gswap::daemon {

inline constexpr std::size_t kChunk = 32 * 1024;
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;
inline constexpr std::size_t kMaxResponseBytes = 256 * 1024 * 1024;

std::string socket_path(const std::string& runtime_dir, const std::string& uuid_text);
std::string lock_path(const std::string& runtime_dir, const std::string& uuid_text);

bool send_frame(int fd, std::string_view body);
// Returns false with *error set on EOF, a bad length or a length over max.
bool recv_frame(int fd, std::string* body, std::size_t max, std::string* error);

// One request/response exchange with the daemon listening at `path`. Returns false with *error
// when there is no daemon there or it refused or broke the exchange.
bool control_request(const std::string& path, const std::string& request, std::string* response,
                     std::string* error);

}  // namespace gswap::daemon
