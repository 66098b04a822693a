// modules_test.cpp: module loading by path and by image bytes, the CUkernel path, parameter
// info, and that kernelParams and extra launches build identical parameter buffers.
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

namespace {

struct small {
  uint16_t s;
  uint8_t pad[5];
};
struct record_args {  // mirrors test_kernels.c
  uint8_t* out;
  uint32_t a;
  double b;
  small c;
  uint8_t d;
};

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_F(Sim, ExampleModuleByPathRunsAxpy) {
  CUmodule m;
  CK(cuModuleLoad(&m, module_path("example_module").c_str()));
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, "axpy"));
  EXPECT_EQ(cuModuleGetFunction(&f, m, "nope"), CUDA_ERROR_NOT_FOUND);
  const uint64_t n = 1000;
  CUdeviceptr x, y;
  CK(cuMemAlloc(&x, n * 4));
  CK(cuMemAlloc(&y, n * 4));
  std::vector<float> hx(n, 2.0f), hy(n, 1.0f);
  CK(cuMemcpyHtoD(x, hx.data(), n * 4));
  CK(cuMemcpyHtoD(y, hy.data(), n * 4));
  float a = 3.0f;
  uint64_t nn = n;
  void* args[] = {&nn, &a, &x, &y};
  CK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  CK(cuMemcpyDtoH(hy.data(), y, n * 4));
  EXPECT_EQ(hy[0], 7.0f);
  EXPECT_EQ(hy[n - 1], 7.0f);
  CK(cuMemFree(x));
  CK(cuMemFree(y));
  CK(cuModuleUnload(m));
  EXPECT_EQ(cuModuleGetFunction(&f, m, "axpy"), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Sim, ModuleFromImageBytesAndPathPrefix) {
  std::vector<char> image = read_file(module_path("test_kernels"));
  ASSERT_GT(image.size(), 64u);
  CUmodule m1, m2;
  CK(cuModuleLoadData(&m1, image.data()));
  CUfunction f;
  CK(cuModuleGetFunction(&f, m1, "record"));
  std::string prefixed = std::string(SIMCUDA_IMAGE_PATH_PREFIX) + module_path("test_kernels");
  CK(cuModuleLoadData(&m2, prefixed.c_str()));
  CK(cuModuleGetFunction(&f, m2, "touch"));
  const char junk[64] = "not a module";
  CUmodule m3;
  EXPECT_EQ(cuModuleLoadData(&m3, junk), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(cuModuleLoad(&m3, "/nonexistent/simcuda/module.so"), CUDA_ERROR_FILE_NOT_FOUND);
  CK(cuModuleUnload(m1));
  CK(cuModuleUnload(m2));
}

TEST_F(Sim, ParamInfoAndNames) {
  CUmodule m;
  CK(cuModuleLoad(&m, module_path("test_kernels").c_str()));
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, "record"));
  size_t off = 0, size = 0;
  const size_t want_off[] = {offsetof(record_args, out), offsetof(record_args, a),
                             offsetof(record_args, b), offsetof(record_args, c),
                             offsetof(record_args, d)};
  const size_t want_size[] = {8, 4, 8, sizeof(small), 1};
  for (size_t i = 0; i < 5; ++i) {
    CK(cuFuncGetParamInfo(f, i, &off, &size));
    EXPECT_EQ(off, want_off[i]) << i;
    EXPECT_EQ(size, want_size[i]) << i;
  }
  EXPECT_EQ(cuFuncGetParamInfo(f, 5, &off, &size), CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  CK(cuFuncGetName(&name, f));
  EXPECT_STREQ(name, "record");
  int v = 0;
  CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  EXPECT_GT(v, 0);
  CK(cuModuleUnload(m));
}

