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
//   - g().capture_mu guards every Capture, the member and capture fields of streams and the graph
//     being captured; Event::m guards an event's last recording (capture_mu is taken first when
//     both are held). GraphMem state (graph memory nodes) is guarded by g().mem_mu.
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
#include <cstdio>
#include <cstdlib>
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

// A broken invariant of simcuda itself stops the process with file and line.
#define SC_CHECK(cond)                                                                       \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "simcuda: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

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
  Barrier,     // CU_STREAM_MEM_OP_BARRIER: a memory fence between the ops around it
  GraphAlloc,  // a graph's allocation node: back gmem's address range with memory
  GraphFree    // a free node, or cuMemFreeAsync of a graph allocation: drop gmem's memory
};

struct GraphMem;

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
  // GraphAlloc / GraphFree
  std::shared_ptr<GraphMem> gmem;

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
  uint64_t waited_legacy = 0;              // legacy seq this blocking stream already waits for
  uint64_t legacy_waited_me = 0;           // seq of this stream the legacy stream already waits for
  std::atomic<Capture*> capture{nullptr};  // the capture this stream belongs to (origin or joined)
  bool blocking() const { return !legacy && !(flags & CU_STREAM_NON_BLOCKING); }
};

struct Ctx {
  int device = 0;
  bool primary = false;
  unsigned flags = 0;
  std::mutex order_mu;
  Stream* legacy = nullptr;      // created lazily under order_mu
  std::vector<Stream*> streams;  // every live stream of this context, guarded by order_mu
  // Blocking streams of this context (per-thread default streams included) in a capture: while
  // any is, using the legacy stream would make it depend on captured work.
  std::atomic<int> blocking_captures{0};
};

// How many captured operations of each stream of a capture something follows: a vector clock
// over the capture's member streams, so that cuStreamEndCapture can tell joined from unjoined.
using CaptureClock = std::vector<std::pair<const Stream*, uint64_t>>;

struct Event {
  unsigned flags = 0;
  std::mutex m;
  std::shared_ptr<EventRec> rec;  // last recording outside a capture
  Capture* cap = nullptr;         // set when last recorded in a capture (a "captured event")
  CaptureClock clock;             // what that captured recording follows
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

// One graph allocation (an allocation node's memory, graphs.cpp). Its address range is reserved
// when the node is captured and fixed for the node's lifetime; memory backs it from the node's
// execution until a free node, cuMemFreeAsync or cuMemFree. Guarded by g().mem_mu.
struct GraphMem {
  uintptr_t ptr = 0;
  size_t size = 0, map_len = 0;
  uint64_t charge = 0;
  int device = 0;
  int owners = 0;                // the graph and its executable graph, while they exist
  bool freed_in_graph = false;   // the owning graph frees it
  bool freed_elsewhere = false;  // another graph has a free node for it
  bool outstanding = false;      // launched without an in-graph free, and not yet freed
  bool charged = false;          // capacity held from its first launch until it goes
  ~GraphMem();                   // unmaps the range and returns the capacity
};

struct Graph {
  std::vector<Op> ops;  // captured order, a valid topological order of every member stream
  std::vector<std::shared_ptr<GraphMem>> allocs;          // its allocation nodes
  std::vector<std::shared_ptr<GraphMem>> foreign_frees;   // free nodes of other graphs' allocations
  std::shared_ptr<int> execs = std::make_shared<int>(0);  // live executable graphs (mem_mu)
  bool has_memory_nodes() const { return !allocs.empty() || !foreign_frees.empty(); }
};
struct GraphExec {
  std::vector<Op> ops;
  std::vector<std::shared_ptr<GraphMem>> allocs, foreign_frees;
  std::shared_ptr<int> execs;
  bool auto_free = false;  // CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
};

// A capture sequence. Kept allocated after it ends, so that an event recorded in it still names
// it; its streams and graph are released then.
struct Capture {
  uint64_t id = 0;
  CUstreamCaptureMode mode{};
  Stream* origin = nullptr;
  std::thread::id thread;  // the thread that began it
  Graph* graph = nullptr;
  bool invalidated = false;
  bool ended = false;
  std::vector<Stream*> members;      // origin first, then every stream that joined
  std::vector<CaptureClock> clocks;  // per member: what its next captured operation follows
};

// ---- memory map ----
enum class RangeKind : uint8_t { Linear, Managed, VmmMapping, Pinned, Registered, GraphAlloc };
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
  std::map<uintptr_t, std::shared_ptr<GraphMem>> graph_mems;  // by address, while it may be used

