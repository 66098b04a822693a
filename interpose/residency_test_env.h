// residency_test_env.h: residency over the fake device (device_fake.h), with helpers that act
// as the hooks do (allocate, launch), for residency_test and recompute_test.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <initializer_list>
#include <vector>

#include "interpose/access.h"
#include "interpose/device_fake.h"
#include "interpose/residency.h"

namespace gswap::interpose::testing {

constexpr std::uint64_t kGran = 64 << 10;
constexpr std::uint64_t kMiB = 1 << 20;

struct Env {
  FakeDevice dev{kGran};
  FastState fast;
  LruVictims lru;
  Residency res{dev, fast, lru};
  CUstream stream;

  explicit Env(std::uint64_t budget, bool thread = false, bool keep_copy = false) {
    ResidencySettings s;
    s.recompute_keep_copy = keep_copy;
    s.budget = budget;
    s.physical_total = 1ull << 30;
    s.pinned_cap = 1ull << 30;
    s.staging_bytes = 256 << 10;
    s.swapper_thread = thread;
    res.configure(s);
    stream = dev.user_stream();
  }

  CUdeviceptr alloc(std::uint64_t bytes, CUresult want = CUDA_SUCCESS) {
    CUdeviceptr p = 0;
    bool handled = false;
    EXPECT_EQ(res.alloc_region(&p, bytes, stream, false, false, &handled), want);
    EXPECT_TRUE(handled);
    return p;
  }
  Region* region(CUdeviceptr p) { return fast.map.find(p); }
  std::uint32_t state(CUdeviceptr p) { return region(p)->state.load(); }

  // Writes a pattern derived from seed through the region's mapping (the region must be mapped).
  void fill(CUdeviceptr p, std::uint64_t bytes, std::uint32_t seed) {
    std::vector<std::uint32_t> v(bytes / 4);
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = seed * 2654435761u + static_cast<std::uint32_t>(i);
    ASSERT_TRUE(dev.write(p, v.data(), bytes));
  }
  bool holds(CUdeviceptr p, std::uint64_t bytes, std::uint32_t seed) {
    std::vector<std::uint32_t> v(bytes / 4);
    if (!dev.read(p, v.data(), bytes)) return false;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] != seed * 2654435761u + static_cast<std::uint32_t>(i)) return false;
    return true;
  }

  // What a launch does (access.h): pin, make resident (slow or wait path), mark use, unpin.
  // `while_pinned` runs as the kernel would: with every region pinned and resident.
  CUresult launch(std::initializer_list<CUdeviceptr> ptrs, bool sync = false,
                  const std::function<void()>& while_pinned = nullptr) {
    TouchSet t;
    for (CUdeviceptr p : ptrs) t.add(region(p));
    Pinned pinned = pin_if_mapped(t);
    if (pinned == Pinned::kNo) {
      CUresult e = res.prepare(t, stream, false, sync);
      if (e != CUDA_SUCCESS) return e;
    } else if (pinned == Pinned::kSomeRestoring) {
      CUresult e = res.wait_restores(t, stream, false, sync);
      if (e != CUDA_SUCCESS) {
        unpin(t);
        return e;
      }
    }
    mark_use(t, lru_tick() + (1ull << 20) * ++ticks,
             fast.streams.bit(reinterpret_cast<std::uintptr_t>(stream), false));
    if (while_pinned) while_pinned();
    unpin(t);
    return CUDA_SUCCESS;
  }
  std::atomic<std::uint64_t> ticks{0};
};

}  // namespace gswap::interpose::testing
