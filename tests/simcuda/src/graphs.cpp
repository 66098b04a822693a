// graphs.cpp: graphs made by stream capture (instantiation, replay, destruction) and their memory
// nodes. cuMemAllocAsync on a capturing stream becomes an allocation node: its address range is
// reserved at once and stays fixed for the node's lifetime, memory backs it from the node's
// execution until a free node (this graph's or another's), cuMemFreeAsync or cuMemFree, and the
// capacity it needs is charged at the first launch and held until the allocation can no longer be
// used (as the driver keeps a graph's memory reserved for it). The rules are cuda.h's
// (cuGraphAddMemAllocNode, cuGraphInstantiate, cuGraphLaunch) and the Programming Guide's "Graph
// Memory Nodes"; the README lists them.
//
// Locking: GraphMem state, Graph::execs and g().graph_mems are guarded by g().mem_mu; a capture's
// graph by g().capture_mu (taken before mem_mu).
#include <sys/mman.h>

#include <algorithm>

#include "internal.h"

namespace simcuda {

namespace {

constexpr size_t kPage = 4096;
size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// mem_mu held. Forgets gm once nothing can use it any more: no graph or executable graph has its
// allocation node and it is not allocated. Queued operations keep it alive until they have run.
void drop_if_unused_locked(std::shared_ptr<GraphMem> gm) {
  if (gm->owners > 0 || gm->outstanding) return;
  g().ranges.erase(gm->ptr);
  g().graph_mems.erase(gm->ptr);
}

bool contains(const std::vector<std::shared_ptr<GraphMem>>& v, const GraphMem* gm) {
  return std::any_of(v.begin(), v.end(), [&](const auto& p) { return p.get() == gm; });
}

}  // namespace

GraphMem::~GraphMem() {
  munmap(reinterpret_cast<void*>(ptr), map_len);
  if (charged) release_capacity(device, charge);
}

// On the stream worker: an allocation node backs the range with fresh memory, a free drops it
// (a later touch faults, as a use after free does on a GPU).
void graph_mem_back(GraphMem* gm, bool backed) {
  void* p = mmap(reinterpret_cast<void*>(gm->ptr), gm->map_len,
                 backed ? PROT_READ | PROT_WRITE : PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  SC_CHECK(p != MAP_FAILED);
}

CUresult graph_mem_alloc(Stream* s, size_t n, CUdeviceptr* out, bool* captured) {
  *captured = false;
  if (!out || n == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lk(g().capture_mu);
  Capture* cap = s->capture.load(std::memory_order_relaxed);
  if (!cap) return CUDA_SUCCESS;
  *captured = true;
  if (cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  size_t len = round_up(n, kPage);
  void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto gm = std::make_shared<GraphMem>();
  gm->ptr = reinterpret_cast<uintptr_t>(p);
  gm->size = n;
  gm->map_len = len;
  gm->charge = round_up(n, 512);  // the same 512-byte units as linear allocations
  gm->device = s->ctx->device;
  gm->owners = 1;  // the graph being captured
  {
    std::unique_lock ml(g().mem_mu);
    Range r;
    r.size = n;
    r.kind = RangeKind::GraphAlloc;
    r.device = gm->device;
    r.map_len = len;
    g().ranges[gm->ptr] = r;
    g().graph_mems[gm->ptr] = gm;
  }
  cap->graph->allocs.push_back(gm);
  Op op;
  op.kind = OpKind::GraphAlloc;
  op.gmem = gm;
  capture_append_locked(cap, s, std::move(op));
  *out = gm->ptr;
  return CUDA_SUCCESS;
}

CUresult graph_mem_free_async(Stream* s, std::shared_ptr<GraphMem> gm) {
  Op op;
  op.kind = OpKind::GraphFree;
  op.gmem = gm;
  {
    std::lock_guard lk(g().capture_mu);
    if (Capture* cap = s->capture.load(std::memory_order_relaxed)) {
      // A free node: of this graph's own allocation (once), or of another graph's allocation that
      // its own graph does not free.
      if (cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      Graph* graph = cap->graph;
      {
        std::unique_lock ml(g().mem_mu);
        if (contains(graph->allocs, gm.get())) {
          if (gm->freed_in_graph || gm->freed_elsewhere) return CUDA_ERROR_INVALID_VALUE;
          gm->freed_in_graph = true;
        } else {
          if (gm->freed_in_graph || contains(graph->foreign_frees, gm.get()))
            return CUDA_ERROR_INVALID_VALUE;
          gm->freed_elsewhere = true;
          graph->foreign_frees.push_back(gm);
        }
      }
      return capture_append_locked(cap, s, std::move(op));
    }
  }
  {
    std::unique_lock ml(g().mem_mu);
    if (!gm->outstanding) return CUDA_ERROR_INVALID_VALUE;  // not allocated, or already freed
    gm->outstanding = false;
    drop_if_unused_locked(gm);
  }
  return submit(s, std::move(op));
}

CUresult graph_mem_free_now(std::shared_ptr<GraphMem> gm) {
  std::unique_lock ml(g().mem_mu);
  if (!gm->outstanding) return CUDA_ERROR_INVALID_VALUE;
  gm->outstanding = false;
  graph_mem_back(gm.get(), false);
  drop_if_unused_locked(gm);
  return CUDA_SUCCESS;
}

void release_graph(Graph* graph) {
  if (!graph) return;
  {
    std::unique_lock ml(g().mem_mu);
    for (auto& gm : graph->allocs) {
      --gm->owners;
      drop_if_unused_locked(gm);
    }
    for (auto& gm : graph->foreign_frees) gm->freed_elsewhere = false;
  }
  delete graph;
}

}  // namespace simcuda

using namespace simcuda;

static CUresult instantiate(CUgraphExec* out, CUgraph hg, unsigned long long flags) {
  if (CUresult r = check_init()) return r;
  auto* gr = reinterpret_cast<Graph*>(hg);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().graphs, gr)) return CUDA_ERROR_INVALID_HANDLE;
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) &&
      (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH))
    return CUDA_ERROR_INVALID_VALUE;
  auto* ex = new GraphExec;
  {
    // A graph with memory nodes has at most one executable graph at a time.
    std::unique_lock ml(g().mem_mu);
    if (gr->has_memory_nodes() && *gr->execs > 0) {
      delete ex;
      return CUDA_ERROR_INVALID_VALUE;
    }
    ++*gr->execs;
    for (auto& gm : gr->allocs) ++gm->owners;
  }
  ex->ops.reserve(gr->ops.size());
  for (const Op& op : gr->ops) ex->ops.push_back(op.clone());
  ex->allocs = gr->allocs;
  ex->foreign_frees = gr->foreign_frees;
  ex->execs = gr->execs;
  ex->auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
  add_handle(g().execs, ex);
  *out = reinterpret_cast<CUgraphExec>(ex);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph hg,
                                               unsigned long long flags) {
  SC_ENTRY(cuGraphInstantiateWithFlags);
  return instantiate(out, hg, flags);
}
static CUresult graph_instantiate_v1(CUgraphExec* out, CUgraph hg, CUgraphNode* err, char* log,
                                     size_t n) {
  if (log && n) log[0] = 0;
  return instantiate(out, hg, 0);
}
SC_EXPORT CUresult cuGraphInstantiate(CUgraphExec* out, CUgraph hg, CUgraphNode* err, char* log,
                                      size_t n) {
  SC_ENTRY(cuGraphInstantiate);
  return graph_instantiate_v1(out, hg, err, log, n);
}
SC_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* out, CUgraph hg, CUgraphNode* err, char* log,
                                         size_t n) {
  SC_ENTRY(cuGraphInstantiate_v2);
  return graph_instantiate_v1(out, hg, err, log, n);
}