  std::mutex engine_mu[3];  // H2D, D2H, D2D copy engines (taken only when throttled)

  std::mutex capture_mu;
  std::vector<Capture*> captures;            // active (not ended)
  std::atomic<int> prohibiting_captures{0};  // active captures not begun in relaxed mode
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

// ---- stream capture rules (capture.cpp) ----
// A "potentially unsafe" call (synchronous allocation, free, copy or memset, event query or
// synchronisation, ...) made now by this thread: true, with the conflicting captures invalidated,
// when the capture modes prohibit it (cuThreadExchangeStreamCaptureMode's rules).
bool capture_violation();
// Enqueueing on, waiting for or querying the legacy stream while a blocking stream of its
// context captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (those captures invalidated), else success.
CUresult legacy_use(Stream* s);
// cuCtxSynchronize while a stream of the context captures: true, those captures invalidated.
bool ctx_sync_conflict(Ctx* c);
// An operation that cannot be captured, called on a capturing stream: its capture is invalidated
// and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED returned; success when s is not capturing.
CUresult refuse_in_capture(Stream* s);
// Caller holds capture_mu. Marks an active capture invalidated (counted once).
void invalidate_locked(Capture* cap);
// Caller holds capture_mu; cap is s's capture. Appends op to the graph (after what s follows).
CUresult capture_append_locked(Capture* cap, Stream* s, Op&& op);
// Caller holds capture_mu: what s's next captured operation follows.
const CaptureClock& capture_clock_locked(Capture* cap, const Stream* s);
// cuStreamWaitEvent on a captured event (cap), from stream s: joins, depends, or refuses.
CUresult capture_wait_event(Stream* s, Capture* cap, const CaptureClock& clock);
// cuEventQuery/Synchronize/ElapsedTime on an event last recorded in cap: the capture (if still
// active) is invalidated and CUDA_ERROR_CAPTURED_EVENT returned.
CUresult captured_event_use(Capture* cap);

// ---- graph memory nodes (graphs.cpp) ----
// cuMemAllocAsync on stream s: an allocation node when s captures (*captured set), else nothing.
CUresult graph_mem_alloc(Stream* s, size_t n, CUdeviceptr* out, bool* captured);
// cuMemFreeAsync of a graph allocation: a free node when s captures, else a stream-ordered free.
CUresult graph_mem_free_async(Stream* s, std::shared_ptr<GraphMem> gm);
// cuMemFree of a graph allocation, after the context was synchronised.
CUresult graph_mem_free_now(std::shared_ptr<GraphMem> gm);
// A captured graph that is thrown away (invalidated capture, cuGraphDestroy).
void release_graph(Graph* graph);
// The graph allocation that starts at p, if any.
std::shared_ptr<GraphMem> graph_mem_at(uintptr_t p);
// On a stream worker: back a graph allocation's range with memory, or drop the memory.
void graph_mem_back(GraphMem* gm, bool backed);

// Memory validation used by copies: the device range [p, p+n) lies in live accessible memory.
bool device_range_ok(uintptr_t p, size_t n);
bool is_device_ptr(uintptr_t p);
bool in_unmapped_reservation(uintptr_t p);
CUresult reserve_capacity(int dev, uint64_t bytes);
void release_capacity(int dev, uint64_t bytes);
void free_async_now(uintptr_t p);

void execute(Op& op, Stream* s);

}  // namespace simcuda
