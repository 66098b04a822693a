// streams.cpp: streams as FIFO worker threads, the legacy NULL stream's implicit barriers,
// per-thread default streams, events and host functions. Work submitted to a capturing stream
// goes to its capture (capture.cpp) instead of the queue.
//
// Locking: Stream::m guards a stream's queue and counters; Ctx::order_mu is taken around every
// enqueue on a blocking or legacy stream (before Stream::m) so the legacy barriers are consistent;
// Event::m guards an event's last recording; g().capture_mu (capture.cpp) is never taken while
// Event::m is held.
#include <sys/mman.h>

#include <type_traits>

#include "internal.h"

namespace simcuda {

void Timeline::wait(uint64_t seq) {
  if (done.load(std::memory_order_acquire) >= seq) return;
  std::unique_lock lk(m);
  cv.wait(lk, [&] { return done.load(std::memory_order_acquire) >= seq; });
}
void Timeline::advance(uint64_t seq) {
  {
    std::lock_guard lk(m);
    done.store(seq, std::memory_order_release);
  }
  cv.notify_all();
}

uint8_t* Op::alloc_params(size_t n) {
  params_size = n;
  if (n <= sizeof(params_inline)) return params_inline;
  params_heap.reset(new uint8_t[n]);
  return params_heap.get();
}

Op Op::clone() const {
  Op o;
  o.kind = kind;
  o.desc = desc;
  o.grid = grid;
  o.block = block;
  o.shmem = shmem;
  std::memcpy(o.alloc_params(params_size), params(), params_size);
  o.dir = dir;
  o.dst = dst;
  o.src = src;
  o.width = width;
  o.height = height;
  o.depth = depth;
  o.dpitch = dpitch;
  o.dheight = dheight;
  o.spitch = spitch;
  o.sheight = sheight;
  o.value = value;
  o.elem = elem;
  o.value64 = value64;
  o.memop_flags = memop_flags;
  o.fn = fn;
  o.user = user;
  o.callback = callback;
  o.callback_stream = callback_stream;
  o.wait_tl = wait_tl;
  o.wait_seq = wait_seq;
  o.rec = rec;
  o.free_ptr = free_ptr;
  o.gmem = gmem;
  return o;
}

// ---- execution on the worker thread ----
static void sleep_until_ns(int64_t t) {
  int64_t d = t - now_ns();
  if (d > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(d));
}

static void run_copy(Op& op) {
  size_t bytes = op.width * op.height * op.depth;
  double bps = 0;
  std::mutex* engine = nullptr;
  const Config& c = g().cfg;
  switch (op.dir) {
    case Dir::H2D:
      bps = c.h2d_bps;
      engine = &g().engine_mu[0];
      break;
    case Dir::D2H:
      bps = c.d2h_bps;
      engine = &g().engine_mu[1];
      break;
    case Dir::D2D:
      bps = c.d2d_bps;
      engine = &g().engine_mu[2];
      break;
    case Dir::H2H:
      break;
  }
  std::unique_lock<std::mutex> lk;
  if (bps > 0) {  // one copy engine per direction
    lk = std::unique_lock(*engine, std::try_to_lock);
    if (!lk.owns_lock()) {
      count(Counter::copy_engine_waits);
      lk.lock();
    }
  }
  switch (op.dir) {
    case Dir::H2D:
      count(Counter::h2d_copies);
      count(Counter::h2d_bytes, bytes);
      break;
    case Dir::D2H:
      count(Counter::d2h_copies);
      count(Counter::d2h_bytes, bytes);
      break;
    case Dir::D2D:
      count(Counter::d2d_copies);
      count(Counter::d2d_bytes, bytes);
      break;
    case Dir::H2H:
      break;
  }
  int64_t t0 = now_ns();
  size_t dpitch = op.dpitch ? op.dpitch : op.width, spitch = op.spitch ? op.spitch : op.width;
  size_t dh = op.dheight ? op.dheight : op.height, sh = op.sheight ? op.sheight : op.height;
  if (op.height == 1 && op.depth == 1) {
    std::memmove(op.dst, op.src, op.width);
  } else {
    for (size_t z = 0; z < op.depth; ++z)
      for (size_t y = 0; y < op.height; ++y)
        std::memmove(op.dst + (z * dh + y) * dpitch, op.src + (z * sh + y) * spitch, op.width);
  }
  if (bps > 0) sleep_until_ns(t0 + static_cast<int64_t>(static_cast<double>(bytes) / bps * 1e9));
}

static void run_memset(Op& op) {
  size_t pitch = op.dpitch ? op.dpitch : op.width * op.elem;
  for (size_t y = 0; y < op.height; ++y) {
    uint8_t* row = op.dst + y * pitch;
    switch (op.elem) {
      case 1:
        std::memset(row, static_cast<int>(op.value & 0xff), op.width);
        break;
      case 2: {
        uint16_t v = static_cast<uint16_t>(op.value);
        for (size_t i = 0; i < op.width; ++i) std::memcpy(row + 2 * i, &v, 2);
        break;
      }
      default: {
        uint32_t v = op.value;
        for (size_t i = 0; i < op.width; ++i) std::memcpy(row + 4 * i, &v, 4);
        break;
      }
    }
  }
}

// True when a stream wait's condition holds for the value v read at its address; the GEQ form
// is the cyclic comparison CUDA documents (wraparound ignored).
template <class T>
static bool wait_satisfied(T v, T want, unsigned flags) {
  using S = std::make_signed_t<T>;
  switch (flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH)) {
    case CU_STREAM_WAIT_VALUE_GEQ:
      return static_cast<S>(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return v == want;
    case CU_STREAM_WAIT_VALUE_AND:
      return (v & want) != 0;
    default:  // CU_STREAM_WAIT_VALUE_NOR (flags were validated at enqueue)
      return static_cast<T>(~(v | want)) != 0;
  }
}

// A GPU spins on the word; the worker polls it, backing off to short sleeps so that a wait
// released only much later (by the host or another stream) does not burn a core meanwhile.
static void run_wait_value(const Op& op) {
  for (unsigned spins = 0;; ++spins) {
    bool ok =
        op.elem == 8
            ? wait_satisfied<uint64_t>(
                  __atomic_load_n(reinterpret_cast<const uint64_t*>(op.dst), __ATOMIC_ACQUIRE),
                  op.value64, op.memop_flags)
            : wait_satisfied<uint32_t>(
                  __atomic_load_n(reinterpret_cast<const uint32_t*>(op.dst), __ATOMIC_ACQUIRE),
                  static_cast<uint32_t>(op.value64), op.memop_flags);
    if (ok) return;
    count(Counter::wait_value_unmet);
    if (spins < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void execute(Op& op, Stream* s) {
  switch (op.kind) {
    case OpKind::Kernel: {
      simcuda_launch l{};
      l.grid = op.grid;
      l.block = op.block;
      l.shared_mem_bytes = op.shmem;
      l.params = op.params();
      l.params_size = op.params_size;
      l.stream_id = s->id;
      int64_t t0 = now_ns();
      count(Counter::kernels);
      op.desc->fn(&l);
      uint64_t dur = op.desc->duration_fn ? op.desc->duration_fn(&l) : op.desc->duration_ns;
      if (dur) sleep_until_ns(t0 + static_cast<int64_t>(dur));
      break;
    }
    case OpKind::Copy:
      run_copy(op);
      break;
    case OpKind::Memset:
      run_memset(op);
      break;
    case OpKind::HostFn:
      if (op.callback) {
        op.callback(op.callback_stream, CUDA_SUCCESS, op.user);
      } else {
        op.fn(op.user);
      }
      break;
    case OpKind::Wait:
      op.wait_tl->wait(op.wait_seq);
      break;
    case OpKind::Record:
      op.rec->t_ns.store(now_ns(), std::memory_order_release);
      break;
    case OpKind::FreeAsync:
      free_async_now(op.free_ptr);
      break;
    case OpKind::WriteValue:
      // The v2 write always orders after the stream's earlier writes (no NO_MEMORY_BARRIER).
      if (op.elem == 8)
        __atomic_store_n(reinterpret_cast<uint64_t*>(op.dst), op.value64, __ATOMIC_SEQ_CST);
      else
        __atomic_store_n(reinterpret_cast<uint32_t*>(op.dst), static_cast<uint32_t>(op.value64),
                         __ATOMIC_SEQ_CST);
      break;
    case OpKind::WaitValue:
      run_wait_value(op);
      break;
    case OpKind::Barrier:
      std::atomic_thread_fence(std::memory_order_seq_cst);
      break;
    case OpKind::GraphAlloc:
      graph_mem_back(op.gmem.get(), true);
      break;
    case OpKind::GraphFree:
      graph_mem_back(op.gmem.get(), false);
      break;
  }
}

static void worker_main(Stream* s) {
  for (;;) {
    Op op;
    {
      std::unique_lock lk(s->m);
      s->cv.wait(lk, [&] { return s->stop || !s->q.empty(); });
      if (s->q.empty()) return;  // stop requested and drained
      op = s->q.pop_front();
    }
    execute(op, s);
    // This op may hold the last reference to a graph allocation: let it go (and its capacity
    // return) before anyone waiting for the stream wakes up.
    op.gmem.reset();
    s->tl->advance(op.seq);
  }
}

Stream* create_stream(Ctx* ctx, unsigned flags, int priority, bool legacy, bool per_thread) {
  auto* s = new Stream;
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  s->legacy = legacy;
  s->per_thread = per_thread;
  s->id = g().next_stream_id.fetch_add(1);
  s->worker = std::thread(worker_main, s);
  {
    std::lock_guard lk(ctx->order_mu);
    ctx->streams.push_back(s);
  }
  add_handle(g().streams, s);
  return s;
}

void destroy_stream(Stream* s) {
  if (!remove_handle(g().streams, s)) return;
  {
    std::lock_guard lk(s->ctx->order_mu);
    std::erase(s->ctx->streams, s);
    if (s->ctx->legacy == s) s->ctx->legacy = nullptr;
  }
  {
    std::lock_guard lk(s->m);
    s->stop = true;
  }
  s->cv.notify_all();
  // Pending work completes before the worker exits, as the real driver finishes it too.
  if (s->worker.joinable()) s->worker.join();
  // The Stream object is kept so that a stale handle reads as invalid instead of crashing.
}

static Stream* legacy_stream(Ctx* c) {
  std::lock_guard lk(c->order_mu);
  if (c->legacy) return c->legacy;
  auto* s = new Stream;
  s->ctx = c;
  s->legacy = true;
  s->id = 0;
  s->worker = std::thread(worker_main, s);
  c->streams.push_back(s);
  c->legacy = s;
  add_handle(g().streams, s);
  return s;
}

// Per-thread default streams, one per (thread, context), torn down when the thread exits.
struct PerThreadStreams {
  std::vector<std::pair<Ctx*, Stream*>> v;
  ~PerThreadStreams() {
    for (auto& [c, s] : v)
      if (live(g().streams, s)) destroy_stream(s);
  }
};
static thread_local PerThreadStreams t_pts;

static Stream* per_thread_stream(Ctx* c) {
  for (auto& [ctx, s] : t_pts.v)
    if (ctx == c && live(g().streams, s)) return s;
  std::erase_if(t_pts.v, [&](auto& e) { return e.first == c; });
  Stream* s = create_stream(c, CU_STREAM_DEFAULT, 0, false, true);
  t_pts.v.emplace_back(c, s);
  return s;
}

CUresult resolve_stream(CUstream h, bool ptds, Stream** out) {
  if (CUresult r = check_init()) return r;
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Ctx* c = nullptr;
    if (CUresult r = need_ctx(&c)) return r;
    bool pt = h == CU_STREAM_PER_THREAD || (h == nullptr && ptds);
    *out = pt ? per_thread_stream(c) : legacy_stream(c);
    return CUDA_SUCCESS;
  }
  auto* s = reinterpret_cast<Stream*>(h);
  if (!live(g().streams, s)) return CUDA_ERROR_INVALID_HANDLE;
  *out = s;
  return CUDA_SUCCESS;
}

// Pushes under s->m; caller holds ctx->order_mu where the stream takes part in legacy ordering.
static uint64_t push_locked(Stream* s, Op&& op) {
  std::lock_guard lk(s->m);
  uint64_t seq = op.seq = ++s->enqueued;
  s->q.push_back(std::move(op));
  return seq;
}
static void push_wait(Stream* s, const std::shared_ptr<Timeline>& tl, uint64_t seq) {
  Op w;
  w.kind = OpKind::Wait;
  w.wait_tl = tl;
  w.wait_seq = seq;
  push_locked(s, std::move(w));
}

static uint64_t enqueue(Stream* s, Op&& op) {
  uint64_t seq;
  if (s->legacy) {
    std::lock_guard lk(s->ctx->order_mu);
    for (Stream* b : s->ctx->streams) {
      if (!b->blocking()) continue;
      uint64_t be;
      {
        std::lock_guard bl(b->m);
        be = b->enqueued;
      }
      if (be > b->tl->done.load(std::memory_order_acquire) && be > b->legacy_waited_me) {
        push_wait(s, b->tl, be);
        b->legacy_waited_me = be;
      }
    }
    seq = push_locked(s, std::move(op));
  } else if (s->blocking()) {
    std::lock_guard lk(s->ctx->order_mu);
    if (Stream* l = s->ctx->legacy) {
      uint64_t le;
      {
        std::lock_guard ll(l->m);
        le = l->enqueued;
      }
      if (le > l->tl->done.load(std::memory_order_acquire) && le > s->waited_legacy) {
        push_wait(s, l->tl, le);
        s->waited_legacy = le;
      }
    }
    seq = push_locked(s, std::move(op));
  } else {
    seq = push_locked(s, std::move(op));
  }
  s->cv.notify_one();
  return seq;
}

CUresult submit(Stream* s, Op&& op) {
  if (s->capture.load(std::memory_order_acquire)) {
    std::lock_guard lk(g().capture_mu);
    if (Capture* cap = s->capture.load(std::memory_order_relaxed))
      return capture_append_locked(cap, s, std::move(op));
  }
  if (CUresult r = legacy_use(s)) return r;
  enqueue(s, std::move(op));
  return CUDA_SUCCESS;
}

void sync_stream(Stream* s) {
  uint64_t target;
  {
    std::lock_guard lk(s->m);
    target = s->enqueued;
  }
  s->tl->wait(target);
}

CUresult submit_and_wait(Stream* s, Op&& op) {
  if (CUresult r = refuse_in_capture(s)) return r;
  if (CUresult r = legacy_use(s)) return r;
  uint64_t seq = enqueue(s, std::move(op));
  s->tl->wait(seq);
  return CUDA_SUCCESS;
}

void sync_ctx(Ctx* c) {
  count(Counter::device_wide_syncs);
  std::vector<Stream*> streams;
  {
    std::lock_guard lk(c->order_mu);
    streams = c->streams;
  }
  for (Stream* s : streams) sync_stream(s);
}

}  // namespace simcuda

using namespace simcuda;

// ---- stream API ----
static CUresult stream_create(CUstream* ph, unsigned flags, int priority) {
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  if (!ph || (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
  *ph = reinterpret_cast<CUstream>(create_stream(c, flags, priority, false, false));
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamCreate(CUstream* ph, unsigned int flags) {
  SC_ENTRY(cuStreamCreate);
  return stream_create(ph, flags, 0);
}
SC_EXPORT CUresult cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  SC_ENTRY(cuStreamCreateWithPriority);
  if (priority > 0) priority = 0;
  if (priority < -5) priority = -5;
  return stream_create(ph, flags, priority);
}
SC_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  SC_ENTRY(cuCtxGetStreamPriorityRange);
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}
static CUresult stream_destroy(CUstream h) {
  if (CUresult r = check_init()) return r;
  auto* s = reinterpret_cast<Stream*>(h);
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !live(g().streams, s) ||
      s->legacy || s->per_thread)
    return CUDA_ERROR_INVALID_HANDLE;
  destroy_stream(s);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
  SC_ENTRY(cuStreamDestroy_v2);
  return stream_destroy(h);
}
SC_EXPORT CUresult cuStreamDestroy(CUstream h) {
  SC_ENTRY(cuStreamDestroy);
  return stream_destroy(h);
}

static CUresult stream_sync(CUstream h, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  // Captured work is not scheduled: synchronising it is refused whatever the capture mode.
  if (CUresult r = refuse_in_capture(s)) return r;
  if (CUresult r = legacy_use(s)) return r;
  count(Counter::stream_synchronize);
  if (s->legacy) {
    // Synchronising the legacy stream waits for the blocking streams its next op would wait on.
    Op nop;
    nop.kind = OpKind::Record;
    nop.rec = std::make_shared<EventRec>();
    nop.rec->tl = s->tl;
    uint64_t seq = enqueue(s, std::move(nop));
    s->tl->wait(seq);
    return CUDA_SUCCESS;
  }
  sync_stream(s);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamSynchronize(CUstream h) {
  SC_ENTRY(cuStreamSynchronize);
  return stream_sync(h, false);
}
SC_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h) {
  SC_ENTRY(cuStreamSynchronize_ptsz);
  return stream_sync(h, true);
}

static CUresult stream_query(CUstream h, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (CUresult r = refuse_in_capture(s)) return r;
  if (CUresult r = legacy_use(s)) return r;
  std::lock_guard lk(s->m);
  return s->tl->done.load() >= s->enqueued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
SC_EXPORT CUresult cuStreamQuery(CUstream h) {
  SC_ENTRY(cuStreamQuery);
  return stream_query(h, false);
}
SC_EXPORT CUresult cuStreamQuery_ptsz(CUstream h) {
  SC_ENTRY(cuStreamQuery_ptsz);
  return stream_query(h, true);
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!live(g().events, ev)) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<EventRec> rec;
  Capture* ecap;
  CaptureClock clock;
  {
    std::lock_guard lk(ev->m);
    rec = ev->rec;
    ecap = ev->cap;
    clock = ev->clock;
  }
  // A captured event: s joins its capture, depends on it inside the capture, or is refused.
  if (ecap) return capture_wait_event(s, ecap, clock);
  if (s->capture.load(std::memory_order_acquire)) {
    std::lock_guard lk(g().capture_mu);
    if (Capture* cap = s->capture.load(std::memory_order_relaxed)) {
      if (cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      if (!rec) return CUDA_SUCCESS;  // never recorded: no work, so no dependency to cross
      // A dependency on work outside the capture would cross its boundary.
      invalidate_locked(cap);
      return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
  }
  if (CUresult r = legacy_use(s)) return r;
  if (!rec) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  Op w;
  w.kind = OpKind::Wait;
  w.wait_tl = rec->tl;
  w.wait_seq = rec->seq;
  enqueue(s, std::move(w));
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  SC_ENTRY(cuStreamWaitEvent);
  return stream_wait_event(h, e, flags, false);
}
SC_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  SC_ENTRY(cuStreamWaitEvent_ptsz);
  return stream_wait_event(h, e, flags, true);
}

static CUresult launch_host_func(CUstream h, CUhostFn fn, void* user, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = OpKind::HostFn;
  op.fn = fn;
  op.user = user;
  return submit(s, std::move(op));
}
SC_EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* user) {
  SC_ENTRY(cuLaunchHostFunc);
  return launch_host_func(h, fn, user, false);
}
SC_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* user) {
  SC_ENTRY(cuLaunchHostFunc_ptsz);
  return launch_host_func(h, fn, user, true);
}

static CUresult add_callback(CUstream h, CUstreamCallback cb, void* user, unsigned flags, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = OpKind::HostFn;
  op.callback = cb;
  op.callback_stream = h;  // the callback receives the handle it was registered with
  op.user = user;
  return submit(s, std::move(op));
}
SC_EXPORT CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void* user,
                                       unsigned int flags) {
  SC_ENTRY(cuStreamAddCallback);
  return add_callback(h, cb, user, flags, false);
}
SC_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream h, CUstreamCallback cb, void* user,
                                            unsigned int flags) {
  SC_ENTRY(cuStreamAddCallback_ptsz);
  return add_callback(h, cb, user, flags, true);
}

