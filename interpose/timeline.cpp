// timeline.cpp: the GSWAP_TIMELINE ring and its Chrome trace writer (see timeline.h).
//
// The file is the Chrome trace event format: {"traceEvents": [...], "displayTimeUnit": "ms"},
// complete events ("ph": "X") for kernels, copies and waits, counter events ("ph": "C") for
// memory, instant events ("ph": "i") for iteration starts, and metadata events naming the
// processes and threads. Every timestamp is in microseconds on the device's axis. Written with
// snprintf into a stack buffer and write(2): no allocation besides the ring itself (made once, at
// configure) and the sort at exit. The file is valid UTF-8 whatever the names (see safe()).
#include "interpose/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "interpose/log.h"
#include "proto/utf8.h"

namespace gswap::interpose::timeline {
namespace {

enum Kind : std::uint8_t {
  kKernel,
  kCopyOut,
  kCopyIn,
  kStreamWait,
  kHostWait,
  kCounters,
  kIteration,
  kRecompute
};

struct Record {
  std::uint8_t kind;
  std::uint8_t planned;
  std::uint32_t stream;
  std::uint64_t a, b, c, d;
  char name[40];
};

struct State {
  std::atomic<bool> on{false};
  std::mutex mutex;
  char path[1024] = {};
  Record* ring = nullptr;  // ring_size records (calloc: pages are touched only as it fills)
  std::uint64_t ring_size = 0;
  std::uint64_t next = 0;  // records ever added (the ring holds the last ring_size)
  bool aligned = false;
  std::int64_t host_minus_device = 0;  // host ns = device ns + this
};
State& s() {
  static State* st = new State();  // never destroyed: written from an at-exit handler
  return *st;
}

void add(const Record& r) {
  State& st = s();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.ring[st.next % st.ring_size] = r;
  ++st.next;
}

// Keeps the longest start of `name` that fits the record and does not end inside a character: a
// valid UTF-8 sequence that the record's length would cut is left out whole.
void set_name(Record* r, const char* name) {
  if (!name) return;
  const std::size_t room = sizeof r->name - 1;
  const std::size_t n = ::strnlen(name, room + 4);  // enough to see the character at the cut
  const std::size_t keep =
      proto::utf8_prefix(reinterpret_cast<const unsigned char*>(name), n, room);
  std::memcpy(r->name, name, keep);
  r->name[keep] = '\0';
}

// Appends to a file with a fixed buffer, flushing as it fills.
class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  ~Out() { flush(); }
  void printf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char line[1024];  // the longest event, with a name of escaped bytes, needs about 500
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 1);
    if (used_ + len > sizeof buf_) flush();
    std::memcpy(buf_ + used_, line, len);
    used_ += len;
  }
  void flush() {
    std::size_t off = 0;
    while (off < used_ && !error_) {
      ssize_t w = ::write(fd_, buf_ + off, used_ - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : EIO;  // nothing written (a full disk, a closed pipe)
        break;
      }
      off += static_cast<std::size_t>(w);
    }
    used_ = 0;
  }
  // The first write that failed (errno), 0 when none did. After one, nothing more is written.
  int error() const { return error_; }

 private:
  int fd_;
  char buf_[1 << 16];
  std::size_t used_ = 0;
  int error_ = 0;
};

