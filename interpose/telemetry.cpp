// telemetry.cpp: the library's side of the gswapd channel (contract in telemetry.h).
//
// Threads and ownership:
//   - Application threads call the event functions. Each thread owns one staging ring (claimed
//     lock-free from a fixed pool on its first event, released by a pthread key destructor when the
//     thread exits) and is its only producer. Events are never blocked on: a full staging ring, no
//     free staging slot, or no daemon means the event is dropped and counted.
//   - The telemetry thread (started by start()) owns the daemon connection: the socket, the
//     shared memory mapping, the shm ring's producer side and the status block. It is the only
//     consumer of every staging ring and the only producer of the shm ring, which keeps that ring
//     single-producer. It also reads the plan area and calls the BudgetCallback, and after each
//     handshake the ConnectCallback, whose announcements it writes into the shm ring itself.
//   - publish_counters() may be called from any thread: it stores relaxed atomics the telemetry
//     thread copies into the status block (each counter is consistent; the set is a snapshot).
//   - start/stop/after_fork_child run on whatever thread the interposer calls them from, never
//     concurrently with each other.
// No exceptions (built with -fno-exceptions), no allocation on the event path, no libc locks.
#include "interpose/telemetry.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "interpose/log.h"
#include "proto/fdpass.h"
#include "proto/rendezvous.h"
#include "proto/ring.h"
#include "proto/seqlock.h"
#include "proto/wire.h"

extern char** environ;

