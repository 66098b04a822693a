// graphs_test.cpp: graph memory nodes, made by stream-ordered allocation during capture. The
// allocation is valid while a replay runs and keeps its address across replays; a free inside the
// graph (or in another graph, or by cuMemFreeAsync/cuMemFree) ends it; an allocation left live
// blocks a relaunch unless the graph frees on launch; a graph with memory nodes has one executable
// graph at a time; and the memory goes back once nothing can use the allocation any more.
#include <vector>

#include "sc_test.h"

namespace {

size_t free_bytes() {
  size_t f = 0, t = 0;
  EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
  return f;
}

uint32_t word_at(CUdeviceptr p) {
  uint32_t v = 0;
  EXPECT_EQ(cuMemcpyDtoH(&v, p, 4), CUDA_SUCCESS);
  return v;
}

class GraphMemory : public Sim {
 protected:
  void SetUp() override {
    Sim::SetUp();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&out, kBytes));
    base = free_bytes();
  }
  void TearDown() override {
    // A failed test may leave a capture open; end it so that the next test starts clean.
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph graph = nullptr;
    if (cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE &&
        cuStreamEndCapture(s, &graph) == CUDA_SUCCESS)
      cuGraphDestroy(graph);
    cuStreamDestroy(s);
    cuMemFree(out);
    Sim::TearDown();
  }
  // Captures: p = cuMemAllocAsync; p[] = value; out[] = p[]; and, when free_inside, free p.
  CUgraph capture_fill(uint32_t value, bool free_inside, CUdeviceptr* p) {
    EXPECT_EQ(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAllocAsync(p, kBytes, s), CUDA_SUCCESS);
    EXPECT_EQ(cuMemsetD32Async(*p, value, kBytes / 4, s), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyDtoDAsync(out, *p, kBytes, s), CUDA_SUCCESS);
    if (free_inside) {
      EXPECT_EQ(cuMemFreeAsync(*p, s), CUDA_SUCCESS);
    }
    CUgraph graph = nullptr;
    EXPECT_EQ(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
    return graph;
  }
  static constexpr size_t kBytes = 1 << 20;
  CUstream s = nullptr;
  CUdeviceptr out = 0;
  size_t base = 0;
};

}  // namespace

