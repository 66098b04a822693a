// hooks_graph.cpp: accesses gswap cannot see per launch (fact 4 and 8): graph replays, stream
// capture and TMA descriptors. What they touch stays resident.
#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/residency.h"

namespace gswap::interpose {

CUresult hook_cuGraphLaunch(CUgraphExec g, CUstream s) {
  // A replay bypasses the launch hooks: everything live may be referenced by the graph.
  CUresult e = keep_all_resident("cuGraphLaunch");
  if (e != CUDA_SUCCESS) return e;
  return real().cuGraphLaunch(g, s);
}
CUresult hook_cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) {
  CUresult e = keep_all_resident("cuGraphLaunch");
  if (e != CUDA_SUCCESS) return e;
  return real().cuGraphLaunch_ptsz(g, s);
}

CUresult hook_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  CUresult e = real().cuStreamBeginCapture_v2(s, mode);
  if (e == CUDA_SUCCESS) capture_begin(s, mode);
  return e;
}
CUresult hook_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  CUresult e = real().cuStreamBeginCapture_v2_ptsz(s, mode);
  if (e == CUDA_SUCCESS) capture_begin(s, mode);
  return e;
}
CUresult hook_cuStreamEndCapture(CUstream s, CUgraph* g) {
  CUresult e = real().cuStreamEndCapture(s, g);
  capture_end(s);
  return e;
}
CUresult hook_cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  CUresult e = real().cuStreamEndCapture_ptsz(s, g);
  capture_end(s);
  return e;
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
