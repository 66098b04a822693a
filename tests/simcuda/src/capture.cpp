// capture.cpp: stream capture as the driver does it. Captures begin and end on their origin
// stream; other streams join by waiting on a captured event, and must be joined back before the
// end; calls the driver calls potentially unsafe are refused by thread and capture mode; and the
// operations that necessarily conflict with a capture (synchronising or querying captured work,
// using the legacy stream behind a capturing blocking stream, waits across capture boundaries)
// are refused in every mode. A refused call invalidates the captures it conflicts with.
//
// The rules follow cuda.h (cuThreadExchangeStreamCaptureMode, cuStreamIsCapturing,
// cuStreamEndCapture and the CUDA_ERROR_STREAM_CAPTURE_* descriptions) and the CUDA Programming
// Guide's "Stream Capture" section; the README lists each rule with its source.
//
// Locking: g().capture_mu guards every Capture, the streams' capture pointers, the capture list
// and the graph being captured. An Event's fields are read under Event::m and used after it is
// released, so capture_mu is never taken while Event::m is held.
#include <algorithm>

#include "internal.h"

namespace simcuda {

namespace {

// This thread's capture interaction mode (cuThreadExchangeStreamCaptureMode).
thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

size_t member_index(const Capture* cap, const Stream* s) {
  auto it = std::find(cap->members.begin(), cap->members.end(), s);
  return static_cast<size_t>(it - cap->members.begin());
}

uint64_t clock_of(const CaptureClock& c, const Stream* s) {
  for (const auto& [m, n] : c)
    if (m == s) return n;
  return 0;
}

void clock_merge(CaptureClock* into, const CaptureClock& from) {
  for (const auto& [m, n] : from) {
    auto it = std::find_if(into->begin(), into->end(), [&](const auto& e) { return e.first == m; });
    if (it == into->end())
      into->emplace_back(m, n);
    else
      it->second = std::max(it->second, n);
  }
}

// a <= b: everything a follows, b follows too.
bool clock_covered(const CaptureClock& a, const CaptureClock& b) {
  for (const auto& [m, n] : a)
    if (clock_of(b, m) < n) return false;
  return true;
}

void add_member_locked(Capture* cap, Stream* s, CaptureClock clock) {
  cap->members.push_back(s);
  cap->clocks.push_back(std::move(clock));
  if (s->blocking()) s->ctx->blocking_captures.fetch_add(1);
  s->capture.store(cap, std::memory_order_release);
}

// Takes every member out of capture mode and forgets the capture; returns its graph.
Graph* end_locked(Capture* cap) {
  for (Stream* m : cap->members) {
    m->capture.store(nullptr, std::memory_order_release);
    if (m->blocking()) m->ctx->blocking_captures.fetch_sub(1);
  }
  std::erase(g().captures, cap);
  if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED) g().prohibiting_captures.fetch_sub(1);
  cap->ended = true;
  cap->members.clear();
  cap->clocks.clear();
  Graph* graph = cap->graph;
  cap->graph = nullptr;
  return graph;
}

}  // namespace

void invalidate_locked(Capture* cap) {
  if (cap->invalidated || cap->ended) return;
  cap->invalidated = true;
  count(Counter::capture_invalidations);
}

const CaptureClock& capture_clock_locked(Capture* cap, const Stream* s) {
  return cap->clocks[member_index(cap, s)];
}