// A name as text for a JSON string, as gswapd makes the names clients send printable
// (policy/printable_text.h, which this library cannot link): valid UTF-8 is kept, a control
// character becomes `\xNN` (`\u0085` for C1 characters), and so does every byte that is not part
// of a valid UTF-8 sequence; then `"` and `\` are escaped for JSON. The file is therefore UTF-8
// whatever bytes a program names its allocations or kernels with. `out` holds 5 bytes per byte of
// `in` and the terminator.
void safe(char* out, const char* in, std::size_t size) {
  const auto* s = reinterpret_cast<const unsigned char*>(in);
  const std::size_t n = std::strlen(in);
  std::size_t k = 0;
  auto put = [&](const char* text, std::size_t len) {
    if (k + len >= size) return false;
    std::memcpy(out + k, text, len);
    k += len;
    return true;
  };
  for (std::size_t i = 0; i < n;) {
    std::uint32_t cp = 0;
    std::size_t len = proto::utf8_sequence(s + i, n - i, &cp);
    char esc[8];
    bool ok;
    if (len == 0) {
      ok = put(esc, static_cast<std::size_t>(std::snprintf(esc, sizeof esc, "\\\\x%02x", s[i])));
      len = 1;
    } else if (cp < 0x20 || cp == 0x7f) {
      ok = put(esc, static_cast<std::size_t>(std::snprintf(esc, sizeof esc, "\\\\x%02x", cp)));
    } else if (cp >= 0x80 && cp <= 0x9f) {
      ok = put(esc, static_cast<std::size_t>(std::snprintf(esc, sizeof esc, "\\\\u%04x", cp)));
    } else if (cp == '"' || cp == '\\') {
      esc[0] = '\\', esc[1] = static_cast<char>(cp);
      ok = put(esc, 2);
    } else {
      ok = put(in + i, len);
    }
    if (!ok) break;
    i += len;
  }
  out[k] = '\0';
}

constexpr int kDevicePid = 1, kHostPid = 2;
constexpr std::uint32_t kD2HTrack = 100000, kH2DTrack = 100001, kWaitTrack = 100002,
                        kRecomputeTrack = 100003;

}  // namespace

bool configure(const char* path, std::uint64_t max_events) {
  if (!path || !*path || max_events == 0) return true;
  State& st = s();
  // Configured again in a forked child (its own cuInit): the parent's ring and records go.
  st.on.store(false, std::memory_order_release);
  std::free(st.ring);
  st.ring = nullptr;
  st.ring_size = st.next = 0;
  st.aligned = false;
  std::snprintf(st.path, sizeof st.path, "%s", path);
  st.ring = static_cast<Record*>(std::calloc(max_events, sizeof(Record)));
  if (!st.ring) return false;
  st.ring_size = max_events;
  st.on.store(true, std::memory_order_release);
  return true;
}

std::uint64_t ring_bytes(std::uint64_t events) {
  return events * sizeof(Record);
}

bool enabled() {
  return s().on.load(std::memory_order_relaxed);
}

void kernel(std::uint64_t seq, std::uint32_t stream, const char* name, std::uint64_t start_ns,
            std::uint64_t dur_ns) {
  if (!enabled()) return;
  Record r{};
  r.kind = kKernel;
  r.stream = stream;
  r.a = seq;
  r.b = start_ns;
  r.c = dur_ns;
  set_name(&r, name);
  add(r);
}

namespace {
// A region's span on a device track: a copy or a recomputation (`flag`: planned, or failed).
void region_span(Kind kind, bool flag, std::uint64_t region, const char* region_name,
                 std::uint64_t bytes, std::uint64_t start_ns, std::uint64_t end_ns) {
  Record r{};
  r.kind = kind;
  r.planned = flag;
  r.a = region;
  r.b = bytes;
  r.c = start_ns;
  r.d = end_ns;
  set_name(&r, region_name);
  add(r);
}
}  // namespace

void copy(bool to_device, std::uint64_t region, const char* region_name, std::uint64_t bytes,
          std::uint64_t start_ns, std::uint64_t end_ns, bool planned) {
  if (!enabled()) return;
  region_span(to_device ? kCopyIn : kCopyOut, planned, region, region_name, bytes, start_ns,
              end_ns);
}

void recompute(std::uint64_t region, const char* region_name, std::uint64_t bytes,
               std::uint64_t start_ns, std::uint64_t end_ns, bool failed) {
  if (!enabled() || end_ns < start_ns || start_ns == 0) return;
  region_span(kRecompute, failed, region, region_name, bytes, start_ns, end_ns);
}

void stream_waited(std::uint64_t region, std::uint64_t late_ns, std::uint64_t end_ns) {
  if (!enabled() || late_ns == 0) return;
  Record r{};
  r.kind = kStreamWait;
  r.a = region;
  r.b = late_ns;
  r.c = end_ns;
  add(r);
}

