// hooks_graph.cpp: accesses gswap cannot see per launch (fact 4 and 8): graph replays, stream
// capture and TMA descriptors. What they touch stays resident.
//
// Graphs gswap saw captured are "known": every region their launches, copies and memsets touched
// stays resident while the graph or any instance of it lives, so replaying them needs nothing;
// once all are destroyed those regions may leave again. A replay of any other graph (built node
// by node, or captured before gswap was loaded) may reference anything: everything live at that
// time stays resident from then on (logged once). A launch of no instance, or of one destroyed,
// is left to the driver, which refuses it.
//
// Locking: g_graphs_mutex owns the two maps; it is taken at capture end, instantiation,
// destruction and graph launch, never on the kernel-launch path.
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/process.h"

namespace gswap::interpose {
namespace {

// What one captured graph replays, shared by the graph and its instances: the regions stay
// until the last of them is destroyed.
struct Captured {
  std::vector<std::uint64_t> regions;
  ~Captured() { release_graph(regions); }
};
using CapturedPtr = std::shared_ptr<Captured>;

std::mutex g_graphs_mutex;
// Never freed: used at exit.
auto* g_captured = new std::unordered_map<CUgraph, CapturedPtr>();
auto* g_known = new std::unordered_map<CUgraphExec, CapturedPtr>();
// Instances destroyed through gswap and not handed out again since: the driver refuses their
// launch, which then needs nothing kept resident.
auto* g_destroyed = new std::unordered_set<CUgraphExec>();

void instantiated(CUresult e, CUgraphExec* exec, CUgraph graph) {
  if (e != CUDA_SUCCESS || !exec) return;
  CapturedPtr old;  // released outside the lock
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  g_destroyed->erase(*exec);
  auto it = g_captured->find(graph);
  auto& slot = (*g_known)[*exec];
  old = std::move(slot);  // a recycled handle must not inherit an old graph's status
  if (it != g_captured->end())
    slot = it->second;
  else
    g_known->erase(*exec);
}

// Takes the entry of `key` out of `map` (the caller drops it after unlocking).
template <class Map, class Key>
CapturedPtr take(Map* map, Key key) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  auto it = map->find(key);
  if (it == map->end()) return nullptr;
  CapturedPtr p = std::move(it->second);
  map->erase(it);
  return p;
}

// Puts `held` back as the entry of `key` (a destroy that failed).
template <class Map, class Key>
void put_back(Map* map, Key key, CapturedPtr held) {
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  map->emplace(key, std::move(held));
}

// A launch of no instance, or of one destroyed, fails in the driver: it replays nothing, so
// nothing needs to stay resident for it.
CUresult before_replay(CUgraphExec exec) {
  if (!exec) return CUDA_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(g_graphs_mutex);
    if (g_known->count(exec) || g_destroyed->count(exec)) return CUDA_SUCCESS;
  }
  return keep_all_resident("cuGraphLaunch of a graph gswap did not see captured");
}

}  // namespace

CUresult hook_cuGraphLaunch(CUgraphExec g, CUstream s) {
  CUresult e = before_replay(g);
  if (e != CUDA_SUCCESS) return e;
  return real().cuGraphLaunch(g, s);
}
CUresult hook_cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) {
  CUresult e = before_replay(g);
  if (e != CUDA_SUCCESS) return e;
  return real().cuGraphLaunch_ptsz(g, s);
}

CUresult hook_cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* err, char* log,
                                 size_t size) {
  CUresult e = real().cuGraphInstantiate(exec, graph, err, log, size);
  instantiated(e, exec, graph);
  return e;
}
CUresult hook_cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode* err, char* log,
                                    size_t size) {
  CUresult e = real().cuGraphInstantiate_v2(exec, graph, err, log, size);
  instantiated(e, exec, graph);
  return e;
}
CUresult hook_cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                          unsigned long long flags) {
  CUresult e = real().cuGraphInstantiateWithFlags(exec, graph, flags);
  instantiated(e, exec, graph);
  return e;
}
CUresult hook_cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  CUresult e = real().cuGraphInstantiateWithParams(exec, graph, params);
  instantiated(e, exec, graph);
  return e;
}
CUresult hook_cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  CUresult e = real().cuGraphInstantiateWithParams_ptsz(exec, graph, params);
  instantiated(e, exec, graph);
  return e;
}
// The regions may leave once the real destroy has returned (a replay in flight still holds
// them on the device until then: the driver waits for it or keeps the memory alive).
// The entry is taken out before the real call (once it returns, another thread may be given the
// same handle) and put back when the call fails: the instance or graph lives on as it was.
CUresult hook_cuGraphExecDestroy(CUgraphExec exec) {
  CapturedPtr held = take(g_known, exec);
  CUresult e = real().cuGraphExecDestroy(exec);
  if (e == CUDA_SUCCESS && exec) {
    std::lock_guard<std::mutex> lock(g_graphs_mutex);
    g_destroyed->insert(exec);
  } else if (held) {
    put_back(g_known, exec, std::move(held));
  }
  return e;
}
CUresult hook_cuGraphDestroy(CUgraph graph) {
  CapturedPtr held = take(g_captured, graph);
  CUresult e = real().cuGraphDestroy(graph);
  if (e != CUDA_SUCCESS && held) put_back(g_captured, graph, std::move(held));
  return e;
}

