// gpu_micro: the micro-measurements gswap's design depends on, taken on the real driver.
//
// The policy's cost model (swap time = bytes / measured bandwidth), the handle pool and the helper
// thread that unmaps all rest on figures that only a GPU can give (design brief, facts 6 and 12):
//   vmm        cost of cuMemCreate, cuMemMap+cuMemSetAccess, cuMemUnmap+cuMemRelease, 2 and 64 MiB
//   unmap      whether cuMemUnmap/cuMemRelease of an unrelated range blocks while a kernel runs
//   pinned     whether cuMemAllocHost/cuMemFreeHost (and cuMemHostRegister/Unregister) wait for
//              a kernel running on another stream,
//              and whether another thread's driver call waits meanwhile (gswap's pinned pool and
//              its start-up link calibration free pinned memory while the application runs)
//   bandwidth  pinned copy bandwidth H2D, D2H, and both directions at once
//   launch     host time per cuLaunchKernel with 8 pointer parameters and N live allocations; run
//              the same binary with and without LD_PRELOAD=libgswap.so, the difference is the
//              library's added cost per launch
// It prints a markdown table, and one `RESULT <key> <value>` line per figure for scripts. It
// asserts nothing: these are measurements, and validate.sh compares them with the targets.
//
// Usage: gpu_micro [--only vmm,unmap,pinned,bandwidth,launch] [--reps 50] [--bw-bytes 1GiB]
//                  [--live 10000] [--live-size 2MiB] [--launches 100000] [--spin-ms 500]
#include <thread>
#include <vector>

#include "gpu_check.h"
#include "gpu_kernels.cuh"

using namespace gswap::gpu_test;

namespace {

struct Row {
  std::string what, value;
};
std::vector<Row> g_rows;

void result(const std::string& key, double v, const std::string& what, const char* unit) {
  std::printf("RESULT %s %.3f\n", key.c_str(), v);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, unit);
  g_rows.push_back({what, buf});
  std::fflush(stdout);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

CUmemAccessDesc rw(CUdevice dev) {
  CUmemAccessDesc acc{};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return acc;
}

void measure_vmm(CUdevice dev, int reps) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemAccessDesc acc = rw(dev);
  for (std::uint64_t size : {2ull << 20, 64ull << 20}) {
    CUdeviceptr va = 0;
    GT_CU(cuMemAddressReserve(&va, size, 0, 0, 0));
    std::vector<double> create, map, unmap;
    for (int r = 0; r < reps + 2; ++r) {  // the first two warm the driver up and are dropped
      CUmemGenericAllocationHandle h;
      double t0 = now_us();
      GT_CU(cuMemCreate(&h, size, &prop, 0));
      double t1 = now_us();
      GT_CU(cuMemMap(va, size, 0, h, 0));
      GT_CU(cuMemSetAccess(va, size, &acc, 1));
      double t2 = now_us();
      GT_CU(cuMemUnmap(va, size));
      GT_CU(cuMemRelease(h));
      double t3 = now_us();
      if (r < 2) continue;
      create.push_back(t1 - t0);
      map.push_back(t2 - t1);
      unmap.push_back(t3 - t2);
    }
    GT_CU(cuMemAddressFree(va, size));
    std::string sz = size == (2ull << 20) ? "2MiB" : "64MiB";
    struct {
      const char* key;
      const char* what;
      std::vector<double>* v;
    } ops[] = {{"create", "cuMemCreate", &create},
               {"map", "cuMemMap+cuMemSetAccess", &map},
               {"unmap", "cuMemUnmap+cuMemRelease", &unmap}};
    for (auto& op : ops) {
      result("vmm_" + std::string(op.key) + "_" + sz + "_median_us", percentile(*op.v, 0.5),
             std::string(op.what) + " " + sz + " median", "us");
      result("vmm_" + std::string(op.key) + "_" + sz + "_p90_us", percentile(*op.v, 0.9),
             std::string(op.what) + " " + sz + " p90", "us");
    }
  }
}