TEST_F(Sim, KernelParamsAndExtraGiveIdenticalBuffers) {
  CUmodule m;
  CK(cuModuleLoad(&m, module_path("test_kernels").c_str()));
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, "record"));
  CUdeviceptr out1, out2;
  CK(cuMemAlloc(&out1, 256));
  CK(cuMemAlloc(&out2, 256));
  CK(cuMemsetD8(out1, 0xee, 256));
  CK(cuMemsetD8(out2, 0xee, 256));

  record_args args{};
  args.out = reinterpret_cast<uint8_t*>(out1);
  args.a = 0xa1a2a3a4;
  args.b = 3.25;
  args.c.s = 0x1234;
  std::memset(args.c.pad, 0x77, sizeof args.c.pad);
  args.d = 0x5d;
  void* kp[] = {&args.out, &args.a, &args.b, &args.c, &args.d};
  CK(cuLaunchKernel(f, 2, 3, 4, 5, 6, 7, 0, nullptr, kp, nullptr));

  record_args packed{};  // zeroed padding, as the driver's packing leaves it
  std::memset(&packed, 0, sizeof packed);
  packed = args;
  std::vector<uint8_t> buf(sizeof(record_args), 0);
  std::memcpy(buf.data() + offsetof(record_args, out), &out2, 8);
  std::memcpy(buf.data() + offsetof(record_args, a), &args.a, 4);
  std::memcpy(buf.data() + offsetof(record_args, b), &args.b, 8);
  std::memcpy(buf.data() + offsetof(record_args, c), &args.c, sizeof(small));
  std::memcpy(buf.data() + offsetof(record_args, d), &args.d, 1);
  size_t bsize = offsetof(record_args, d) + 1;  // the packed size: last offset + size
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize,
                   CU_LAUNCH_PARAM_END};
  CUlaunchConfig cfg{};
  cfg.gridDimX = 2;
  cfg.gridDimY = 3;
  cfg.gridDimZ = 4;
  cfg.blockDimX = 5;
  cfg.blockDimY = 6;
  cfg.blockDimZ = 7;
  CK(cuLaunchKernelEx(&cfg, f, nullptr, extra));
  CK(cuCtxSynchronize());

  std::vector<uint8_t> r1(256), r2(256);
  CK(cuMemcpyDtoH(r1.data(), out1, 256));
  CK(cuMemcpyDtoH(r2.data(), out2, 256));
  // The first 8 bytes are the (different) out pointers; everything after must match.
  EXPECT_EQ(std::memcmp(r1.data() + 8, r2.data() + 8, bsize - 8), 0);
  EXPECT_EQ(std::memcmp(r1.data() + 128, r2.data() + 128, 24), 0);  // grid and block
  uint32_t grid_y;
  std::memcpy(&grid_y, r1.data() + 132, 4);
  EXPECT_EQ(grid_y, 3u);
  EXPECT_EQ(r1[bsize], 0xee);  // nothing beyond the parameter buffer was written

  // Parameters are copied at launch: changing the caller's storage afterwards has no effect.
  CK(cuMemsetD8(out1, 0, 256));
  args.a = 1;
  void* kp2[] = {&args.out, &args.a, &args.b, &args.c, &args.d};
  CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, kp2, nullptr));
  args.a = 2;
  CK(cuCtxSynchronize());
  uint32_t a_seen = 0;
  CK(cuMemcpyDtoH(&a_seen, out1 + offsetof(record_args, a), 4));
  EXPECT_EQ(a_seen, 1u);

  size_t short_size = 4;
  void* bad_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                       &short_size, CU_LAUNCH_PARAM_END};
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, bad_extra),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, nullptr, kp, nullptr), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemFree(out1));
  CK(cuMemFree(out2));
  CK(cuModuleUnload(m));
}

TEST_F(Sim, LibraryKernelsLaunchAsFunctions) {
  CUlibrary lib;
  CK(cuLibraryLoadFromFile(&lib, module_path("example_module").c_str(), nullptr, nullptr, 0,
                           nullptr, nullptr, 0));
  CUkernel k;
  CK(cuLibraryGetKernel(&k, lib, "axpy"));
  size_t off = 0, size = 0;
  CK(cuKernelGetParamInfo(k, 1, &off, &size));
  EXPECT_EQ(off, 8u);
  EXPECT_EQ(size, 4u);
  CUfunction f;
  CK(cuKernelGetFunction(&f, k));
  CUdeviceptr x, y;
  CK(cuMemAlloc(&x, 4));
  CK(cuMemAlloc(&y, 4));
  float one = 1.0f, a = 2.0f;
  CK(cuMemcpyHtoD(x, &one, 4));
  CK(cuMemcpyHtoD(y, &one, 4));
  uint64_t n = 1;
  void* args[] = {&n, &a, &x, &y};
  // A CUkernel cast to CUfunction is accepted by launches, as real drivers allow.
  CK(cuLaunchKernel(reinterpret_cast<CUfunction>(k), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  float got = 0;
  CK(cuMemcpyDtoH(&got, y, 4));
  EXPECT_EQ(got, 3.0f);
  CK(cuMemFree(x));
  CK(cuMemFree(y));
  CK(cuLibraryUnload(lib));
}

TEST_F(Sim, TensorMapEncodeRecordsTheTensor) {
  CUdeviceptr d;
  CK(cuMemAlloc(&d, 1 << 20));
  CUtensorMap map;
  cuuint64_t dim[2] = {256, 64};
  cuuint64_t strides[1] = {256 * 4};
  cuuint32_t box[2] = {32, 8};
  cuuint32_t es[2] = {1, 1};
  CK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(d),
                            dim, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  simcuda_tensor_map t;
  std::memcpy(&t, &map, sizeof t);
  EXPECT_EQ(t.magic, SIMCUDA_TENSOR_MAP_MAGIC);
  EXPECT_EQ(t.global_address, d);
  EXPECT_EQ(t.rank, 2u);
  EXPECT_EQ(t.global_dim[1], 64u);
  EXPECT_EQ(t.global_strides[0], 1024u);
  EXPECT_EQ(t.box_dim[0], 32u);
  cuuint64_t bad_strides[1] = {1000};  // not a multiple of 16
  EXPECT_EQ(cuTensorMapEncodeTiled(
                &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(d), dim,
                bad_strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
  CK(cuMemFree(d));
}