TEST_F(GraphMemory, AllocationFreedInsideTheGraphIsValidDuringEachReplay) {
  CUdeviceptr p = 0;
  CUgraph graph = capture_fill(7, true, &p);
  ASSERT_NE(p, 0u);
  // The address is known at capture, as device memory, but nothing is allocated yet.
  unsigned type = 0;
  CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  EXPECT_EQ(type, static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(free_bytes(), base);
  CUgraphExec exec;
  CK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  for (uint32_t round = 0; round < 3; ++round) {
    CK(cuMemsetD32(out, 0, kBytes / 4));
    CK(cuGraphLaunch(exec, s));
    CK(cuStreamSynchronize(s));
    EXPECT_EQ(word_at(out + kBytes - 4), 7u);
    // The graph's memory stays reserved for it between replays, once, not per replay.
    EXPECT_EQ(free_bytes(), base - kBytes);
  }
  // Freed inside the graph: it cannot be freed again outside.
  EXPECT_EQ(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
  CK(cuGraphExecDestroy(exec));
  EXPECT_EQ(free_bytes(), base - kBytes);  // the graph still holds its allocation node
  CK(cuGraphDestroy(graph));
  EXPECT_EQ(free_bytes(), base);
}

TEST_F(GraphMemory, LiveAllocationOutlivesTheLaunchAndBlocksARelaunch) {
  CUdeviceptr p = 0;
  CUgraph graph = capture_fill(9, false, &p);
  CUgraphExec exec;
  CK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  EXPECT_EQ(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);  // not allocated before a launch
  CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(word_at(p), 9u);  // usable by work ordered after the launch
  EXPECT_EQ(cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemFreeAsync(p, s));
  EXPECT_EQ(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
  CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemFree(p));  // the synchronous free works too
  EXPECT_EQ(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
  // Destroying the graph and its executable graph does not free a live allocation.
  CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(graph));
  EXPECT_EQ(word_at(p), 9u);
  EXPECT_EQ(free_bytes(), base - kBytes);
  CK(cuMemFreeAsync(p, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(free_bytes(), base);
  unsigned type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
            CUDA_ERROR_INVALID_VALUE);  // gone
}

TEST_F(GraphMemory, AutoFreeOnLaunchFreesTheLastLaunchsAllocation) {
  CUdeviceptr p = 0;
  CUgraph graph = capture_fill(3, false, &p);
  CUgraphExec exec;
  CK(cuGraphInstantiateWithFlags(&exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  for (int i = 0; i < 3; ++i) CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(word_at(p), 3u);
  EXPECT_EQ(free_bytes(), base - kBytes);
  CK(cuMemFree(p));
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(graph));
  EXPECT_EQ(free_bytes(), base);
}

TEST_F(GraphMemory, OneExecutableGraphAtATime) {
  CUdeviceptr p = 0;
  CUgraph graph = capture_fill(1, true, &p);
  CUgraphExec a, b;
  CK(cuGraphInstantiateWithFlags(&a, graph, 0));
  EXPECT_EQ(cuGraphInstantiateWithFlags(&b, graph, 0), CUDA_ERROR_INVALID_VALUE);
  CK(cuGraphExecDestroy(a));
  CK(cuGraphInstantiateWithFlags(&b, graph, 0));
  CK(cuGraphExecDestroy(b));
  CK(cuGraphDestroy(graph));
}

// Another graph may free an allocation its own graph leaves live; launching it frees it.
TEST_F(GraphMemory, FreeNodeInAnotherGraph) {
  CUdeviceptr p = 0;
  CUgraph alloc = capture_fill(5, false, &p);
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuMemFreeAsync(p, s));
  EXPECT_EQ(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);  // once per graph
  CUgraph release;
  CK(cuStreamEndCapture(s, &release));
  CUgraphExec ea, er;
  CK(cuGraphInstantiateWithFlags(&ea, alloc, 0));
  CK(cuGraphInstantiateWithFlags(&er, release, 0));
  EXPECT_EQ(cuGraphLaunch(er, s), CUDA_ERROR_INVALID_VALUE);  // nothing allocated yet
  for (int i = 0; i < 2; ++i) {
    CK(cuGraphLaunch(ea, s));
    CK(cuGraphLaunch(er, s));
  }
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(word_at(out), 5u);
  EXPECT_EQ(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);  // freed by the other graph
  for (CUgraphExec e : {ea, er}) CK(cuGraphExecDestroy(e));
  for (CUgraph gr : {alloc, release}) CK(cuGraphDestroy(gr));
  EXPECT_EQ(free_bytes(), base);
}

TEST_F(GraphMemory, CaptureRefusesAFreeOfMemoryNoGraphAllocated) {
  CUdeviceptr plain;
  CK(cuMemAlloc(&plain, 4096));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(cuMemFreeAsync(plain, s), CUDA_ERROR_INVALID_VALUE);
  CUgraph graph;
  CK(cuStreamEndCapture(s, &graph));  // an argument error does not invalidate the capture
  CK(cuGraphDestroy(graph));
  CK(cuMemFree(plain));  // and the allocation is untouched
}

TEST_F(GraphMemory, DiscardedCaptureReleasesItsAllocations) {
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p;
  CK(cuMemAllocAsync(&p, kBytes, s));
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // invalidates it
  CUgraph graph;
  EXPECT_EQ(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  unsigned type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(free_bytes(), base);
}

// After the free node runs, the memory is gone: touching it faults, as on a GPU.
TEST_F(GraphMemory, TouchingAnAllocationAfterItsFreeFaults) {
  load_kernels();
  CUfunction touch;
  CK(cuModuleGetFunction(&touch, mod, "touch"));
  CUdeviceptr p = 0;
  CUgraph graph = capture_fill(2, true, &p);
  CUgraphExec exec;
  CK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child needs its stream workers
  EXPECT_DEATH(
      {
        void* args[] = {&p};
        cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
        cuStreamSynchronize(s);
      },
      "");
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(graph));
}