// Times unmap+release of a range no kernel uses, once idle and once while a spin kernel runs on
// another stream. If the call waits for the kernel, its time approaches the kernel's remaining
// time.
void measure_unmap_blocking(CUdevice dev, std::uint64_t spin_ms) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemAccessDesc acc = rw(dev);
  const std::uint64_t size = 64ull << 20;
  CUdeviceptr va = 0;
  GT_CU(cuMemAddressReserve(&va, size, 0, 0, 0));
  CUstream s;
  GT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  auto cycle = [&](bool busy, double* map_us, double* unmap_us, bool* running_after) {
    CUmemGenericAllocationHandle h;
    GT_CU(cuMemCreate(&h, size, &prop, 0));
    if (busy) {
      spin<<<1, 1, 0, s>>>(spin_ms * 1000000ull);
      GT_RT(cudaGetLastError());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it start
    }
    double t0 = now_us();
    GT_CU(cuMemMap(va, size, 0, h, 0));
    GT_CU(cuMemSetAccess(va, size, &acc, 1));
    double t1 = now_us();
    GT_CU(cuMemUnmap(va, size));
    GT_CU(cuMemRelease(h));
    double t2 = now_us();
    *running_after = cuStreamQuery(s) == CUDA_ERROR_NOT_READY;
    *map_us = t1 - t0;
    *unmap_us = t2 - t1;
    GT_CU(cuStreamSynchronize(s));
  };
  double idle_map = 0, idle_unmap = 0, busy_map = 0, busy_unmap = 0;
  bool running = false;
  cycle(false, &idle_map, &idle_unmap, &running);  // warm-up
  cycle(false, &idle_map, &idle_unmap, &running);
  cycle(true, &busy_map, &busy_unmap, &running);
  result("unmap_idle_us", idle_unmap, "cuMemUnmap+cuMemRelease 64MiB, GPU idle", "us");
  result("unmap_busy_us", busy_unmap,
         "cuMemUnmap+cuMemRelease 64MiB, kernel running on another stream", "us");
  result("map_idle_us", idle_map, "cuMemMap+cuMemSetAccess 64MiB, GPU idle", "us");
  result("map_busy_us", busy_map, "cuMemMap+cuMemSetAccess 64MiB, kernel running", "us");
  // Blocks: the kernel had ended by the time the calls returned, and they took a large part of
  // its run time. Otherwise the calls finished while the kernel still ran.
  const bool blocks = !running && busy_map + busy_unmap > 0.5 * static_cast<double>(spin_ms) * 1000;
  result("unmap_blocks_while_kernel_runs", blocks ? 1 : 0,
         "map/unmap waits for a running kernel (1 yes, 0 no)", "");
  GT_CU(cuMemAddressFree(va, size));
  GT_CU(cuStreamDestroy(s));
}

// Times cuMemAllocHost and cuMemFreeHost of 64 MiB while a spin kernel runs on another stream, and
// meanwhile, on a second thread, a cuMemsetD32Async on a third stream. A call that waits for the
// kernel takes about its remaining run time, and the kernel has ended when it returns.
void measure_pinned_blocking(std::uint64_t spin_ms) {
  const std::uint64_t size = 64ull << 20;
  CUstream s, other;
  GT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  GT_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUdeviceptr word = 0;
  GT_CU(cuMemAlloc(&word, 4));
  CUcontext ctx = nullptr;
  GT_CU(cuCtxGetCurrent(&ctx));
  auto busy = [&] {
    spin<<<1, 1, 0, s>>>(spin_ms * 1000000ull);
    GT_RT(cudaGetLastError());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it start
  };
  void* warm = nullptr;  // the first pinned allocation of a process pays one-time costs
  GT_CU(cuMemAllocHost(&warm, size));
  GT_CU(cuMemFreeHost(warm));

  busy();
  void* p = nullptr;
  double t0 = now_us();
  GT_CU(cuMemAllocHost(&p, size));
  double alloc_us = now_us() - t0;
  const bool alloc_waited = cuStreamQuery(s) != CUDA_ERROR_NOT_READY;
  GT_CU(cuStreamSynchronize(s));

  busy();
  double other_us = 0;
  std::thread t([&] {
    GT_CU(cuCtxSetCurrent(ctx));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // after the free has begun
    double t1 = now_us();
    GT_CU(cuMemsetD32Async(word, 0, 1, other));
    other_us = now_us() - t1;
  });
  t0 = now_us();
  GT_CU(cuMemFreeHost(p));
  double free_us = now_us() - t0;
  const bool free_waited = cuStreamQuery(s) != CUDA_ERROR_NOT_READY;
  t.join();
  GT_CU(cuStreamSynchronize(s));
  GT_CU(cuStreamSynchronize(other));

  result("host_alloc_busy_us", alloc_us, "cuMemAllocHost 64MiB, kernel running on another stream",
         "us");
  result("host_alloc_waits", alloc_waited ? 1 : 0,
         "cuMemAllocHost waits for a running kernel (1 yes, 0 no)", "");
  result("host_free_busy_us", free_us, "cuMemFreeHost 64MiB, kernel running on another stream",
         "us");
  result("host_free_waits", free_waited ? 1 : 0,
         "cuMemFreeHost waits for a running kernel (1 yes, 0 no)", "");
  result("host_free_other_thread_us", other_us,
         "another thread's cuMemsetD32Async during that cuMemFreeHost", "us");

  // The other way to pin: cuMemHostRegister on ordinary memory, cuMemHostUnregister to let go.
  std::vector<char> plain(size, 1);
  busy();
  t0 = now_us();
  GT_CU(cuMemHostRegister(plain.data(), size, 0));
  const double reg_us = now_us() - t0;
  const bool reg_waited = cuStreamQuery(s) != CUDA_ERROR_NOT_READY;
  GT_CU(cuStreamSynchronize(s));
  busy();
  t0 = now_us();
  GT_CU(cuMemHostUnregister(plain.data()));
  const double unreg_us = now_us() - t0;
  const bool unreg_waited = cuStreamQuery(s) != CUDA_ERROR_NOT_READY;
  GT_CU(cuStreamSynchronize(s));
  result("host_register_busy_us", reg_us,
         "cuMemHostRegister 64MiB, kernel running on another stream", "us");
  result("host_register_waits", reg_waited ? 1 : 0,
         "cuMemHostRegister waits for a running kernel (1 yes, 0 no)", "");
  result("host_unregister_busy_us", unreg_us,
         "cuMemHostUnregister 64MiB, kernel running on another stream", "us");
  result("host_unregister_waits", unreg_waited ? 1 : 0,
         "cuMemHostUnregister waits for a running kernel (1 yes, 0 no)", "");
  GT_CU(cuMemFree(word));
  GT_CU(cuStreamDestroy(s));
  GT_CU(cuStreamDestroy(other));
}