namespace gswap::interpose::telemetry {
namespace {

namespace p = gswap::proto;

constexpr std::uint32_t kStagingRecords = 2048;  // per thread; a power of two
constexpr int kMaxStaging = 64;                  // threads that can report at once
constexpr long kReconnectMs = 500;
constexpr long kRefusedRetryMs = 5000;
constexpr long kSpawnRetryMs = 10000;
// Longest cuInit waits for the first attempt to connect to gswapd (start()).
constexpr long kFirstConnectWaitMs = 250;
// Longest a connection's announcements wait for room in a full shared ring (the interposer holds
// its residency mutex meanwhile, so this bounds how long the application can be held up).
constexpr long kAnnounceMaxMs = 100;

struct Staging {
  std::atomic<int> owned;  // 0 free, 1 owned by a thread
  std::atomic<std::uint64_t> head;
  std::atomic<std::uint64_t> tail;
  std::atomic<std::uint64_t> dropped;
  p::EventRecord slots[kStagingRecords];
};

using Mode = DaemonMode;

struct Shared {
  std::atomic<bool> enabled{false};  // a daemon is connected: stage events
  std::atomic<bool> stop{false};
  std::atomic<bool> connected{false};
  std::atomic<std::uint64_t> dropped_no_slot{0};
  std::atomic<std::uint64_t> counters[kNumCounters] = {};  // Counters, in declaration order
  std::atomic<std::uint64_t> applied_budget{0};
  std::atomic<std::uint32_t> connection{0};  // numbers successful connections
  // The telemetry thread's first attempt to connect is over (failed, or connected with the
  // daemon's first plan area read, which carries this process's share): start() waits for it.
  std::atomic<bool> first_attempt_done{false};
};

// Telemetry-thread state (see the ownership notes above).
struct Connection {
  int fd = -1;
  // The socket's identity: a program that closes descriptors it does not own (a closefrom()
  // before exec, say) may close it and get its number back for a file of its own, which gswap
  // must then neither read, write nor close.
  dev_t dev = 0;
  ino_t ino = 0;
  unsigned char* base = nullptr;
  std::uint64_t bytes = 0;
  p::RingProducer ring;
  p::StatusBlock* status = nullptr;
  p::PlanBlock* plan = nullptr;
  std::uint32_t plan_capacity = 0;
  std::uint64_t plan_generation = 0;
  std::vector<std::uint64_t> plan_words;  // header + entries, sized at connection
};

Shared g;
Staging* g_staging = nullptr;  // kMaxStaging entries, mmap'ed at start
pthread_key_t g_key;
bool g_key_made = false;
pthread_t g_thread;
bool g_thread_running = false;
// Written by start() while other threads may already emit events, hence atomic (relaxed: a thread
// that sees a stale kOff only drops an event it would have dropped anyway while connecting).
std::atomic<Mode> g_mode{Mode::kOff};
StartInfo g_info;
std::uint8_t g_uuid[16];
char g_uuid_text[48];
char g_socket_path[sizeof(sockaddr_un::sun_path)];
char g_daemon_path[1024];
Connection g_conn;
int g_last_refusal = -1;
thread_local Staging* t_staging = nullptr;
// True on the telemetry thread while it runs the ConnectCallback: the only time announce_region
// and open_events act (thread_local, so a call from any other thread is a no-op, not a race).
thread_local bool t_in_connect = false;
long g_announce_deadline = 0;  // telemetry thread

long now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

// The pthread key's destructor, on the exiting thread. The thread forgets the slot too: a later
// key destructor (another library's) that calls the driver would otherwise write into a ring that
// another thread may own by then; it claims one again, and this runs again for it.
void release_slot(void* slot) {
  if (t_staging == slot) t_staging = nullptr;
  static_cast<Staging*>(slot)->owned.store(0, std::memory_order_release);
}

// First event of a thread: claim a staging ring. Lock-free; done once per thread.
Staging* claim() {
  if (!g_staging) return nullptr;
  for (int i = 0; i < kMaxStaging; ++i) {
    int expected = 0;
    if (g_staging[i].owned.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      t_staging = &g_staging[i];
      if (g_key_made) pthread_setspecific(g_key, t_staging);
      return t_staging;
    }
  }
  return nullptr;
}

// Counts an event that cannot be sent (no daemon, no slot, staging full).
inline void count_drop(Staging* s) {
  if (s)
    s->dropped.fetch_add(1, std::memory_order_relaxed);
  else
    g.dropped_no_slot.fetch_add(1, std::memory_order_relaxed);
}

// The event path: copy n records into this thread's staging ring, or drop and count.
inline void emit(const p::EventRecord* recs, std::uint32_t n) {
  if (g_mode.load(std::memory_order_relaxed) == Mode::kOff) return;
  Staging* s = t_staging ? t_staging : claim();
  if (!s || !g.enabled.load(std::memory_order_relaxed)) return count_drop(s);
  std::uint64_t h = s->head.load(std::memory_order_relaxed);
  std::uint64_t t = s->tail.load(std::memory_order_acquire);
  if (h - t + n > kStagingRecords) return count_drop(s);
  for (std::uint32_t i = 0; i < n; ++i)
    std::memcpy(&s->slots[(h + i) & (kStagingRecords - 1)], &recs[i], sizeof(p::EventRecord));
  s->head.store(h + n, std::memory_order_release);
}

inline p::EventRecord record(p::EventType type, std::uint64_t seq, std::uint32_t stream = 0) {
  p::EventRecord r{};
  r.type = static_cast<std::uint16_t>(type);
  r.seq = seq;
  r.stream = stream;
  return r;
}

// ---- telemetry thread ---------------------------------------------------------------------

// Whether g_conn.fd is still the socket gswap connected (see Connection::dev).
bool socket_still_ours() {
  struct stat st {};
  return g_conn.fd >= 0 && fstat(g_conn.fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
         st.st_dev == g_conn.dev && st.st_ino == g_conn.ino;
}

void disconnect(const char* why) {
  if (g_conn.base) munmap(g_conn.base, g_conn.bytes);
  if (socket_still_ours()) close(g_conn.fd);
  g_conn = Connection{};
  g.enabled.store(false, std::memory_order_relaxed);
  if (g_info.recording) g_info.recording->store(false, std::memory_order_relaxed);
  // No daemon, no plan: the library runs passive until the next connection brings one.
  if (g_info.on_plan) {
    p::PlanHeader passive{};
    g_info.on_plan(passive, nullptr, 0);
  }
  if (g.connected.exchange(false))
    GSWAP_LOG(kInfo, "gswapd connection closed (%s); continuing in passive mode", why);
}

// The socket of a handshake under way, which stop() shuts down so that a process leaving does not
// wait out the handshake's timeout with a daemon that does not answer (stopped, say). Guarded by
// a spin flag (held for an assignment or one shutdown call), under which the socket is also given
// up before it is closed, so that stop() never shuts down a descriptor that is no longer the
// handshake's.
std::atomic_flag g_connecting_busy = ATOMIC_FLAG_INIT;
int g_connecting_fd = -1;

void lock_connecting() {
  while (g_connecting_busy.test_and_set(std::memory_order_acquire)) sched_yield();
}
void unlock_connecting() {
  g_connecting_busy.clear(std::memory_order_release);
}

void set_connecting(int fd) {
  lock_connecting();
  g_connecting_fd = fd;
  unlock_connecting();
}

// Returns true when connected; *refused is set when the daemon answered with a refusal. The
// handshake on fd, which the caller closes when it fails.
bool try_connect_once(bool* refused, bool* absent, int fd);

bool try_connect(bool* refused, bool* absent) {
  *refused = false;
  *absent = false;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  set_connecting(fd);
  const bool ok = try_connect_once(refused, absent, fd);
  // Forgotten first, under the flag, and only then closed on failure: stop() never shuts down a
  // number reused since.
  set_connecting(-1);
  if (!ok) close(fd);
  return ok;
}

bool try_connect_once(bool* refused, bool* absent, int fd) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, g_socket_path, sizeof addr.sun_path);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *absent = errno == ENOENT || errno == ECONNREFUSED;
    return false;
  }
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  p::Hello h{};
  h.magic = p::kHelloMagic;
  h.version = p::kProtocolVersion;
  h.kind = static_cast<std::uint32_t>(p::PeerKind::kLibrary);
  h.pid = static_cast<std::int32_t>(getpid());
  std::memcpy(h.gpu_uuid, g_uuid, 16);
  h.device_total_bytes = g_info.device_total_bytes;
  h.requested_budget_bytes = g_info.budget_bytes;
  // NUL-padded, not necessarily terminated (see proto::Hello).
  std::size_t exe_len = strnlen(program_invocation_short_name, sizeof h.exe);
  std::memcpy(h.exe, program_invocation_short_name, exe_len);
  if (send(fd, &h, sizeof h, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof h)) {
    return false;
  }
  p::HelloReply reply{};
  int shm_fd = -1;
  ssize_t n = p::recv_with_fd(fd, &reply, sizeof reply, &shm_fd, 0);
  auto fail = [&](const char* what) {
    if (shm_fd >= 0) close(shm_fd);
    if (!g.stop.load())  // stop() shut the handshake down: the process is leaving
      GSWAP_LOG(kWarn, "gswapd at %s: %s; continuing in passive mode", g_socket_path, what);
    return false;
  };
  if (n != static_cast<ssize_t>(sizeof reply) || reply.magic != p::kReplyMagic)
    return fail("no valid handshake reply");
  if (reply.version != p::kProtocolVersion) {
    *refused = true;
    if (g_last_refusal != 1000) {
      g_last_refusal = 1000;
      GSWAP_LOG(kWarn, "gswapd speaks protocol version %u, this library %u; not connecting",
                reply.version, p::kProtocolVersion);
    }
    if (shm_fd >= 0) close(shm_fd);
    return false;
  }
  if (reply.status != 0) {
    *refused = true;
    reply.message[sizeof reply.message - 1] = '\0';
    if (g_last_refusal != reply.status) {  // log each distinct refusal once, not every retry
      g_last_refusal = reply.status;
      GSWAP_LOG(kWarn, "gswapd refused this process: %s (%s); continuing in passive mode",
                reply.message, p::hello_status_name(static_cast<p::HelloStatus>(reply.status)));
    }
    if (shm_fd >= 0) close(shm_fd);
    return false;
  }
  if (shm_fd < 0) return fail("no shared memory passed");
  struct stat st {};
  if (fstat(shm_fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != reply.shm_bytes ||
      reply.shm_bytes < sizeof(p::ShmHeader) || reply.shm_bytes > (1ull << 32))
    return fail("shared memory of an unexpected size");
  void* base = mmap(nullptr, reply.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
  close(shm_fd);
  shm_fd = -1;
  if (base == MAP_FAILED) return fail("cannot map the shared memory");
  p::ShmHeader hdr;
  std::memcpy(&hdr, base, sizeof hdr);
  if (const char* bad = p::validate_shm_header(hdr, reply.shm_bytes)) {
    munmap(base, reply.shm_bytes);
    return fail(bad);
  }
  struct stat sock {};
  if (fstat(fd, &sock) != 0) {
    munmap(base, reply.shm_bytes);
    return fail("cannot stat the socket");
  }
  auto* b = static_cast<unsigned char*>(base);
  auto* rc = reinterpret_cast<p::RingControl*>(b + hdr.ring_control_offset);
  g_conn.fd = fd;
  g_conn.dev = sock.st_dev;
  g_conn.ino = sock.st_ino;
  g_conn.base = b;
  g_conn.bytes = reply.shm_bytes;
  g_conn.ring =
      p::RingProducer(&rc->head, &rc->tail, reinterpret_cast<p::EventRecord*>(b + hdr.ring_offset),
                      hdr.ring_capacity);
  g_conn.status = reinterpret_cast<p::StatusBlock*>(b + hdr.status_offset);
  g_conn.plan = reinterpret_cast<p::PlanBlock*>(b + hdr.plan_offset);
  g_conn.plan_capacity = hdr.plan_capacity;
  g_conn.plan_words.assign(
      p::kPlanHeaderWords + std::size_t{hdr.plan_capacity} * p::kPlanEntryWords, 0);
  // Events staged while disconnected were already counted as dropped; start clean.
  for (int i = 0; i < kMaxStaging; ++i)
    g_staging[i].tail.store(g_staging[i].head.load(std::memory_order_acquire),
                            std::memory_order_release);
  g_last_refusal = -1;
  g.connection.fetch_add(1, std::memory_order_relaxed);
  g.connected.store(true);
  GSWAP_LOG(kInfo, "connected to gswapd at %s", g_socket_path);
  // The interposer re-announces the regions that are already live (allocated before this
  // connection, or alive across a daemon restart) and opens events under its own lock, so each
  // region reaches the daemon exactly once and ahead of the events that use it.
  t_in_connect = true;
  g_announce_deadline = now_ms() + kAnnounceMaxMs;
  if (g_info.on_connect) g_info.on_connect();
  t_in_connect = false;
  g.enabled.store(true, std::memory_order_relaxed);
  if (g_info.recording) g_info.recording->store(true, std::memory_order_relaxed);
  return true;
}

// Starts gswapd for this GPU (GSWAP_DAEMON=spawn). posix_spawn, not fork: fork would run the
// interposer's atfork handlers in this helper thread. gswapd detaches itself (fork, setsid, fork)
// and its first process exits once the socket listens, so waiting for it is short.
void spawn_daemon() {
  if (!g_daemon_path[0]) {
    GSWAP_LOG_ONCE(kWarn, "GSWAP_DAEMON=spawn: no gswapd found (set GSWAP_DAEMON_PATH)");
    return;
  }
  // The daemon must not load this library (it would try to spawn itself).
  static char* envp[512];
  int k = 0;
  for (char** e = environ; *e && k < 509; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 && std::strncmp(*e, "GSWAP_DAEMON=", 13) != 0)
      envp[k++] = *e;
  static char off[] = "GSWAP_DAEMON=off";
  envp[k++] = off;
  envp[k] = nullptr;
  char* argv[] = {g_daemon_path, const_cast<char*>("--gpu"), g_uuid_text, nullptr};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, g_daemon_path, nullptr, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    GSWAP_LOG(kWarn, "cannot start %s: %s", g_daemon_path, strerror(rc));
    return;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  GSWAP_LOG(kInfo, "started %s for %s (exit %d)", g_daemon_path, g_uuid_text,
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

// Moves whole groups from every staging ring into the shared ring. When the shared ring is full
// the groups wait in staging; staging then fills and the application drops (never blocks).
void drain() {
  for (int i = 0; i < kMaxStaging; ++i) {
    Staging& s = g_staging[i];
    std::uint64_t t = s.tail.load(std::memory_order_relaxed);
    std::uint64_t h = s.head.load(std::memory_order_acquire);
    while (t < h) {
      p::EventRecord group[p::kMaxGroupRecords];
      std::memcpy(&group[0], &s.slots[t & (kStagingRecords - 1)], sizeof(p::EventRecord));
      std::uint32_t n = 1;
      if (group[0].type == static_cast<std::uint16_t>(p::EventType::kLaunch))
        n = p::launch_records(group[0].count);
      if (n > h - t) break;  // cannot happen: groups are published whole
      for (std::uint32_t k = 1; k < n; ++k)
        std::memcpy(&group[k], &s.slots[(t + k) & (kStagingRecords - 1)], sizeof(p::EventRecord));
      if (g_conn.base) {
        if (!g_conn.ring.push(group, n)) break;
      } else {
        s.dropped.fetch_add(1, std::memory_order_relaxed);
      }
      t += n;
      s.tail.store(t, std::memory_order_release);
    }
  }
}

}  // namespace

std::uint64_t dropped_events() {
  std::uint64_t dropped = g.dropped_no_slot.load(std::memory_order_relaxed);
  if (g_staging)
    for (int i = 0; i < kMaxStaging; ++i)
      dropped += g_staging[i].dropped.load(std::memory_order_relaxed);
  return dropped;
}

namespace {

void publish_status() {
  std::uint64_t c[kNumCounters];
  for (int i = 0; i < kNumCounters; ++i) c[i] = g.counters[i].load(std::memory_order_relaxed);
  const std::uint64_t dropped = dropped_events();
  p::StatusPayload st{};
  st.budget = c[0];
  st.resident = c[1];
  st.peak_resident = c[2];
  st.swapped_out = c[3];
  st.swapped_in = c[4];
  st.stalls = c[5];
  st.stall_ns = c[6];
  st.pinned = c[7];
  st.regions = c[8];
  st.launches = c[9];
  st.dropped_events = dropped;
  st.applied_budget = g.applied_budget.load(std::memory_order_relaxed);
  st.mode = c[10];
  st.plan_generation = c[11];
  st.planned_evictions = c[12];
  st.prefetches = c[13];
  st.late_restores = c[14];
  st.divergences = c[15];
  st.device_stall_ns = c[16];
  st.h2d_bytes_per_s = c[17];
  st.d2h_bytes_per_s = c[18];
  st.guided_iterations = c[19];
  st.fixed_bytes = c[20];
  st.planned_drops = c[21];
  st.recomputes = c[22];
  st.recomputed_bytes = c[23];
  st.recompute_ns = c[24];
  st.recompute_failures = c[25];
  st.timing_skips = c[26];
  st.timing_source = c[27];
  std::uint64_t words[p::kStatusWords];
  std::memcpy(words, &st, sizeof st);
  p::seqlock_write(&g_conn.status->seq, g_conn.status->words, words, p::kStatusWords);
}

void read_plan() {
  auto* area = reinterpret_cast<std::atomic<std::uint64_t>*>(g_conn.plan + 1);
  std::uint64_t head[p::kPlanHeaderWords];
  if (!p::seqlock_read(&g_conn.plan->seq, area, head, p::kPlanHeaderWords)) return;
  p::PlanHeader ph;
  std::memcpy(&ph, head, sizeof ph);
  if (ph.generation == g_conn.plan_generation) return;
  // The entries, read with the header under one seqlock pass so they belong to it. The count is
  // the daemon's word: bounded by the capacity the shared-memory header gave.
  std::uint32_t n = std::min<std::uint32_t>(ph.num_entries, g_conn.plan_capacity);
  std::size_t words = p::kPlanHeaderWords + std::size_t{n} * p::kPlanEntryWords;
  if (words > g_conn.plan_words.size()) return;
  if (!p::seqlock_read(&g_conn.plan->seq, area, g_conn.plan_words.data(), words)) return;
  std::memcpy(&ph, g_conn.plan_words.data(), sizeof ph);
  if (ph.generation == g_conn.plan_generation) return;
  n = std::min<std::uint32_t>(ph.num_entries, n);
  g_conn.plan_generation = ph.generation;
  if (g_info.on_plan)
    g_info.on_plan(
        ph, reinterpret_cast<const p::PlanEntry*>(g_conn.plan_words.data() + p::kPlanHeaderWords),
        n);
  if (ph.budget_bytes == 0) return;
  // The daemon's share caps this process's own budget; it never raises it above GSWAP_BUDGET.
  std::uint64_t b = ph.budget_bytes;
  if (g_info.budget_bytes && g_info.budget_bytes < b) b = g_info.budget_bytes;
  if (b == g.applied_budget.load(std::memory_order_relaxed)) return;
  g.applied_budget.store(b, std::memory_order_relaxed);
  if (g_info.on_budget) g_info.on_budget(b);
}

// Whether the daemon closed the connection (or broke the protocol by writing to it). The socket is
// first checked to be gswap's still: polled or read, a descriptor the program reused would lose
// its data to gswap.
bool peer_closed() {
  if (!socket_still_ours()) return true;
  pollfd pfd{g_conn.fd, POLLIN, 0};
  if (poll(&pfd, 1, 0) <= 0) return false;
  char c;
  ssize_t n = recv(g_conn.fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) || n > 0;
}

void* thread_main(void*) {
  long next_try = 0, next_spawn = 0;
  while (!g.stop.load()) {
    if (g_conn.base) {
      if (peer_closed()) {
        disconnect(socket_still_ours() ? "daemon exited"
                                       : "the program closed its socket; reconnecting");
        next_try = now_ms() + kReconnectMs;
        continue;
      }
      if (g_conn.ring.corrupt()) {
        disconnect("daemon wrote an impossible ring tail");
        next_try = now_ms() + kReconnectMs;
        continue;
      }
      drain();
      publish_status();
      read_plan();
      g.first_attempt_done.store(true, std::memory_order_release);
      sleep_ms(2);
    } else {
      drain();  // discards (and counts) anything staged before the daemon went away
      long now = now_ms();
      if (now >= next_try) {
        bool refused = false, absent = false;
        if (!try_connect(&refused, &absent)) {
          g.first_attempt_done.store(true, std::memory_order_release);
          next_try = now + (refused ? kRefusedRetryMs : kReconnectMs);
          if (absent && g_mode.load() == Mode::kSpawn && now >= next_spawn) {
            next_spawn = now + kSpawnRetryMs;
            spawn_daemon();
            next_try = 0;
          }
        }
      }
      if (!g_conn.base) sleep_ms(50);
    }
  }
  if (g_conn.base) {
    drain();
    publish_status();
  }
  disconnect("process exiting");
  return nullptr;
}

void find_daemon_path(const char* configured) {
  g_daemon_path[0] = '\0';
  if (configured && *configured) {
    std::snprintf(g_daemon_path, sizeof g_daemon_path, "%s", configured);
    return;
  }
  // Beside the library: <build>/interpose/libgswap.so -> <build>/bin/gswapd; an installed
  // <prefix>/lib/libgswap.so -> <prefix>/bin/gswapd; or gswapd in the library's own folder.
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&find_daemon_path), &info) || !info.dli_fname) return;
  char dir[900];
  std::strncpy(dir, info.dli_fname, sizeof dir - 1);
  dir[sizeof dir - 1] = '\0';
  char* slash = std::strrchr(dir, '/');
  if (!slash) return;
  *slash = '\0';
  const char* rel[] = {"/../bin/gswapd", "/gswapd"};
  for (const char* r : rel) {
    char cand[1024];
    std::snprintf(cand, sizeof cand, "%s%s", dir, r);
    if (access(cand, X_OK) == 0) {
      std::snprintf(g_daemon_path, sizeof g_daemon_path, "%s", cand);
      return;
    }
  }
}

void start_thread() {
  g.stop.store(false);
  if (pthread_create(&g_thread, nullptr, thread_main, nullptr) == 0)
    g_thread_running = true;
  else
    GSWAP_LOG(kWarn, "cannot start the telemetry thread; running without gswapd");
}

}  // namespace

