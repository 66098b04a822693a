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

// gswapd's side of one exchange, never blocking: the request frame is taken as its messages
// arrive (read() when the socket is readable), the response frame given as the socket takes it
// (write() when writable). A slow or silent peer then costs the daemon nothing but its descriptor.
class ControlExchange {
 public:
  enum class State { kReading, kWriting, kDone, kFailed };
  explicit ControlExchange(int fd) : fd_(fd) {}
  int fd() const { return fd_; }
  State state() const { return state_; }
  // poll() events it waits for: POLLIN while reading, POLLOUT while writing.
  short events() const;
  // Takes every message waiting; request_ready() once the request frame is whole, kFailed (with
  // *error) on a closed socket or a bad frame.
  void read(std::string* error);
  bool request_ready() const {
    return state_ == State::kReading && have_header_ && in_.size() == want_;
  }
  const std::string& request() const { return in_; }
  // The response: written from now on (as much as the socket takes now, the rest by write()).
  void respond(std::string body, std::string* error);
  void write(std::string* error);

 private:
  int fd_;
  State state_ = State::kReading;
  bool have_header_ = false;
  std::uint64_t want_ = 0;
  std::string in_, out_;
  bool header_sent_ = false;
  std::size_t sent_ = 0;
};

bool send_frame(int fd, std::string_view body);
// Returns false with *error set on EOF, a bad length or a length over max.
bool recv_frame(int fd, std::string* body, std::size_t max, std::string* error);

// One request/response exchange with the daemon listening at `path`. Returns false with *error
// when there is no daemon there or it refused or broke the exchange.
bool control_request(const std::string& path, const std::string& request, std::string* response,
                     std::string* error);

}  // namespace gswap::daemon