void measure_bandwidth(std::uint64_t bytes, int reps) {
  void *h_src = nullptr, *h_dst = nullptr;
  GT_CU(cuMemAllocHost(&h_src, bytes));
  GT_CU(cuMemAllocHost(&h_dst, bytes));
  std::memset(h_src, 1, bytes);
  CUdeviceptr d_a = 0, d_b = 0;
  GT_CU(cuMemAlloc(&d_a, bytes));
  GT_CU(cuMemAlloc(&d_b, bytes));
  CUstream s1, s2;
  GT_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  GT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent e0, e1, e2;
  GT_CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  GT_CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  GT_CU(cuEventCreate(&e2, CU_EVENT_DEFAULT));
  const double gb = static_cast<double>(bytes) / 1e9;
  std::vector<double> h2d, d2h, both_h2d, both_d2h;
  for (int r = 0; r < reps + 1; ++r) {
    float ms = 0;
    GT_CU(cuEventRecord(e0, s1));
    GT_CU(cuMemcpyHtoDAsync(d_a, h_src, bytes, s1));
    GT_CU(cuEventRecord(e1, s1));
    GT_CU(cuEventSynchronize(e1));
    GT_CU(cuEventElapsedTime(&ms, e0, e1));
    if (r) h2d.push_back(gb / (ms / 1e3));
    GT_CU(cuEventRecord(e0, s1));
    GT_CU(cuMemcpyDtoHAsync(h_dst, d_a, bytes, s1));
    GT_CU(cuEventRecord(e1, s1));
    GT_CU(cuEventSynchronize(e1));
    GT_CU(cuEventElapsedTime(&ms, e0, e1));
    if (r) d2h.push_back(gb / (ms / 1e3));
    // Both at once: s2 starts when s1 does; each direction is timed from the common start.
    GT_CU(cuEventRecord(e0, s1));
    GT_CU(cuStreamWaitEvent(s2, e0, 0));
    GT_CU(cuMemcpyHtoDAsync(d_a, h_src, bytes, s1));
    GT_CU(cuMemcpyDtoHAsync(h_dst, d_b, bytes, s2));
    GT_CU(cuEventRecord(e1, s1));
    GT_CU(cuEventRecord(e2, s2));
    GT_CU(cuEventSynchronize(e1));
    GT_CU(cuEventSynchronize(e2));
    float ms_h = 0, ms_d = 0;
    GT_CU(cuEventElapsedTime(&ms_h, e0, e1));
    GT_CU(cuEventElapsedTime(&ms_d, e0, e2));
    if (r) {
      both_h2d.push_back(gb / (ms_h / 1e3));
      both_d2h.push_back(gb / (ms_d / 1e3));
    }
  }
  result("bw_h2d_GBps", percentile(h2d, 0.5), "pinned H2D bandwidth (median)", "GB/s");
  result("bw_d2h_GBps", percentile(d2h, 0.5), "pinned D2H bandwidth (median)", "GB/s");
  result("bw_both_h2d_GBps", percentile(both_h2d, 0.5), "pinned H2D while D2H runs", "GB/s");
  result("bw_both_d2h_GBps", percentile(both_d2h, 0.5), "pinned D2H while H2D runs", "GB/s");
  result("bw_both_sum_GBps", percentile(both_h2d, 0.5) + percentile(both_d2h, 0.5),
         "pinned both directions, sum", "GB/s");
  GT_CU(cuMemFree(d_a));
  GT_CU(cuMemFree(d_b));
  GT_CU(cuMemFreeHost(h_src));
  GT_CU(cuMemFreeHost(h_dst));
  GT_CU(cuStreamDestroy(s1));
  GT_CU(cuStreamDestroy(s2));
}

