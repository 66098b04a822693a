// log.cpp: the fd logger (see log.h).
#include "interpose/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "interpose/check.h"

namespace gswap::interpose {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<int> g_fd{2};
thread_local bool t_in_log = false;

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kTrace:
      return "trace";
    default:
      return "";
  }
}

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;  // nowhere to report a logging failure; drop the line
    p += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

void log_configure(LogLevel level, int fd) {
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
  g_fd.store(fd, std::memory_order_relaxed);
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void log_write(LogLevel level, const char* fmt, ...) {
  if (t_in_log) return;
  t_in_log = true;
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, "gswap[%d] %s: ", static_cast<int>(::getpid()),
                        level_name(level));
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  write_all(g_fd.load(std::memory_order_relaxed), buf, len);
  t_in_log = false;
}

const char* format_bytes(std::uint64_t bytes, char* buf, unsigned size) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0)
    std::snprintf(buf, size, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, size, "%.2f %s", v, kUnits[u]);
  return buf;
}

void check_failed(const char* file, int line, const char* expr) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "gswap[%d] fatal: %s:%d: check failed: %s\n",
                        static_cast<int>(::getpid()), file, line, expr);
  if (n > 0) write_all(2, buf, static_cast<size_t>(n) < sizeof buf ? n : sizeof buf - 1);
  std::abort();
}

}  // namespace gswap::interpose