void start(const StartInfo& info) {
  if (g_thread_running) return;
  Mode mode = info.mode;
  if (mode == Mode::kOff || !info.gpu_uuid) return;
  g_info = info;
  std::memcpy(g_uuid, info.gpu_uuid, 16);
  g_info.gpu_uuid = reinterpret_cast<const char*>(g_uuid);
  p::format_uuid(g_uuid, g_uuid_text);
  g.applied_budget.store(info.budget_bytes);
  if (!p::socket_path(info.runtime_dir, g_uuid_text, g_socket_path, sizeof g_socket_path)) {
    GSWAP_LOG(kWarn, "runtime dir %s is too long for a socket path; running without gswapd",
              info.runtime_dir);
    return;
  }
  if (mode == Mode::kSpawn) find_daemon_path(info.daemon_path);
  if (!g_staging) {  // a forked child keeps its parent's, emptied (after_fork_child)
    void* mem = mmap(nullptr, sizeof(Staging) * kMaxStaging, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return;
    g_staging = static_cast<Staging*>(mem);  // zero pages: every slot free and empty
  }
  if (!g_key_made) g_key_made = pthread_key_create(&g_key, release_slot) == 0;
  g_mode.store(mode);  // events may be staged from here on
  start_thread();
  // The share gswapd gives this process arrives with the handshake: without this wait the first
  // cuMemGetInfo, and the allocations made right after cuInit, saw the whole budget for the few
  // milliseconds the thread took to connect, so a program that sizes itself from cuMemGetInfo
  // sized itself for memory it would not get. Bounded: a daemon that hangs costs start-up
  // kFirstConnectWaitMs at most; none at all costs a failed connect().
  const long deadline = now_ms() + kFirstConnectWaitMs;
  while (g_thread_running && !g.first_attempt_done.load(std::memory_order_acquire) &&
         now_ms() < deadline) {
    timespec ts{0, 200'000};
    nanosleep(&ts, nullptr);
  }
}

void stop() {
  if (!g_thread_running) return;
  g.stop.store(true);
  // A handshake waiting on a daemon that does not answer ends now, not at its timeout (2 s).
  lock_connecting();
  if (g_connecting_fd >= 0) shutdown(g_connecting_fd, SHUT_RDWR);
  unlock_connecting();
  pthread_join(g_thread, nullptr);
  g_thread_running = false;
}

void after_fork_child() {
  if (g_mode.load() == Mode::kOff || !g_staging) return;
  // The parent's telemetry thread does not exist here, and its socket and mapping belong to the
  // parent's registration: forget them without writing to them. The child registers with gswapd
  // only when it initialises CUDA itself (start(), from its own cuInit): a child that never uses
  // CUDA (a data-loader worker) took a share of the GPU budget from its parent. A handshake the
  // parent had under way is the parent's too (its flag may have been held at the fork).
  g_connecting_fd = -1;
  unlock_connecting();
  if (g_conn.base) munmap(g_conn.base, g_conn.bytes);
  if (socket_still_ours()) close(g_conn.fd);
  g_conn = Connection{};
  g.enabled.store(false);
  g.connected.store(false);
  for (int i = 0; i < kMaxStaging; ++i) {
    Staging& s = g_staging[i];
    if (&s != t_staging) s.owned.store(0);
    s.head.store(0);
    s.tail.store(0);
    s.dropped.store(0);
  }
  g.dropped_no_slot.store(0);
  g_thread_running = false;
  g.first_attempt_done.store(false);
  g_mode.store(Mode::kOff);  // nothing is staged until start()
}

bool connected() {
  return g.connected.load(std::memory_order_relaxed);
}

void region_alloc(std::uint64_t region_id, std::uint64_t base, std::uint64_t bytes,
                  std::uint64_t seq, std::uint32_t stream) {
  if (region_id == 0 || bytes == 0) return;  // not representable on the wire
  p::EventRecord r = record(p::EventType::kAlloc, seq, stream);
  r.w[0] = region_id;
  r.w[1] = base;
  r.w[2] = bytes;
  emit(&r, 1);
}

void open_events() {
  if (!t_in_connect) return;
  g.enabled.store(true, std::memory_order_relaxed);
  if (g_info.recording) g_info.recording->store(true, std::memory_order_relaxed);
}

void announce_region(std::uint64_t region_id, std::uint64_t base, std::uint64_t bytes,
                     std::uint64_t seq, std::uint32_t stream) {
  if (!t_in_connect || !g_conn.base || region_id == 0 || bytes == 0) return;
  p::EventRecord r = record(p::EventType::kAlloc, seq, stream);
  r.w[0] = region_id;
  r.w[1] = base;
  r.w[2] = bytes;
  // This thread is the shared ring's only producer, so it writes there directly: a staging ring
  // would drop announcements beyond its size, and they must come before the staged events.
  while (!g_conn.ring.push(&r, 1)) {
    if (now_ms() >= g_announce_deadline || g.stop.load(std::memory_order_relaxed)) {
      g.dropped_no_slot.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    sleep_ms(1);
  }
}

void region_free(std::uint64_t region_id, std::uint64_t seq) {
  if (region_id == 0) return;
  p::EventRecord r = record(p::EventType::kFree, seq);
  r.w[0] = region_id;
  emit(&r, 1);
}

void launch(std::uint64_t seq, std::uint32_t stream, std::uint64_t function_id,
            const std::uint64_t* region_ids, std::uint32_t num_regions) {
  if (g_mode.load(std::memory_order_relaxed) == Mode::kOff) return;
  if (!g.enabled.load(std::memory_order_relaxed)) {
    // Passive: skip building the records (the launch path is the hottest one).
    return count_drop(t_staging ? t_staging : claim());
  }
  p::EventRecord recs[p::kMaxGroupRecords];
  std::uint32_t kept = 0;
  bool truncated = false;
  // Region id 0 means "none" on the wire; skip any, and cap the list at what a group carries.
  p::EventRecord& head = recs[0];
  head = record(p::EventType::kLaunch, seq, stream);
  head.w[0] = function_id;
  std::uint32_t rec = 0, slot = 1;
  for (std::uint32_t i = 0; i < num_regions; ++i) {
    if (region_ids[i] == 0) continue;
    if (kept == p::kMaxLaunchRegions) {
      truncated = true;
      break;
    }
    if (rec == 0 && slot == 1 + p::kLaunchInlineRegions) {
      rec = 1;
      slot = 0;
      recs[rec] = record(p::EventType::kLaunchMore, seq, stream);
    } else if (rec > 0 && slot == p::kLaunchMoreRegions) {
      ++rec;
      slot = 0;
      recs[rec] = record(p::EventType::kLaunchMore, seq, stream);
    }
    recs[rec].w[slot++] = region_ids[i];
    if (rec > 0) recs[rec].count = static_cast<std::uint16_t>(slot);
    ++kept;
  }
  head.count = static_cast<std::uint16_t>(kept);
  if (truncated) head.flags = p::kLaunchTruncated;
  emit(recs, rec + 1);
}

void copy(std::uint64_t seq, std::uint32_t stream, std::uint64_t src_region,
          std::uint64_t dst_region, std::uint64_t bytes, std::uint64_t link) {
  p::EventRecord r = record(p::EventType::kCopy, seq, stream);
  r.w[0] = src_region;
  r.w[1] = dst_region;
  r.w[2] = bytes;
  r.w[3] = link;
  emit(&r, 1);
}

void eviction(std::uint64_t region_id, std::uint64_t bytes) {
  if (region_id == 0) return;
  p::EventRecord r = record(p::EventType::kEviction, 0);
  r.w[0] = region_id;
  r.w[1] = bytes;
  emit(&r, 1);
}

void restore(std::uint64_t region_id, std::uint64_t bytes, bool late) {
  if (region_id == 0) return;
  p::EventRecord r = record(p::EventType::kRestore, 0);
  r.w[0] = region_id;
  r.w[1] = bytes;
  r.w[2] = late ? 1 : 0;
  emit(&r, 1);
}

void stall(std::uint64_t seq, std::uint64_t ns, std::uint64_t start_ns, std::uint64_t thread) {
  p::EventRecord r = record(p::EventType::kStall, seq);
  r.w[0] = ns;
  r.w[1] = start_ns;
  r.w[2] = thread;
  emit(&r, 1);
}

void swap_done(bool to_device, std::uint64_t region_id, std::uint64_t bytes, std::uint64_t start_ns,
               std::uint64_t end_ns, bool planned) {
  if (region_id == 0 || end_ns < start_ns) return;
  p::EventRecord r = record(p::EventType::kSwapDone, 0);
  r.w[0] = region_id;
  r.w[1] = bytes;
  r.w[2] = start_ns;
  r.w[3] = end_ns;
  r.w[4] = (to_device ? p::kSwapToDevice : 0) | (planned ? p::kSwapPlanned : 0);
  emit(&r, 1);
}

void recomputable(std::uint64_t region_id, std::uint64_t cost_ns, const std::uint64_t* sources,
                  std::uint32_t num_sources) {
  if (region_id == 0) return;
  p::EventRecord recs[2] = {record(p::EventType::kRecomputable, 0), {}};
  recs[0].w[0] = region_id;
  recs[0].w[1] = cost_ns;
  std::uint32_t kept = 0;
  for (std::uint32_t i = 0; i < num_sources && kept < p::kMaxRecomputeSources; ++i) {
    if (sources[i] == 0 || sources[i] == region_id) continue;
    if (kept < p::kRecomputableInlineSources) {
      recs[0].w[2 + kept] = sources[i];
    } else {
      if (kept == p::kRecomputableInlineSources)
        recs[1] = record(p::EventType::kRecomputableMore, 0);
      recs[1].w[kept - p::kRecomputableInlineSources] = sources[i];
      recs[1].count = static_cast<std::uint16_t>(kept + 1 - p::kRecomputableInlineSources);
    }
    ++kept;
  }
  recs[0].count = static_cast<std::uint16_t>(kept);
  emit(recs, kept > p::kRecomputableInlineSources ? 2 : 1);
}

void not_recomputable(std::uint64_t region_id) {
  if (region_id == 0) return;
  p::EventRecord r = record(p::EventType::kNotRecomputable, 0);
  r.w[0] = region_id;
  emit(&r, 1);
}

void recomputed(std::uint64_t region_id, std::uint64_t bytes, std::uint64_t start_ns,
                std::uint64_t end_ns, bool failed) {
  if (region_id == 0) return;
  if (end_ns < start_ns) start_ns = end_ns = 0;
  p::EventRecord r = record(p::EventType::kRecomputed, 0);
  r.w[0] = region_id;
  r.w[1] = bytes;
  r.w[2] = start_ns;
  r.w[3] = end_ns;
  r.w[4] = failed ? p::kRecomputeFailed : 0;
  emit(&r, 1);
}

void clock(std::uint64_t device_ns, std::uint64_t host_ns) {
  p::EventRecord r = record(p::EventType::kClock, 0);
  r.w[0] = device_ns;
  r.w[1] = host_ns;
  emit(&r, 1);
}

void gpu_timing(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t duration_ns) {
  p::EventRecord r = record(p::EventType::kGpuTiming, seq);
  r.w[0] = start_ns;
  r.w[1] = duration_ns;
  emit(&r, 1);
}

void iteration_mark(std::uint64_t seq) {
  p::EventRecord r = record(p::EventType::kIterationMark, seq);
  emit(&r, 1);
}

void publish_counters(const Counters& c) {
  const std::uint64_t v[kNumCounters] = {c.budget,
                                         c.resident,
                                         c.peak_resident,
                                         c.swapped_out,
                                         c.swapped_in,
                                         c.stalls,
                                         c.stall_ns,
                                         c.pinned,
                                         c.regions,
                                         c.launches,
                                         c.mode,
                                         c.plan_generation,
                                         c.planned_evictions,
                                         c.prefetches,
                                         c.late_restores,
                                         c.divergences,
                                         c.device_stall_ns,
                                         c.h2d_bytes_per_s,
                                         c.d2h_bytes_per_s,
                                         c.guided_iterations,
                                         c.fixed_bytes,
                                         c.planned_drops,
                                         c.recomputes,
                                         c.recomputed_bytes,
                                         c.recompute_ns,
                                         c.recompute_failures,
                                         c.timing_skips,
                                         c.timing_source};
  for (int i = 0; i < kNumCounters; ++i) g.counters[i].store(v[i], std::memory_order_relaxed);
}

namespace {
void emit_name(p::EventType type, std::uint64_t id, const char* name) {
  if (id == 0 || !name) return;
  std::size_t len = strnlen(name, p::kMaxNameChunks * 32);
  std::uint32_t chunks = static_cast<std::uint32_t>(len / 32 + 1);
  if (chunks > p::kMaxNameChunks) chunks = p::kMaxNameChunks;
  for (std::uint32_t k = 0; k < chunks; ++k) {
    p::EventRecord r = record(type, 0);
    r.w[0] = id;
    r.count = static_cast<std::uint16_t>(k);
    if (k + 1 == chunks) r.flags = p::kLastChunk;
    std::size_t off = std::size_t{k} * 32;
    std::size_t n = len > off ? std::min<std::size_t>(32, len - off) : 0;
    std::memcpy(&r.w[1], name + off, n);
    emit(&r, 1);
  }
}
}  // namespace

void kernel_name(std::uint64_t function_id, const char* name) {
  emit_name(p::EventType::kKernelName, function_id, name);
}

void region_name(std::uint64_t region_id, const char* name) {
  emit_name(p::EventType::kRegionName, region_id, name);
}

std::uint32_t connection() {
  return g.connection.load(std::memory_order_relaxed);
}

void lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns, bool missed) {
  p::EventRecord r = record(p::EventType::kLateness, 0);
  r.w[0] = generation;
  r.w[1] = entry;
  r.w[2] = late_ns;
  r.w[3] = missed ? 1 : 0;
  emit(&r, 1);
}

void divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                std::uint64_t got) {
  p::EventRecord r = record(p::EventType::kDivergence, 0);
  r.w[0] = generation;
  r.w[1] = offset;
  r.w[2] = expected;
  r.w[3] = got;
  emit(&r, 1);
}

}  // namespace gswap::interpose::telemetry