void measure_launch(std::uint64_t live, std::uint64_t live_size, std::uint64_t launches) {
  std::vector<CUdeviceptr> p(live);
  for (CUdeviceptr& q : p) GT_CU(cuMemAlloc(&q, live_size));
  CUfunction f;
  GT_RT(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&f),
                            reinterpret_cast<const void*>(&empty8)));
  CUstream s;
  GT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Eight parameters spread over the live set, so the library's interval map is searched across
  // its whole range, and an interior pointer among them.
  CUdeviceptr args[8];
  for (int i = 0; i < 8; ++i) args[i] = p[(i * live) / 8 + live / 16] + (i == 3 ? 4096 : 0);
  void* params[8];
  for (int i = 0; i < 8; ++i) params[i] = &args[i];
  const std::uint64_t batch = 1000;  // fewer than the launch queue holds, so no call waits for it
  std::vector<double> per_launch;
  for (std::uint64_t done = 0; done < launches + batch; done += batch) {
    double t0 = now_us();
    for (std::uint64_t i = 0; i < batch; ++i)
      GT_CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr));
    double t1 = now_us();
    GT_CU(cuStreamSynchronize(s));
    if (done) per_launch.push_back((t1 - t0) * 1000.0 / static_cast<double>(batch));
  }
  const char* mode = under_gswap() ? "with libgswap" : "bare driver";
  result("launch_ns_median", percentile(per_launch, 0.5),
         std::string("cuLaunchKernel host time, 8 pointers, ") + std::to_string(live) +
             " live allocations, " + mode + " (median of batches)",
         "ns");
  result("launch_ns_p90", percentile(per_launch, 0.9),
         std::string("cuLaunchKernel host time, ") + mode + " (p90 of batches)", "ns");
  for (CUdeviceptr q : p) GT_CU(cuMemFree(q));
  GT_CU(cuStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argc, argv);
  maybe_print_physical_total(args);
  CUdevice dev = init_primary_context();
  const std::string only = "," + args.str("--only", "vmm,unmap,pinned,bandwidth,launch") + ",";
  auto want = [&](const char* s) {
    return only.find("," + std::string(s) + ",") != std::string::npos;
  };
  char name[256] = {};
  GT_CU(cuDeviceGetName(name, sizeof name, dev));
  int drv = 0;
  GT_CU(cuDriverGetVersion(&drv));
  std::printf("gpu_micro: %s, driver API %d, under gswap: %s\n", name, drv,
              under_gswap() ? "yes" : "no");
  const int reps = static_cast<int>(args.u64("--reps", 50));
  if (want("vmm")) measure_vmm(dev, reps);
  if (want("unmap")) measure_unmap_blocking(dev, args.u64("--spin-ms", 500));
  if (want("pinned")) measure_pinned_blocking(args.u64("--spin-ms", 500));
  if (want("bandwidth")) measure_bandwidth(args.u64("--bw-bytes", 1ull << 30), 5);
  if (want("launch"))
    measure_launch(args.u64("--live", 10000), args.u64("--live-size", 2ull << 20),
                   args.u64("--launches", 100000));
  std::printf("\n| Measurement | Value |\n|---|---|\n");
  for (const Row& r : g_rows) std::printf("| %s | %s |\n", r.what.c_str(), r.value.c_str());
  return 0;
}
