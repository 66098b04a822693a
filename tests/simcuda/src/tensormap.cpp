// tensormap.cpp: cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col. The opaque CUtensorMap is
// filled with a simcuda_tensor_map (simcuda.h) after the argument checks the driver documents.
// No shared state.
#include "internal.h"

namespace simcuda {
namespace {

static_assert(sizeof(simcuda_tensor_map) <= sizeof(CUtensorMap),
              "simcuda_tensor_map must fit in a CUtensorMap");

CUresult encode(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* addr,
                const cuuint64_t* dim, const cuuint64_t* strides, cuuint32_t min_rank,
                CUtensorMapInterleave interleave, simcuda_tensor_map* out) {
  if (CUresult r = check_init()) return r;
  if (!map || !addr || !dim || rank < min_rank || rank > 5) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<unsigned>(type) > 15) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (a % (interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16)) return CUDA_ERROR_INVALID_VALUE;
  if (rank > 1 && !strides) return CUDA_ERROR_INVALID_VALUE;
  *out = simcuda_tensor_map{};
  out->magic = SIMCUDA_TENSOR_MAP_MAGIC;
  out->data_type = static_cast<uint32_t>(type);
  out->rank = rank;
  out->global_address = a;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dim[i] == 0 || dim[i] > (1ull << 32)) return CUDA_ERROR_INVALID_VALUE;
    out->global_dim[i] = dim[i];
  }
  for (cuuint32_t i = 0; i + 1 < rank; ++i) {
    if (strides[i] % 16 || strides[i] >= (1ull << 40)) return CUDA_ERROR_INVALID_VALUE;
    out->global_strides[i] = strides[i];
  }
  return CUDA_SUCCESS;
}

void store(CUtensorMap* map, const simcuda_tensor_map& t) {
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &t, sizeof t);
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

SC_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type,
                                          cuuint32_t rank, void* addr, const cuuint64_t* dim,
                                          const cuuint64_t* strides, const cuuint32_t* box,
                                          const cuuint32_t* estrides,
                                          CUtensorMapInterleave interleave,
                                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                          CUtensorMapFloatOOBfill oob) {
  SC_ENTRY(cuTensorMapEncodeTiled);
  simcuda_tensor_map t;
  if (CUresult r = encode(map, type, rank, addr, dim, strides, 1, interleave, &t)) return r;
  if (!box || !estrides) return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (box[i] == 0 || box[i] > 256 || estrides[i] == 0 || estrides[i] > 8)
      return CUDA_ERROR_INVALID_VALUE;
    t.box_dim[i] = box[i];
  }
  store(map, t);
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuTensorMapEncodeIm2col(
    CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* addr, const cuuint64_t* dim,
    const cuuint64_t* strides, const int* lower, const int* upper, cuuint32_t channels,
    cuuint32_t pixels, const cuuint32_t* estrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  SC_ENTRY(cuTensorMapEncodeIm2col);
  simcuda_tensor_map t;
  if (CUresult r = encode(map, type, rank, addr, dim, strides, 3, interleave, &t)) return r;
  if (!lower || !upper || !estrides || channels == 0 || channels > 256 || pixels == 0 ||
      pixels > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  t.im2col = 1;
  t.box_dim[0] = channels;
  t.box_dim[1] = pixels;
  store(map, t);
  return CUDA_SUCCESS;
}