CUresult capture_append_locked(Capture* cap, Stream* s, Op&& op) {
  if (cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  CaptureClock& c = cap->clocks[member_index(cap, s)];
  uint64_t own = clock_of(c, s) + 1;
  clock_merge(&c, {{s, own}});
  cap->graph->ops.push_back(std::move(op));
  return CUDA_SUCCESS;
}

bool capture_violation() {
  if (g().prohibiting_captures.load(std::memory_order_acquire) == 0) return false;
  CUstreamCaptureMode mode = t_mode;
  if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return false;
  std::lock_guard lk(g().capture_mu);
  bool hit = false;
  for (Capture* c : g().captures) {
    if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
    // Global mode: this thread's own capture, or any thread's global-mode capture. Thread-local
    // mode: only this thread's own capture.
    bool own = c->thread == std::this_thread::get_id();
    if (own ||
        (mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
      invalidate_locked(c);
      hit = true;  // an invalidated capture still prohibits until it is ended
    }
  }
  return hit;
}

CUresult legacy_use(Stream* s) {
  if (!s->legacy || s->ctx->blocking_captures.load(std::memory_order_acquire) == 0)
    return CUDA_SUCCESS;
  std::lock_guard lk(g().capture_mu);
  bool hit = false;
  for (Capture* c : g().captures)
    for (Stream* m : c->members)
      if (m->ctx == s->ctx && m->blocking()) {
        invalidate_locked(c);
        hit = true;
        break;
      }
  return hit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

bool ctx_sync_conflict(Ctx* ctx) {
  std::lock_guard lk(g().capture_mu);
  bool hit = false;
  for (Capture* c : g().captures)
    for (Stream* m : c->members)
      if (m->ctx == ctx) {
        invalidate_locked(c);
        hit = true;
        break;
      }
  return hit;
}

CUresult refuse_in_capture(Stream* s) {
  if (!s->capture.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::lock_guard lk(g().capture_mu);
  Capture* cap = s->capture.load(std::memory_order_relaxed);
  if (!cap) return CUDA_SUCCESS;
  invalidate_locked(cap);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult captured_event_use(Capture* cap) {
  std::lock_guard lk(g().capture_mu);
  invalidate_locked(cap);  // no-op once the capture has ended
  return CUDA_ERROR_CAPTURED_EVENT;
}

CUresult capture_wait_event(Stream* s, Capture* ecap, const CaptureClock& clock) {
  std::lock_guard lk(g().capture_mu);
  Capture* scap = s->capture.load(std::memory_order_relaxed);
  if (scap && scap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  // The capture the event belongs to is over: its nodes are in a graph, not scheduled work.
  if (ecap->ended) return CUDA_ERROR_CAPTURED_EVENT;
  if (scap == ecap) {  // a dependency inside the capture (a join when s is the origin)
    clock_merge(&scap->clocks[member_index(scap, s)], clock);
    return CUDA_SUCCESS;
  }
  if (scap) {  // waiting across two captures would merge their graphs
    invalidate_locked(scap);
    invalidate_locked(ecap);
    return CUDA_ERROR_STREAM_CAPTURE_MERGE;
  }
  if (ecap->invalidated) return CUDA_ERROR_INVALID_VALUE;
  if (s->legacy) {  // the legacy stream cannot be captured
    invalidate_locked(ecap);
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  // s joins the capture: its later work is captured into the same graph, after the event.
  add_member_locked(ecap, s, clock);
  return CUDA_SUCCESS;
}

}  // namespace simcuda

using namespace simcuda;

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lk(g().capture_mu);
  if (s->capture.load(std::memory_order_relaxed)) return CUDA_ERROR_ILLEGAL_STATE;
  auto* cap = new Capture;  // never deleted: events recorded in it keep naming it
  cap->id = g().next_capture_id.fetch_add(1);
  cap->mode = mode;
  cap->origin = s;
  cap->thread = std::this_thread::get_id();
  cap->graph = new Graph;
  g().captures.push_back(cap);
  if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) g().prohibiting_captures.fetch_add(1);
  add_member_locked(cap, s, {});
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  SC_ENTRY(cuStreamBeginCapture_v2);
  return begin_capture(h, mode, false);
}
SC_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  SC_ENTRY(cuStreamBeginCapture_v2_ptsz);
  return begin_capture(h, mode, true);
}
SC_EXPORT CUresult cuStreamBeginCapture(CUstream h) {
  SC_ENTRY(cuStreamBeginCapture);
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}
SC_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  SC_ENTRY(cuStreamBeginCapture_ptsz);
  return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}

static CUresult end_capture(CUstream h, CUgraph* out, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Graph* graph = nullptr;
  CUresult result = CUDA_SUCCESS;
  {
    std::lock_guard lk(g().capture_mu);
    Capture* cap = s->capture.load(std::memory_order_relaxed);
    if (!cap) return CUDA_ERROR_ILLEGAL_STATE;
    if (cap->origin != s) {  // a joined stream cannot end the capture
      invalidate_locked(cap);
      return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && cap->thread != std::this_thread::get_id())
      return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    // Every stream that joined must have been joined back: the origin follows all it follows.
    bool unjoined = false;
    for (const CaptureClock& c : cap->clocks) unjoined |= !clock_covered(c, cap->clocks[0]);
    if (cap->invalidated) {
      result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (unjoined) {
      invalidate_locked(cap);
      result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
    graph = end_locked(cap);
  }
  if (result != CUDA_SUCCESS) {
    release_graph(graph);
    *out = nullptr;
    return result;
  }
  add_handle(g().graphs, graph);
  *out = reinterpret_cast<CUgraph>(graph);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph* g_) {
  SC_ENTRY(cuStreamEndCapture);
  return end_capture(h, g_, false);
}
SC_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph* g_) {
  SC_ENTRY(cuStreamEndCapture_ptsz);
  return end_capture(h, g_, true);
}

static CUresult capture_info(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* graph,
                             bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  // Asking about the legacy stream behind a capturing blocking stream is refused, but (unlike
  // using it) does not invalidate the capture.
  if (s->legacy && s->ctx->blocking_captures.load(std::memory_order_acquire) > 0)
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  std::lock_guard lk(g().capture_mu);
  Capture* cap = s->capture.load(std::memory_order_relaxed);
  if (!cap) {
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (graph) *graph = nullptr;
    return CUDA_SUCCESS;
  }
  *st = cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id) *id = cap->id;
  if (graph) *graph = reinterpret_cast<CUgraph>(cap->graph);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* st) {
  SC_ENTRY(cuStreamIsCapturing);
  return capture_info(h, st, nullptr, nullptr, false);
}
SC_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* st) {
  SC_ENTRY(cuStreamIsCapturing_ptsz);
  return capture_info(h, st, nullptr, nullptr, true);
}
SC_EXPORT CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id) {
  SC_ENTRY(cuStreamGetCaptureInfo);
  return capture_info(h, st, id, nullptr, false);
}
SC_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus* st,
                                               cuuint64_t* id) {
  SC_ENTRY(cuStreamGetCaptureInfo_ptsz);
  return capture_info(h, st, id, nullptr, true);
}
static CUresult capture_info_v3(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                CUgraph* graph, const CUgraphNode** deps,
                                const CUgraphEdgeData** edges, size_t* ndeps, bool pt) {
  if (CUresult r = capture_info(h, st, id, graph, pt)) return r;
  // Captured work is kept as one ordered list, so there are no node handles to report.
  if (deps) *deps = nullptr;
  if (edges) *edges = nullptr;
  if (ndeps) *ndeps = 0;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                             CUgraph* graph, const CUgraphNode** deps,
                                             size_t* ndeps) {
  SC_ENTRY(cuStreamGetCaptureInfo_v2);
  return capture_info_v3(h, st, id, graph, deps, nullptr, ndeps, false);
}
SC_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus* st,
                                                  cuuint64_t* id, CUgraph* graph,
                                                  const CUgraphNode** deps, size_t* ndeps) {
  SC_ENTRY(cuStreamGetCaptureInfo_v2_ptsz);
  return capture_info_v3(h, st, id, graph, deps, nullptr, ndeps, true);
}
SC_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id,
                                             CUgraph* graph, const CUgraphNode** deps,
                                             const CUgraphEdgeData** edges, size_t* ndeps) {
  SC_ENTRY(cuStreamGetCaptureInfo_v3);
  return capture_info_v3(h, st, id, graph, deps, edges, ndeps, false);
}
SC_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus* st,
                                                  cuuint64_t* id, CUgraph* graph,
                                                  const CUgraphNode** deps,
                                                  const CUgraphEdgeData** edges, size_t* ndeps) {
  SC_ENTRY(cuStreamGetCaptureInfo_v3_ptsz);
  return capture_info_v3(h, st, id, graph, deps, edges, ndeps, true);
}

SC_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  SC_ENTRY(cuThreadExchangeStreamCaptureMode);
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode want = *mode;
  if (want != CU_STREAM_CAPTURE_MODE_GLOBAL && want != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      want != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  *mode = t_mode;
  t_mode = want;
  return CUDA_SUCCESS;
}