namespace {
// The capture is counted before the real call (capture_gate.h): no swap-out or free of gswap's
// is half way through recording on application streams when the stream starts capturing. A
// call that fails undoes the count.
template <class Begin>
CUresult counted_begin(Begin&& begin) {
  capture_begin();
  CUresult e = begin();
  if (e != CUDA_SUCCESS) capture_end();
  return e;
}
}  // namespace

CUresult hook_cuStreamBeginCapture(CUstream s) {
  return counted_begin([&] { return real().cuStreamBeginCapture(s); });
}
CUresult hook_cuStreamBeginCapture_ptsz(CUstream s) {
  return counted_begin([&] { return real().cuStreamBeginCapture_ptsz(s); });
}
CUresult hook_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return counted_begin([&] { return real().cuStreamBeginCapture_v2(s, mode); });
}
CUresult hook_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return counted_begin([&] { return real().cuStreamBeginCapture_v2_ptsz(s, mode); });
}
namespace {
// Before the capture's end is counted, so that what the graph replays never becomes free to
// leave in between.
void captured(CUresult e, CUgraph* g) {
  if (e != CUDA_SUCCESS || !g || !*g) return;
  auto c = std::make_shared<Captured>();
  c->regions = take_captured();
  CapturedPtr old;  // released outside the lock
  std::lock_guard<std::mutex> lock(g_graphs_mutex);
  old = std::move((*g_captured)[*g]);
  (*g_captured)[*g] = std::move(c);
}

// Whether s is capturing now: only an end of a capture that was on ends gswap's count of it.
bool is_capturing(CUstream s, bool per_thread) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult e = per_thread && real().cuStreamIsCapturing_ptsz
                   ? real().cuStreamIsCapturing_ptsz(s, &st)
                   : real().cuStreamIsCapturing(s, &st);
  return e != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

// A failed end may leave the capture on (called from another thread than the one that began a
// global or thread-local capture, or on a stream joined into another's capture): only a capture
// that is over ends gswap's count of it. One the driver ended anyway (an invalidated capture,
// whose end fails) is not capturing any more.
template <class End>
CUresult counted_end(CUstream s, CUgraph* g, bool per_thread, End&& end) {
  bool was = is_capturing(s, per_thread);
  CUresult e = end();
  captured(e, g);
  if (was && (e == CUDA_SUCCESS || !is_capturing(s, per_thread))) capture_end();
  return e;
}
}  // namespace

CUresult hook_cuStreamEndCapture(CUstream s, CUgraph* g) {
  return counted_end(s, g, false, [&] { return real().cuStreamEndCapture(s, g); });
}
CUresult hook_cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  return counted_end(s, g, true, [&] { return real().cuStreamEndCapture_ptsz(s, g); });
}

CUresult hook_cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                     void* addr, const cuuint64_t* dim, const cuuint64_t* strides,
                                     const cuuint32_t* box, const cuuint32_t* estrides,
                                     CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  // Kernels reach the tensor through the descriptor, not their parameters: pin its region.
  CUresult e = keep_resident_at(reinterpret_cast<CUdeviceptr>(addr), "cuTensorMapEncodeTiled");
  if (e != CUDA_SUCCESS) return e;
  return real().cuTensorMapEncodeTiled(map, type, rank, addr, dim, strides, box, estrides, il, sw,
                                       l2, oob);
}

CUresult hook_cuTensorMapEncodeIm2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                      void* addr, const cuuint64_t* dim, const cuuint64_t* strides,
                                      const int* lower, const int* upper, cuuint32_t channels,
                                      cuuint32_t pixels, const cuuint32_t* estrides,
                                      CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                      CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  CUresult e = keep_resident_at(reinterpret_cast<CUdeviceptr>(addr), "cuTensorMapEncodeIm2col");
  if (e != CUDA_SUCCESS) return e;
  return real().cuTensorMapEncodeIm2col(map, type, rank, addr, dim, strides, lower, upper, channels,
                                        pixels, estrides, il, sw, l2, oob);
}

}  // namespace gswap::interpose