void align(std::uint64_t device_ns, std::uint64_t host_ns) {
  if (!enabled()) return;
  State& st = s();
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.aligned) return;
  st.aligned = true;
  st.host_minus_device = static_cast<std::int64_t>(host_ns) - static_cast<std::int64_t>(device_ns);
}

std::uint64_t to_device(std::uint64_t host_ns) {
  State& st = s();
  std::lock_guard<std::mutex> lock(st.mutex);
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(host_ns) - st.host_minus_device);
}

void host_wait(const char* why, std::uint64_t start_ns, std::uint64_t end_ns) {
  if (!enabled()) return;
  Record r{};
  r.kind = kHostWait;
  r.stream = static_cast<std::uint32_t>(::gettid());
  r.b = start_ns;
  r.c = end_ns;
  set_name(&r, why);
  add(r);
}

void counters(std::uint64_t host_ns, std::uint64_t resident, std::uint64_t budget,
              std::uint64_t pinned) {
  if (!enabled()) return;
  Record r{};
  r.kind = kCounters;
  r.a = host_ns;
  r.b = resident;
  r.c = budget;
  r.d = pinned;
  add(r);
}

void iteration(std::uint64_t host_ns) {
  if (!enabled()) return;
  Record r{};
  r.kind = kIteration;
  r.a = host_ns;
  add(r);
}

