// internal.h: simcuda's internal model, shared by the files that implement the driver API.
//
// Threading and ownership:
//   - g().handles_mu guards the live-handle sets (contexts, streams, events, modules, functions,
//     graphs); a handle is valid only while it is in its set.
//   - g().mem_mu (shared) guards the address map of device/pinned ranges, VMM reservations and
//     physical handles. Copies validate under a shared lock at enqueue time.
//   - Each Stream owns a worker thread; Stream::m guards its queue. Ctx::order_mu serialises
//     enqueues on the legacy NULL stream and on blocking streams so that the implicit
//     legacy-stream barriers are inserted consistently.
//   - Capacity counters are atomics per device.
// Everything global is allocated once and never destroyed, so worker threads that outlive main()
// never touch a destroyed object.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "entry.h"
#include "simcuda.h"

#define SC_EXPORT extern "C" __attribute__((visibility("default")))

namespace simcuda {

using Clock = std::chrono::steady_clock;
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// ---- configuration (read once at cuInit; declared in settings.def) ----
using Size = uint64_t;
using Rate = double;
using Count = int;
using Text = std::string;
struct Config {
#define SC_SETTING(ident, env, type, dflt, doc) type ident{};
#include "settings.def"
#undef SC_SETTING
};

// ---- counters (counters.cpp) and error injection (inject.cpp) ----
enum class Counter : int {
#define SC_COUNTER(name, doc) name,
#include "counters.def"
#undef SC_COUNTER
};
void count(Counter c, uint64_t n = 1);
void register_stats_file();                           // at cuInit, when SIMCUDA_STATS_FILE is set
bool arm_failures_from_env(const std::string& spec);  // false (and one line on stderr) if malformed
bool error_by_name(std::string_view name, CUresult* code);  // CUDA_ERROR_* name -> code

// ---- stream machinery ----
// A Timeline counts completed operations of one stream; waiters block until it reaches a seq.
struct Timeline {
  std::atomic<uint64_t> done{0};
  std::mutex m;
  std::condition_variable cv;
  void wait(uint64_t seq);
  void advance(uint64_t seq);
};

// One event recording: complete when its stream's timeline reaches seq; t_ns set when it ran.
struct EventRec {
  std::shared_ptr<Timeline> tl;
  uint64_t seq = 0;
  std::atomic<int64_t> t_ns{-1};
  bool complete() const { return tl->done.load(std::memory_order_acquire) >= seq; }
};

enum class Dir : uint8_t { H2D, D2H, D2D, H2H };

enum class OpKind : uint8_t {
  Kernel,
  Copy,
  Memset,
  HostFn,
  Wait,
  Record,
  FreeAsync,
  WriteValue,  // cuStreamWriteValue32/64: store value64 (elem bytes) at dst
  WaitValue,   // cuStreamWaitValue32/64: poll dst until memop_flags' condition holds
  Barrier      // CU_STREAM_MEM_OP_BARRIER: a memory fence between the ops around it
};

struct Op {
  OpKind kind{};
  uint64_t seq = 0;
  // Kernel
  const simcuda_kernel_desc* desc = nullptr;
  simcuda_dim3 grid{}, block{};
  uint32_t shmem = 0;
  size_t params_size = 0;
  alignas(16) uint8_t params_inline[256];
  std::unique_ptr<uint8_t[]> params_heap;
  // Copy (3D, bytes) / Memset
  Dir dir = Dir::D2D;
  uint8_t* dst = nullptr;
  const uint8_t* src = nullptr;
  size_t width = 0, height = 1, depth = 1;
  size_t dpitch = 0, dheight = 0, spitch = 0, sheight = 0;
  uint32_t value = 0;
  uint8_t elem = 1;
  // WriteValue / WaitValue (elem is 4 or 8; dst is the address)
  uint64_t value64 = 0;
  unsigned memop_flags = 0;
  // HostFn (cuLaunchHostFunc) or, when callback is set, a cuStreamAddCallback callback
  CUhostFn fn = nullptr;
  CUstreamCallback callback = nullptr;
  CUstream callback_stream = nullptr;
  void* user = nullptr;
  // Wait / Record / FreeAsync
  std::shared_ptr<Timeline> wait_tl;
  uint64_t wait_seq = 0;
  std::shared_ptr<EventRec> rec;
  uintptr_t free_ptr = 0;

  Op() = default;
  Op(Op&&) = default;
  Op& operator=(Op&&) = default;
  Op clone() const;
  const uint8_t* params() const { return params_heap ? params_heap.get() : params_inline; }
  uint8_t* alloc_params(size_t n);
};

// A growable ring of Ops: once it has grown to a stream's working depth, enqueue and dequeue
// allocate nothing (std::deque would allocate a node per Op, since an Op is ~400 bytes).
class OpRing {
 public:
  bool empty() const { return count_ == 0; }
  void push_back(Op&& op) {
    if (count_ == buf_.size()) grow();
    buf_[(head_ + count_) % buf_.size()] = std::move(op);
    ++count_;
  }
  Op pop_front() {
    Op op = std::move(buf_[head_]);
    head_ = (head_ + 1) % buf_.size();
    --count_;
    return op;
  }