// Checks and books a launch's memory nodes under mem_mu; fills the allocations an auto-free
// launch frees first. Changes nothing when it fails.
static CUresult book_memory_nodes(GraphExec* ex, std::vector<std::shared_ptr<GraphMem>>* frees) {
  std::unique_lock ml(g().mem_mu);
  for (auto& gm : ex->allocs) {
    if (gm->freed_in_graph || !gm->outstanding) continue;
    // An allocation of the previous launch is still live: the launch would allocate it twice.
    if (!ex->auto_free) return CUDA_ERROR_INVALID_VALUE;
    frees->push_back(gm);
  }
  for (auto& gm : ex->foreign_frees)
    if (!gm->outstanding) return CUDA_ERROR_INVALID_VALUE;  // nothing allocated to free
  std::vector<GraphMem*> charged;
  for (auto& gm : ex->allocs) {
    if (gm->charged) continue;
    if (reserve_capacity(gm->device, gm->charge) != CUDA_SUCCESS) {
      for (GraphMem* c : charged) {
        release_capacity(c->device, c->charge);
        c->charged = false;
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    gm->charged = true;
    charged.push_back(gm.get());
  }
  for (auto& gm : ex->allocs) gm->outstanding = !gm->freed_in_graph;
  for (auto& gm : ex->foreign_frees) {
    gm->outstanding = false;
    drop_if_unused_locked(gm);
  }
  return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec he, CUstream h, bool pt) {
  if (CUresult r = check_init()) return r;
  auto* ex = reinterpret_cast<GraphExec*>(he);
  if (!live(g().execs, ex)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  bool memory_nodes = !ex->allocs.empty() || !ex->foreign_frees.empty();
  std::vector<std::shared_ptr<GraphMem>> frees;
  if (memory_nodes) {
    // Capturing it would make it a child graph, which needs its memory nodes moved to the parent.
    if (s->capture.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_SUPPORTED;
    if (CUresult r = legacy_use(s)) return r;
    if (CUresult r = book_memory_nodes(ex, &frees)) return r;
  }
  for (auto& gm : frees) {
    Op op;
    op.kind = OpKind::GraphFree;
    op.gmem = gm;
    if (CUresult r = submit(s, std::move(op))) return r;
  }
  for (const Op& op : ex->ops)
    if (CUresult r = submit(s, op.clone())) return r;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  SC_ENTRY(cuGraphLaunch);
  return graph_launch(e, s, false);
}
SC_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) {
  SC_ENTRY(cuGraphLaunch_ptsz);
  return graph_launch(e, s, true);
}
SC_EXPORT CUresult cuGraphExecDestroy(CUgraphExec he) {
  SC_ENTRY(cuGraphExecDestroy);
  if (CUresult r = check_init()) return r;
  auto* ex = reinterpret_cast<GraphExec*>(he);
  if (!remove_handle(g().execs, ex)) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::unique_lock ml(g().mem_mu);
    --*ex->execs;
    for (auto& gm : ex->allocs) {
      --gm->owners;
      drop_if_unused_locked(gm);
    }
  }
  delete ex;  // launches copied their ops, so nothing in flight refers to it
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuGraphDestroy(CUgraph hg) {
  SC_ENTRY(cuGraphDestroy);
  if (CUresult r = check_init()) return r;
  auto* gr = reinterpret_cast<Graph*>(hg);
  if (!remove_handle(g().graphs, gr)) return CUDA_ERROR_INVALID_HANDLE;
  release_graph(gr);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuGraphGetNodes(CUgraph hg, CUgraphNode* nodes, size_t* n) {
  SC_ENTRY(cuGraphGetNodes);
  if (CUresult r = check_init()) return r;
  auto* gr = reinterpret_cast<Graph*>(hg);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().graphs, gr)) return CUDA_ERROR_INVALID_HANDLE;
  // Node handles are the addresses of the recorded operations (stable while the graph lives).
  if (nodes)
    for (size_t i = 0; i < *n && i < gr->ops.size(); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(&gr->ops[i]);
  *n = gr->ops.size();
  return CUDA_SUCCESS;
}