void write() {
  if (!enabled()) return;
  State& st = s();
  std::vector<Record> recs;
  std::int64_t offset;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    std::uint64_t n = std::min<std::uint64_t>(st.next, st.ring_size);
    for (std::uint64_t i = st.next - n; i < st.next; ++i) recs.push_back(st.ring[i % st.ring_size]);
    offset = st.aligned ? st.host_minus_device : 0;
    st.on.store(false);
  }
  int fd = ::open(st.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    GSWAP_LOG(kError, "GSWAP_TIMELINE: cannot write %s", st.path);
    return;
  }
  // Microseconds on the device axis (host times moved onto it), and each record's track.
  struct Item {
    int pid;
    std::uint32_t tid;
    double ts;
    const Record* r;
  };
  auto to_us = [&](std::uint64_t device_ns) { return static_cast<double>(device_ns) / 1e3; };
  auto host_us = [&](std::uint64_t host_ns) {
    return static_cast<double>(static_cast<std::int64_t>(host_ns) - offset) / 1e3;
  };
  std::vector<Item> items;
  items.reserve(recs.size());
  for (const Record& r : recs) {
    switch (r.kind) {
      case kKernel:
        items.push_back({kDevicePid, r.stream, to_us(r.b), &r});
        break;
      case kCopyOut:
        items.push_back({kDevicePid, kD2HTrack, to_us(r.c), &r});
        break;
      case kCopyIn:
        items.push_back({kDevicePid, kH2DTrack, to_us(r.c), &r});
        break;
      case kStreamWait:
        items.push_back({kDevicePid, kWaitTrack, to_us(r.c - r.b), &r});
        break;
      case kRecompute:
        items.push_back({kDevicePid, kRecomputeTrack, to_us(r.c), &r});
        break;
      case kHostWait:
        items.push_back({kHostPid, r.stream, host_us(r.b), &r});
        break;
      case kCounters:
        items.push_back({kDevicePid, 0, host_us(r.a), &r});
        break;
      case kIteration:
        items.push_back({kDevicePid, 0, host_us(r.a), &r});
        break;
    }
  }
  // Each track's events in time order (records arrive as measurements complete, not in order).
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    return x.ts < y.ts;
  });
  Out out(fd);
  out.printf(
      "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"libgswap\"},\"traceEvents\":[\n");
  out.printf(
      "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"device\"}"
      "}",
      kDevicePid);
  out.printf(
      ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"host\"}"
      "}",
      kHostPid);
  const std::uint32_t tracks[] = {kD2HTrack, kH2DTrack, kWaitTrack, kRecomputeTrack};
  const char* const track_names[] = {"D2H (swap-outs)", "H2D (restores)",
                                     "streams waiting for restores", "recomputations"};
  for (int i = 0; i < 4; ++i)
    out.printf(
        ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}"
        "}",
        kDevicePid, tracks[i], track_names[i]);
  std::uint32_t last_stream = ~0u, last_thread = ~0u;
  for (const Item& it : items) {
    const Record& r = *it.r;
    char name[5 * sizeof r.name];  // every byte escaped at most as `\\xNN`
    safe(name, r.name, sizeof name);
    if (r.kind == kKernel && it.tid != last_stream) {
      last_stream = it.tid;
      out.printf(
          ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":"
          "\"stream %u\"}}",
          kDevicePid, it.tid, it.tid);
    }
    if (r.kind == kHostWait && it.tid != last_thread) {
      last_thread = it.tid;
      out.printf(
          ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":"
          "\"thread %u\"}}",
          kHostPid, it.tid, it.tid);
    }
    switch (r.kind) {
      case kKernel:
        out.printf(
            ",\n{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\",\"pid\":%d,\"tid\":%u,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%llu}}",
            name[0] ? name : "kernel", it.pid, it.tid, it.ts, r.c / 1e3, (unsigned long long)r.a);
        break;
      case kCopyOut:
      case kCopyIn:
        out.printf(
            ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s %s\",\"pid\":%d,\"tid\":%u,"
            "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"region\":%llu,\"bytes\":%llu,"
            "\"planned\":%s}}",
            r.kind == kCopyOut ? "swap_out" : "restore",
            r.kind == kCopyOut ? "swap-out" : "restore", name[0] ? name : "region", it.pid, it.tid,
            it.ts, (r.d - r.c) / 1e3, (unsigned long long)r.a, (unsigned long long)r.b,
            r.planned ? "true" : "false");
        break;
      case kRecompute:
        out.printf(
            ",\n{\"ph\":\"X\",\"cat\":\"recompute\",\"name\":\"recompute %s\",\"pid\":%d,"
            "\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"region\":%llu,\"bytes\":%llu,"
            "\"failed\":%s}}",
            name[0] ? name : "region", it.pid, it.tid, it.ts, (r.d - r.c) / 1e3,
            (unsigned long long)r.a, (unsigned long long)r.b, r.planned ? "true" : "false");
        break;
      case kStreamWait:
        out.printf(
            ",\n{\"ph\":\"X\",\"cat\":\"device_stall\",\"name\":\"waited for region %llu\","
            "\"pid\":%d,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"late_us\":%.3f}}",
            (unsigned long long)r.a, it.pid, it.tid, it.ts, r.b / 1e3, r.b / 1e3);
        break;
      case kHostWait:
        out.printf(
            ",\n{\"ph\":\"X\",\"cat\":\"host_stall\",\"name\":\"waited: %s\",\"pid\":%d,"
            "\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f}",
            name, it.pid, it.tid, it.ts, (r.c - r.b) / 1e3);
        break;
      case kCounters:
        out.printf(
            ",\n{\"ph\":\"C\",\"name\":\"memory\",\"pid\":%d,\"ts\":%.3f,\"args\":{"
            "\"resident_bytes\":%llu,\"budget_bytes\":%llu,\"pinned_host_bytes\":%llu}}",
            it.pid, it.ts, (unsigned long long)r.b, (unsigned long long)r.c,
            (unsigned long long)r.d);
        break;
      case kIteration:
        out.printf(
            ",\n{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"iteration\",\"name\":\"iteration\","
            "\"pid\":%d,\"tid\":0,\"ts\":%.3f}",
            it.pid, it.ts);
        break;
    }
  }
  out.printf("\n]}\n");
  out.flush();
  int error = out.error();
  if (::close(fd) != 0 && !error) error = errno;
  if (error) {
    GSWAP_LOG(kError, "GSWAP_TIMELINE: writing %s failed (%s): the file is incomplete", st.path,
              std::strerror(error));
    return;
  }
  GSWAP_LOG(kInfo, "GSWAP_TIMELINE: wrote %zu events to %s", items.size(), st.path);
}

}  // namespace gswap::interpose::timeline