 private:
  void grow() {
    std::vector<Op> next(buf_.empty() ? 64 : buf_.size() * 2);
    for (size_t i = 0; i < count_; ++i) next[i] = std::move(buf_[(head_ + i) % buf_.size()]);
    buf_.swap(next);
    head_ = 0;
  }
  std::vector<Op> buf_;
  size_t head_ = 0, count_ = 0;
};

struct Ctx;
struct Capture;

struct Stream {
  Ctx* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;
  uint64_t id = 0;
  bool legacy = false;
  bool per_thread = false;
  std::shared_ptr<Timeline> tl = std::make_shared<Timeline>();
  std::mutex m;
  std::condition_variable cv;
  OpRing q;
  uint64_t enqueued = 0;  // guarded by m (and by ctx->order_mu for blocking/legacy streams)
  bool stop = false;
  std::thread worker;
  uint64_t waited_legacy = 0;     // legacy seq this blocking stream already waits for
  uint64_t legacy_waited_me = 0;  // seq of this stream the legacy stream already waits for
  std::atomic<Capture*> capture{nullptr};
  bool blocking() const { return !legacy && !(flags & CU_STREAM_NON_BLOCKING); }
};

struct Ctx {
  int device = 0;
  bool primary = false;
  unsigned flags = 0;
  std::mutex order_mu;
  Stream* legacy = nullptr;      // created lazily under order_mu
  std::vector<Stream*> streams;  // every live stream of this context, guarded by order_mu
};

struct Event {
  unsigned flags = 0;
  std::mutex m;
  std::shared_ptr<EventRec> rec;  // last recording
  bool captured = false;
};

struct Module;
struct Func {
  Module* mod = nullptr;
  const simcuda_kernel_desc* desc = nullptr;
  size_t params_bytes = 0;
};

struct Module {
  void* dl = nullptr;
  int memfd = -1;
  const simcuda_module_desc* md = nullptr;
  std::vector<Func*> funcs;
  bool is_library = false;
};

struct Graph {
  std::vector<Op> ops;
};
struct GraphExec {
  std::vector<Op> ops;
};

struct Capture {
  uint64_t id = 0;
  CUstreamCaptureMode mode{};
  Stream* stream = nullptr;
  std::thread::id thread;
  Graph* graph = nullptr;
  bool invalidated = false;
};

// ---- memory map ----
enum class RangeKind : uint8_t { Linear, Managed, VmmMapping, Pinned, Registered };
struct Range {
  size_t size = 0;
  RangeKind kind{};
  int device = 0;
  uint64_t handle = 0;  // VMM physical handle
  size_t offset = 0;    // offset into the handle for VmmMapping
  bool accessible = false;
  bool free_pending = false;
  bool ipc_exported = false;
  size_t map_len = 0;  // bytes actually mmapped (linear/pinned we own)
  unsigned flags = 0;
};
struct Phys {
  int fd = -1;
  size_t size = 0;
  CUmemAllocationProp prop{};
  int refs = 1;
  int mappings = 0;
};

struct Device {
  std::atomic<uint64_t> used{0};
  Ctx* primary = nullptr;
  std::atomic<int> primary_refs{0};
};

struct Global {
  Config cfg;
  std::atomic<bool> initialized{false};
  std::vector<Device*> devices;

  std::shared_mutex handles_mu;  // shared for lookups (every launch), exclusive for changes
  std::unordered_set<const void*> ctxs, streams, events, modules, funcs, graphs, execs;

  std::shared_mutex mem_mu;
  std::map<uintptr_t, Range> ranges;
  std::map<uintptr_t, size_t> reservations;
  std::map<uint64_t, Phys> phys;
  uint64_t next_phys = 1;

  std::mutex engine_mu[3];  // H2D, D2H, D2D copy engines (taken only when throttled)

  std::mutex capture_mu;
  std::vector<Capture*> captures;
  std::atomic<int> global_captures{0};
  std::atomic<uint64_t> next_capture_id{1};
  std::atomic<uint64_t> next_stream_id{1};
};
Global& g();

// ---- helpers shared between files ----
bool live(const std::unordered_set<const void*>& set, const void* p);
void add_handle(std::unordered_set<const void*>& set, const void* p);
bool remove_handle(std::unordered_set<const void*>& set, const void* p);

CUresult check_init();
Ctx* current_ctx();
CUresult need_ctx(Ctx** out);
CUresult resolve_stream(CUstream h, bool ptds, Stream** out);
Stream* create_stream(Ctx* ctx, unsigned flags, int priority, bool legacy, bool per_thread);
void destroy_stream(Stream* s);
CUresult submit(Stream* s, Op&& op);
void sync_stream(Stream* s);
void sync_ctx(Ctx* ctx);
CUresult submit_and_wait(Stream* s, Op&& op);
bool capture_violation();  // true (and captures invalidated) when an unsafe call is made now

// Memory validation used by copies: the device range [p, p+n) lies in live accessible memory.
bool device_range_ok(uintptr_t p, size_t n);
bool is_device_ptr(uintptr_t p);
bool in_unmapped_reservation(uintptr_t p);
CUresult reserve_capacity(int dev, uint64_t bytes);
void release_capacity(int dev, uint64_t bytes);
void free_async_now(uintptr_t p);

void execute(Op& op, Stream* s);

}  // namespace simcuda
