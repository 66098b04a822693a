// control.cpp: framing and the client side of the control exchange (see control.h).
#include "daemon/control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "proto/rendezvous.h"
#include "proto/wire.h"

namespace gswap::daemon {

// The naming rule is proto/rendezvous.h's, shared with the library. A name that does not fit is
// returned whole; binding or connecting to it then fails with a message naming it.
std::string socket_path(const std::string& dir, const std::string& uuid) {
  char buf[4096];
  if (proto::socket_path(dir.c_str(), uuid.c_str(), buf, sizeof buf)) return buf;
  return dir + "/" + uuid + ".sock";
}
std::string lock_path(const std::string& dir, const std::string& uuid) {
  char buf[4096];
  if (proto::lock_path(dir.c_str(), uuid.c_str(), buf, sizeof buf)) return buf;
  return dir + "/" + uuid + ".lock";
}

namespace {
// Frames travel in packets of at most kChunk bytes (send_frame, ControlExchange::write).
std::string packet_too_long(std::size_t bytes) {
  return fmt::format("a packet of {} bytes (frames are sent in packets of at most {})", bytes,
                     kChunk);
}

// gswapctl's wait for each answer (SO_RCVTIMEO): a wedged daemon must not hang it.
constexpr int kControlTimeoutS = 10;

// Why a recv on the control socket failed: its timeout is a daemon that does not answer.
std::string recv_failure(ssize_t got, const char* closed) {
  if (got == 0) return closed;
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return fmt::format("gswapd did not answer within {} s (is it stopped, or overloaded?)",
                       kControlTimeoutS);
  return strerror(errno);
}
}  // namespace

short ControlExchange::events() const {
  return state_ == State::kReading ? POLLIN : state_ == State::kWriting ? POLLOUT : 0;
}

void ControlExchange::read(std::string* error) {
  char buf[kChunk];
  while (state_ == State::kReading && !request_ready()) {
    // MSG_TRUNC: the packet's whole length, so a packet longer than a chunk (which the socket
    // would cut short without a word) is refused rather than read as part of a frame.
    ssize_t got = recv(fd_, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // the rest later
    if (got <= 0) {
      *error = got == 0 ? (have_header_ ? "connection closed mid-frame" : "connection closed")
                        : strerror(errno);
      state_ = State::kFailed;
      return;
    }
    if (static_cast<std::size_t>(got) > sizeof buf) {
      *error = packet_too_long(static_cast<std::size_t>(got));
      state_ = State::kFailed;
      return;
    }
    if (!have_header_) {
      if (got != sizeof want_) {
        *error = "bad frame header";
        state_ = State::kFailed;
        return;
      }
      std::memcpy(&want_, buf, sizeof want_);
      if (want_ > kMaxRequestBytes) {
        *error = fmt::format("frame of {} bytes exceeds {}", want_, kMaxRequestBytes);
        state_ = State::kFailed;
        return;
      }
      have_header_ = true;
      continue;
    }
    if (in_.size() + static_cast<std::size_t>(got) > want_) {
      *error = "frame overrun";
      state_ = State::kFailed;
      return;
    }
    in_.append(buf, static_cast<std::size_t>(got));
  }
}

void ControlExchange::respond(std::string body, std::string* error) {
  out_ = std::move(body);
  state_ = State::kWriting;
  write(error);
}

void ControlExchange::write(std::string* error) {
  auto sent = [&](ssize_t n, std::size_t want) {
    if (n == static_cast<ssize_t>(want)) return true;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;  // the rest later
    *error = n < 0 ? strerror(errno) : "short send";
    state_ = State::kFailed;
    return false;
  };
  if (!header_sent_) {
    std::uint64_t len = out_.size();
    if (!sent(send(fd_, &len, sizeof len, MSG_NOSIGNAL | MSG_DONTWAIT), sizeof len)) return;
    header_sent_ = true;
  }
  while (sent_ < out_.size()) {
    std::size_t n = std::min(kChunk, out_.size() - sent_);
    if (!sent(send(fd_, out_.data() + sent_, n, MSG_NOSIGNAL | MSG_DONTWAIT), n)) return;
    sent_ += n;
  }
  state_ = State::kDone;
}

bool send_frame(int fd, std::string_view body) {
  std::uint64_t len = body.size();
  if (send(fd, &len, sizeof len, MSG_NOSIGNAL) != sizeof len) return false;
  for (std::size_t off = 0; off < body.size(); off += kChunk) {
    std::size_t n = std::min(kChunk, body.size() - off);
    if (send(fd, body.data() + off, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) return false;
  }
  return true;
}

bool recv_frame(int fd, std::string* body, std::size_t max, std::string* error) {
  std::uint64_t len = 0;
  char buf[kChunk];
  ssize_t got = recv(fd, buf, sizeof buf, MSG_TRUNC);  // MSG_TRUNC: see ControlExchange::read
  if (got <= 0) return *error = recv_failure(got, "connection closed"), false;
  if (static_cast<std::size_t>(got) > sizeof buf)
    return *error = packet_too_long(static_cast<std::size_t>(got)), false;
  if (got != sizeof len) return *error = "bad frame header", false;
  std::memcpy(&len, buf, sizeof len);
  if (len > max) return *error = fmt::format("frame of {} bytes exceeds {}", len, max), false;
  body->clear();
  body->reserve(len);
  while (body->size() < len) {
    got = recv(fd, buf, sizeof buf, MSG_TRUNC);
    if (got <= 0) return *error = recv_failure(got, "connection closed mid-frame"), false;
    if (static_cast<std::size_t>(got) > sizeof buf)
      return *error = packet_too_long(static_cast<std::size_t>(got)), false;
    if (body->size() + static_cast<std::size_t>(got) > len) return *error = "frame overrun", false;
    body->append(buf, static_cast<std::size_t>(got));
  }
  return true;
}

bool control_request(const std::string& path, const std::string& request, std::string* response,
                     std::string* error) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return *error = "socket path too long", false;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return *error = strerror(errno), false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  timeval tv{kControlTimeoutS, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  bool ok = false;
  do {
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      *error = fmt::format("cannot connect to {}: {}", path, strerror(errno));
      break;
    }
    proto::Hello h{};
    h.magic = proto::kHelloMagic;
    h.version = proto::kProtocolVersion;
    h.kind = static_cast<std::uint32_t>(proto::PeerKind::kControl);
    h.pid = static_cast<std::int32_t>(getpid());
    std::strncpy(h.exe, "gswapctl", sizeof h.exe);
    if (send(fd, &h, sizeof h, MSG_NOSIGNAL) != sizeof h) {
      *error = fmt::format("sending hello: {}", strerror(errno));
      break;
    }
    proto::HelloReply reply{};
    ssize_t n = recv(fd, &reply, sizeof reply, 0);
    if (n < 0) {
      *error = recv_failure(n, "");
      break;
    }
    if (n != sizeof reply || reply.magic != proto::kReplyMagic) {
      *error = "the daemon sent no valid reply";
      break;
    }
    if (reply.status != 0) {
      reply.message[sizeof reply.message - 1] = '\0';
      *error = fmt::format("refused by the daemon: {} ({})", reply.message,
                           proto::hello_status_name(static_cast<proto::HelloStatus>(reply.status)));
      break;
    }
    if (!send_frame(fd, request)) {
      *error = "sending the request failed";
      break;
    }
    ok = recv_frame(fd, response, kMaxResponseBytes, error);
  } while (false);
  close(fd);
  return ok;
}

}  // namespace gswap::daemon
