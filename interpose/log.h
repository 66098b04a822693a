// log.h: the library's logger. It formats into a stack buffer and write(2)s to a file descriptor:
// no allocation, no locks, no stdio, so it is safe inside hooks and after fork. A thread-local
// guard drops a message logged while another is being written on the same thread (re-entry through
// a signal or a hooked call), instead of recursing.
#pragma once

#include <cstdint>

namespace gswap::interpose {

enum class LogLevel : int { kOff = 0, kError, kWarn, kInfo, kDebug, kTrace };

// Set once at init from GSWAP_LOG / GSWAP_LOG_FILE; before that, warnings and errors go to stderr.
void log_configure(LogLevel level, int fd);
bool log_enabled(LogLevel level);
void log_write(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Formats bytes as "1.50 GiB" into buf (at least 32 bytes); returns buf.
const char* format_bytes(std::uint64_t bytes, char* buf, unsigned size);

}  // namespace gswap::interpose

#define GSWAP_LOG(level, ...)                                                          \
  do {                                                                                 \
    if (::gswap::interpose::log_enabled(::gswap::interpose::LogLevel::level))          \
      ::gswap::interpose::log_write(::gswap::interpose::LogLevel::level, __VA_ARGS__); \
  } while (0)

// Logs at most once per call site.
#define GSWAP_LOG_ONCE(level, ...)                                         \
  do {                                                                     \
    static std::atomic<bool> gswap_logged_once_{false};                    \
    if (!gswap_logged_once_.exchange(true)) GSWAP_LOG(level, __VA_ARGS__); \
  } while (0)