static CUresult stream_get_flags(CUstream h, unsigned* flags, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamGetFlags(CUstream h, unsigned int* f) {
  SC_ENTRY(cuStreamGetFlags);
  return stream_get_flags(h, f, false);
}
SC_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream h, unsigned int* f) {
  SC_ENTRY(cuStreamGetFlags_ptsz);
  return stream_get_flags(h, f, true);
}
static CUresult stream_get_priority(CUstream h, int* p, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *p = s->priority;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamGetPriority(CUstream h, int* p) {
  SC_ENTRY(cuStreamGetPriority);
  return stream_get_priority(h, p, false);
}
SC_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream h, int* p) {
  SC_ENTRY(cuStreamGetPriority_ptsz);
  return stream_get_priority(h, p, true);
}
static CUresult stream_get_ctx(CUstream h, CUcontext* pctx, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(s->ctx);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamGetCtx(CUstream h, CUcontext* c) {
  SC_ENTRY(cuStreamGetCtx);
  return stream_get_ctx(h, c, false);
}
SC_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream h, CUcontext* c) {
  SC_ENTRY(cuStreamGetCtx_ptsz);
  return stream_get_ctx(h, c, true);
}
static CUresult stream_get_id(CUstream h, unsigned long long* id, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  *id = s->id;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamGetId(CUstream h, unsigned long long* id) {
  SC_ENTRY(cuStreamGetId);
  return stream_get_id(h, id, false);
}
SC_EXPORT CUresult cuStreamGetId_ptsz(CUstream h, unsigned long long* id) {
  SC_ENTRY(cuStreamGetId_ptsz);
  return stream_get_id(h, id, true);
}
static CUresult stream_get_device(CUstream h, CUdevice* d, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  *d = s->ctx->device;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamGetDevice(CUstream h, CUdevice* d) {
  SC_ENTRY(cuStreamGetDevice);
  return stream_get_device(h, d, false);
}
SC_EXPORT CUresult cuStreamGetDevice_ptsz(CUstream h, CUdevice* d) {
  SC_ENTRY(cuStreamGetDevice_ptsz);
  return stream_get_device(h, d, true);
}

// ---- events ----
SC_EXPORT CUresult cuEventCreate(CUevent* ph, unsigned int flags) {
  SC_ENTRY(cuEventCreate);
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  if (!ph) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_VALUE;
  auto* e = new Event;
  e->flags = flags;
  add_handle(g().events, e);
  *ph = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

static CUresult event_record(CUevent he, CUstream h, bool pt) {
  auto* ev = reinterpret_cast<Event*>(he);
  if (CUresult r = check_init()) return r;
  if (!live(g().events, ev)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (s->capture.load(std::memory_order_acquire)) {
    // A captured event: it stands for the captured work before it, never for scheduled work.
    std::lock_guard lk(g().capture_mu);
    if (Capture* cap = s->capture.load(std::memory_order_relaxed)) {
      if (cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      std::lock_guard el(ev->m);
      ev->rec.reset();
      ev->cap = cap;
      ev->clock = capture_clock_locked(cap, s);
      return CUDA_SUCCESS;
    }
  }
  if (CUresult r = legacy_use(s)) return r;
  auto rec = std::make_shared<EventRec>();
  rec->tl = s->tl;
  Op op;
  op.kind = OpKind::Record;
  op.rec = rec;
  // The event's recording is published before the worker can run it, under the event lock,
  // so a concurrent query sees either the old or the new recording, never a half-made one.
  std::lock_guard lk(ev->m);
  rec->seq = enqueue(s, std::move(op));
  ev->rec = rec;
  ev->cap = nullptr;
  ev->clock.clear();
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  SC_ENTRY(cuEventRecord);
  return event_record(e, s, false);
}
SC_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  SC_ENTRY(cuEventRecord_ptsz);
  return event_record(e, s, true);
}
SC_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  SC_ENTRY(cuEventRecordWithFlags);
  return event_record(e, s, false);
}
SC_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  SC_ENTRY(cuEventRecordWithFlags_ptsz);
  return event_record(e, s, true);
}

static std::shared_ptr<EventRec> event_rec(Event* ev, Capture** cap) {
  std::lock_guard lk(ev->m);
  *cap = ev->cap;
  return ev->rec;
}

SC_EXPORT CUresult cuEventQuery(CUevent he) {
  SC_ENTRY(cuEventQuery);
  auto* ev = reinterpret_cast<Event*>(he);
  if (CUresult r = check_init()) return r;
  if (!live(g().events, ev)) return CUDA_ERROR_INVALID_HANDLE;
  Capture* cap = nullptr;
  auto rec = event_rec(ev, &cap);
  if (cap) return captured_event_use(cap);  // never complete outside its graph
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!rec) return CUDA_SUCCESS;
  return rec->complete() && rec->t_ns.load() >= 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
SC_EXPORT CUresult cuEventSynchronize(CUevent he) {
  SC_ENTRY(cuEventSynchronize);
  auto* ev = reinterpret_cast<Event*>(he);
  if (CUresult r = check_init()) return r;
  if (!live(g().events, ev)) return CUDA_ERROR_INVALID_HANDLE;
  Capture* cap = nullptr;
  auto rec = event_rec(ev, &cap);
  if (cap) return captured_event_use(cap);
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  count(Counter::event_synchronize);
  if (rec) rec->tl->wait(rec->seq);
  return CUDA_SUCCESS;
}
static CUresult event_elapsed(float* ms, CUevent a, CUevent b) {
  if (CUresult r = check_init()) return r;
  auto* ea = reinterpret_cast<Event*>(a);
  auto* eb = reinterpret_cast<Event*>(b);
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().events, ea) || !live(g().events, eb)) return CUDA_ERROR_INVALID_HANDLE;
  if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  Capture *ca = nullptr, *cb = nullptr;
  auto ra = event_rec(ea, &ca), rb = event_rec(eb, &cb);
  if (ca || cb) return captured_event_use(ca ? ca : cb);
  if (!ra || !rb) return CUDA_ERROR_INVALID_HANDLE;
  if (!ra->complete() || !rb->complete()) return CUDA_ERROR_NOT_READY;
  int64_t ta = ra->t_ns.load(), tb = rb->t_ns.load();
  if (ta < 0 || tb < 0) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(tb - ta) / 1e6);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  SC_ENTRY(cuEventElapsedTime_v2);
  return event_elapsed(ms, a, b);
}
SC_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  SC_ENTRY(cuEventElapsedTime);
  return event_elapsed(ms, a, b);
}
static CUresult event_destroy(CUevent he) {
  if (CUresult r = check_init()) return r;
  auto* ev = reinterpret_cast<Event*>(he);
  if (!remove_handle(g().events, ev)) return CUDA_ERROR_INVALID_HANDLE;
  // Pending recordings hold their own EventRec, so the event itself can go now; it is kept
  // allocated so a stale handle reads as invalid.
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuEventDestroy_v2(CUevent he) {
  SC_ENTRY(cuEventDestroy_v2);
  return event_destroy(he);
}
SC_EXPORT CUresult cuEventDestroy(CUevent he) {
  SC_ENTRY(cuEventDestroy);
  return event_destroy(he);
}
