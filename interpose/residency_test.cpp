// residency_test.cpp: residency's state machine, accounting, out-of-memory and failure handling,
// over the fake device (device_fake.h), with the swapper driven by hand (no thread) unless a test
// says otherwise.
#include "interpose/residency.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "interpose/residency_test_env.h"

namespace gswap::interpose {
namespace {

using testing::Env;
using testing::kGran;
using testing::kMiB;

TEST(RegionState, TransitionTable) {
  EXPECT_TRUE(region_transition_allowed(kRegionFree, kRegionResident));
  EXPECT_TRUE(region_transition_allowed(kRegionResident, kRegionEvicting));
  EXPECT_TRUE(region_transition_allowed(kRegionEvicting, kRegionHost));
  EXPECT_TRUE(region_transition_allowed(kRegionEvicting, kRegionResident));
  EXPECT_TRUE(region_transition_allowed(kRegionHost, kRegionRestoring));
  EXPECT_TRUE(region_transition_allowed(kRegionRestoring, kRegionResident));
  EXPECT_TRUE(region_transition_allowed(kRegionRestoring, kRegionEvicting));
  EXPECT_TRUE(region_transition_allowed(kRegionResident, kRegionDropped));
  EXPECT_TRUE(region_transition_allowed(kRegionDropped, kRegionRestoring));
  for (std::uint32_t s = kRegionResident; s <= kRegionDropped; ++s)
    EXPECT_TRUE(region_transition_allowed(s, kRegionFree)) << region_state_name(s);
  EXPECT_FALSE(region_transition_allowed(kRegionFree, kRegionFree));
  EXPECT_FALSE(region_transition_allowed(kRegionResident, kRegionHost));  // no copy, no host
  EXPECT_FALSE(region_transition_allowed(kRegionHost, kRegionEvicting));
  EXPECT_FALSE(region_transition_allowed(kRegionFree, kRegionHost));
  EXPECT_FALSE(region_transition_allowed(kRegionDropped, kRegionResident));
}

TEST(Residency, AllocationsWithinTheBudgetStayResident) {
  Env env(8 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB + 1);
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_EQ(env.state(b), kRegionResident);
  ResidencyStats s = env.res.stats();
  EXPECT_EQ(s.resident, kMiB + (kMiB + kGran));  // rounded up to the granularity
  EXPECT_EQ(s.used, s.resident);
  EXPECT_EQ(s.regions, 2u);
  // gswapd's traces give b the size asked for; the rest of its last granule is device memory
  // its plans must leave room for.
  EXPECT_EQ(s.fixed, kGran - 1);
  // A guard granule follows every region: b does not start where a ends.
  EXPECT_GE(b, a + kMiB + kGran);
  EXPECT_EQ(env.region(a + kMiB), env.region(a));  // a's one-past-the-end names a
}

// The rounding counts while a region holds device memory, not while it is on the host.
TEST(Residency, OnlyTheRoundingOfRegionsOnTheDeviceIsFixed) {
  Env env(4 * kGran);
  CUdeviceptr a = env.alloc(kGran + 1);  // holds two granules
  EXPECT_EQ(env.res.stats().fixed, kGran - 1);
  CUdeviceptr b = env.alloc(2 * kGran + 2);  // holds three: a must leave
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionHost);
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_EQ(env.res.stats().fixed, kGran - 2);
}

TEST(Residency, EvictionAndRestoreKeepTheBytes) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 1);
  CUdeviceptr b = env.alloc(kMiB);
  env.fill(b, kMiB, 2);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  // A third region only fits once the least recently used one (a) has left.
  CUdeviceptr c = env.alloc(kMiB);
  EXPECT_EQ(env.state(a), kRegionHost);
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_FALSE(env.holds(a, kMiB, 1));  // unmapped: touching it would fault
  ResidencyStats s = env.res.stats();
  EXPECT_LE(s.used, 2 * kMiB);
  EXPECT_EQ(s.swapped_out, kMiB);
  // Using a again brings it back, at the same address, with its bytes.
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_TRUE(env.holds(a, kMiB, 1));
  EXPECT_EQ(env.res.stats().swapped_in, kMiB);
  EXPECT_LE(env.res.stats().used, 2 * kMiB);
  (void)c;
}

TEST(Residency, AnAllocationBeginsQueuedPlannedSwapOutsBeforeChoosingVictims) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(a, kMiB, 1);
  env.fill(b, kMiB, 2);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);  // a is the least recently used
  // The plan sends b out; the swapper has not run yet when the program allocates.
  Region* rb = env.region(b);
  ASSERT_TRUE(env.res.plan_evict(rb, rb->id, 1));
  CUdeviceptr c = env.alloc(kMiB);
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionResident);  // the plan keeps it: not a victim
  EXPECT_EQ(env.state(b), kRegionHost);
  EXPECT_EQ(env.state(c), kRegionResident);
  ResidencyStats s = env.res.stats();
  EXPECT_EQ(s.planned_evictions, 1u);
  EXPECT_EQ(s.swapped_out, kMiB);
  EXPECT_LE(s.used, 2 * kMiB);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(b, kMiB, 2));
}

// The end of a capture enforces the budget at once (before the swapper runs the queue): the
// plan's queued swap-out goes first, and no least-recently-used region leaves besides it.
TEST(Residency, TheBudgetAfterACaptureBeginsQueuedPlannedSwapOutsFirst) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(b, kMiB, 2);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);  // a is the least recently used
  env.res.capture_begin();
  CUdeviceptr c = env.alloc(kMiB);  // above the budget while the stream captures
  Region* rb = env.region(b);
  ASSERT_TRUE(env.res.plan_evict(rb, rb->id, 1));
  env.res.capture_end();
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_EQ(env.state(b), kRegionHost);
  EXPECT_EQ(env.state(c), kRegionResident);
  ResidencyStats s = env.res.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.planned_evictions, 1u);
  EXPECT_LE(s.used, 2 * kMiB);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(b, kMiB, 2));
}

// Memory that comes back while an allocation waits for it goes to the allocation, unless a planned
// prefetch is needed before that allocation's call or not long after it (the allocation's call in
// the second half of the prefetch's window, from its trigger to its due point). Returns the state
// of the region prefetched and of the one the allocation would evict on demand (least recently
// used) once the prefetch took its memory.
struct OwedRun {
  std::uint32_t prefetched, other;
  ResidencyStats stats;
};
OwedRun prefetch_while_an_allocation_waits(std::uint64_t due, std::uint64_t trigger = 500) {
  Env env(2 * kMiB);
  CUdeviceptr z = env.alloc(kMiB);
  env.fill(z, kMiB, 7);
  CUdeviceptr x = env.alloc(kMiB), y = env.alloc(kMiB);  // z leaves
  EXPECT_EQ(env.state(z), kRegionHost);
  EXPECT_EQ(env.launch({x}), CUDA_SUCCESS);
  EXPECT_EQ(env.launch({y}), CUDA_SUCCESS);
  env.dev.hold(env.stream);  // y's users have not finished: its planned swap-out cannot complete
  Region* ry = env.region(y);
  EXPECT_TRUE(env.res.plan_evict(ry, ry->id, plan_tag::make(1, 0)));
  env.fast.seq.store(500);  // the allocation below is call 500
  std::atomic<bool> allocated{false};
  std::thread app([&] {
    env.alloc(kMiB);  // waits for y's memory
    allocated = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(allocated.load());
  Region* rz = env.region(z);
  env.fast.seq.store(trigger);
  EXPECT_TRUE(env.res.plan_prefetch(rz, rz->id, plan_tag::make(1, 1), due));
  // The waiting call steps the queue (a fixed sleep here was too short on a loaded machine).
  for (int i = 0; i < 2000 && env.res.commands_pending(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(env.res.commands_pending());
  env.dev.release_stream(env.stream);
  app.join();
  env.res.drain();
  OwedRun r{env.state(z), env.state(x), env.res.stats()};
  if (r.prefetched != kRegionHost) {
    EXPECT_TRUE(env.holds(z, kMiB, 7));
  }
  return r;
}

TEST(Residency, APrefetchDueAfterAWaitingAllocationLeavesItTheMemory) {
  OwedRun r = prefetch_while_an_allocation_waits(/*due=*/10'000);
  EXPECT_EQ(r.prefetched, kRegionHost);  // deferred: it waits for room
  EXPECT_EQ(r.other, kRegionResident);   // nothing evicted on demand for the allocation
  EXPECT_EQ(r.stats.evictions, 2u);      // z at the start, y as planned
  EXPECT_EQ(r.stats.prefetches, 0u);
  EXPECT_LE(r.stats.used, 2 * kMiB);
}

void expect_the_prefetch_took_the_memory(const OwedRun& r) {
  EXPECT_EQ(r.prefetched, kRegionResident);  // in y's memory, on its way out
  EXPECT_EQ(r.other, kRegionHost);           // the allocation made room on demand
  EXPECT_EQ(r.stats.evictions, 3u);
  EXPECT_EQ(r.stats.prefetches, 1u);
  EXPECT_LE(r.stats.used, 2 * kMiB);
}

TEST(Residency, APrefetchDueBeforeAWaitingAllocationTakesTheMemoryFirst) {
  expect_the_prefetch_took_the_memory(
      prefetch_while_an_allocation_waits(/*due=*/100, /*trigger=*/50));
}

// Triggered at call 400 and due at 520: the allocation (call 500) is in the second half.
TEST(Residency, APrefetchDueSoonAfterAWaitingAllocationTakesTheMemoryFirst) {
  expect_the_prefetch_took_the_memory(
      prefetch_while_an_allocation_waits(/*due=*/520, /*trigger=*/400));
}

// Prefetches deferred for want of memory start soonest back-access first, whatever the order
// their triggers came in.
TEST(Residency, DeferredPrefetchesStartSoonestBackAccessFirst) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(a, kMiB, 8);
  env.fill(b, kMiB, 9);
  CUdeviceptr c = env.alloc(kMiB), d = env.alloc(kMiB);  // a and b leave
  ASSERT_EQ(env.state(a), kRegionHost);
  ASSERT_EQ(env.state(b), kRegionHost);
  Region *ra = env.region(a), *rb = env.region(b), *rc = env.region(c);
  ASSERT_TRUE(env.res.plan_prefetch(ra, ra->id, plan_tag::make(1, 0), 200));
  ASSERT_TRUE(env.res.plan_prefetch(rb, rb->id, plan_tag::make(1, 1), 100));
  ASSERT_TRUE(env.res.plan_evict(rc, rc->id, plan_tag::make(1, 2)));  // room for one
  env.res.drain();
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_TRUE(env.holds(b, kMiB, 9));
  EXPECT_EQ(env.state(a), kRegionHost);
  EXPECT_EQ(env.state(c), kRegionHost);
  EXPECT_EQ(env.state(d), kRegionResident);
  EXPECT_EQ(env.res.stats().prefetches, 1u);
}

// With the host ahead of the device, a back-access is reached on the host while its prefetch
// still waits for memory; the region is restored on demand then. That restore is the planned
// prefetch: counted as one (and its lateness measured for its plan entry), and the prefetch
// waiting no longer.
TEST(Residency, APrefetchStillWaitingWhenItsBackAccessComesIsTheRestoreItMakes) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 5);
  CUdeviceptr b = env.alloc(kMiB), c = env.alloc(kMiB);  // a leaves
  ASSERT_EQ(env.state(a), kRegionHost);
  Region* ra = env.region(a);
  ASSERT_TRUE(env.res.plan_prefetch(ra, ra->id, plan_tag::make(1, 0), /*due=*/10'000));
  env.res.drain();
  ASSERT_EQ(env.state(a), kRegionHost);  // no room: it waits
  EXPECT_EQ(env.res.stats().prefetches, 0u);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);  // its back-access
  env.res.drain();
  EXPECT_TRUE(env.holds(a, kMiB, 5));
  EXPECT_EQ(env.res.stats().prefetches, 1u);
  // Nothing is prefetched later: b and c stay as they are once a is back.
  const std::uint32_t sb = env.state(b), sc = env.state(c);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_EQ(env.state(b), sb);
  EXPECT_EQ(env.state(c), sc);
  EXPECT_EQ(env.res.stats().prefetches, 1u);
}

TEST(Residency, RestoreInFlightIsWaitedForOnTheStream) {
  Env env(kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 3);
  CUdeviceptr b = env.alloc(kMiB);  // a leaves
  ASSERT_EQ(env.state(a), kRegionHost);
  env.dev.set_manual(true);
  // The restore is issued but does not run: a is kRestoring, and the launch's stream waits.
  std::thread app([&] { EXPECT_EQ(env.launch({a}), CUDA_SUCCESS); });
  for (int i = 0; i < 200 && env.state(a) != kRegionRestoring; ++i) {
    env.res.swapper_step();
    env.dev.run();  // lets b's swap-out complete; a's restore is queued behind it
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (env.state(a) == kRegionRestoring) break;
  }
  app.join();
  env.dev.set_manual(false);
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_TRUE(env.holds(a, kMiB, 3));
  EXPECT_EQ(env.state(b), kRegionHost);
}

TEST(Residency, ASwapOutStillInFlightIsRescuedWithoutACopyBack) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(a, kMiB, 4);
  env.dev.hold(env.stream);  // a's users have not finished: its swap-out cannot start
  env.res.set_budget(kMiB);  // a (least recently used) must leave
  env.res.swapper_step();
  ASSERT_EQ(env.state(a), kRegionEvicting);
  EXPECT_EQ(env.res.stats().evicting, kMiB);
  // a is needed again before its copy ran: it is rescued (no restore), still mapped.
  env.res.set_budget(2 * kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  EXPECT_EQ(env.state(a), kRegionResident);
  env.dev.release_stream(env.stream);
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_TRUE(env.holds(a, kMiB, 4));
  EXPECT_EQ(env.dev.count("copy_h2d"), 0);
  EXPECT_EQ(env.res.stats().evicting, 0u);
  (void)b;
}

TEST(Residency, StreamOrderedFreeWaitsForTheUsersStreams) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.dev.hold(env.stream);  // the launch that used a is still running
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.swapper_step();
  EXPECT_EQ(env.res.stats().freeing, kMiB);  // not reused yet
  EXPECT_EQ(env.res.stats().pooled, 0u);
  env.dev.release_stream(env.stream);
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
  EXPECT_EQ(env.res.stats().pooled, kMiB);  // back, still mapped
  EXPECT_EQ(env.dev.count("unmap"), 0);
  // The address range and its memory serve the next allocation of that size.
  CUdeviceptr b = env.alloc(kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(env.res.stats().regions, 1u);
  EXPECT_EQ(env.dev.count("map"), 1);
}

// A freed region's memory stays mapped at its address, as the driver's stream-ordered pool
// keeps it: allocating and freeing one size over and over makes one map and no unmap, and the
// memory is the budget's like any pooled handle (free to cuMemGetInfo).
TEST(Residency, FreedMemoryServesTheNextAllocationOfItsSizeStillMapped) {
  Env env(4 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  CUdeviceptr first = a;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
    ASSERT_TRUE(env.res.free_region(a, env.stream, true, false));
    env.res.drain();
    EXPECT_EQ(env.res.stats().pooled, kMiB);
    std::uint64_t free = 0, total = 0;
    ASSERT_TRUE(env.res.memory_info(&free, &total));
    EXPECT_EQ(free, total);
    a = env.alloc(kMiB);
    EXPECT_EQ(a, first);
    EXPECT_EQ(env.res.stats().pooled, 0u);
    EXPECT_EQ(env.res.stats().resident, kMiB);
  }
  EXPECT_EQ(env.dev.count("map"), 1);
  EXPECT_EQ(env.dev.count("unmap"), 0);
  EXPECT_EQ(env.dev.count("create"), 1);
  // Another size gets its own range and memory; the kept range stays as it is.
  ASSERT_TRUE(env.res.free_region(a, env.stream, true, false));
  env.res.drain();
  CUdeviceptr b = env.alloc(2 * kMiB);
  EXPECT_NE(b, first);
  EXPECT_EQ(env.res.stats().pooled, kMiB);
  EXPECT_EQ(env.dev.count("unmap"), 0);
}

// A lower budget the swapper has not enforced yet: an allocation of a kept size makes room as any
// other (kept memory given back, a region evicted), never returning above the budget.
// Two 1 MiB regions, the first freed (its memory kept mapped), the second filled from seed:
// returns the second.
CUdeviceptr keep_the_first_of_two(Env& env, std::uint32_t seed) {
  CUdeviceptr a = env.alloc(kMiB);
  CUdeviceptr b = env.alloc(kMiB);
  env.fill(b, kMiB, seed);
  EXPECT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.drain();
  EXPECT_EQ(env.res.stats().pooled, kMiB);
  return b;
}

TEST(Residency, AnAllocationAfterTheBudgetShrankMakesRoomBeforeTakingKeptMemory) {
  Env env(4 * kMiB);
  CUdeviceptr b = keep_the_first_of_two(env, 1);
  env.res.set_budget(kMiB);  // the swapper has not run since
  CUdeviceptr c = env.alloc(kMiB);
  ASSERT_NE(c, 0u);
  ResidencyStats s = env.res.stats();
  EXPECT_LE(s.used - s.evicting - s.freeing, kMiB);
  env.res.drain();
  EXPECT_LE(env.res.stats().used, kMiB);
  EXPECT_EQ(env.state(b), kRegionHost);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);  // c leaves; b comes back with its bytes
  env.res.drain();
  EXPECT_TRUE(env.holds(b, kMiB, 1));
}

// Kept memory is the first to go back to the driver when the budget needs it: unmapped and
// released, never evicting a region for it.
TEST(Residency, KeptMemoryIsGivenBackWhenTheBudgetNeedsIt) {
  Env env(2 * kMiB);
  CUdeviceptr b = keep_the_first_of_two(env, 3);
  CUdeviceptr c = env.alloc(kMiB - kGran);  // another size: a's memory must go
  EXPECT_EQ(env.dev.count("unmap"), 1);
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_EQ(env.state(c), kRegionResident);
  EXPECT_TRUE(env.holds(b, kMiB, 3));
  EXPECT_EQ(env.res.stats().pooled, 0u);
  EXPECT_EQ(env.res.stats().evictions, 0u);
  EXPECT_LE(env.res.stats().used, 2 * kMiB);
}

// A restore takes kept memory of its size (unmapped there, mapped at the region's address) and
// brings the bytes back.
TEST(Residency, ARestoreTakesKeptMemoryOfItsSize) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 4);
  CUdeviceptr b = env.alloc(kMiB);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  CUdeviceptr c = env.alloc(kMiB);  // a leaves
  env.res.drain();
  ASSERT_EQ(env.state(a), kRegionHost);
  ASSERT_TRUE(env.res.free_region(c, nullptr, false, false));
  env.res.drain();
  EXPECT_EQ(env.res.stats().pooled, kMiB);
  const int creates = env.dev.count("create");
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);  // back in c's memory
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_TRUE(env.holds(a, kMiB, 4));
  EXPECT_EQ(env.dev.count("create"), creates);
  EXPECT_EQ(env.res.stats().pooled, 0u);
}

// When gswap's address reservation is full, ranges held by kept memory are unmapped (their
// memory stays pooled) so that an allocation of another size still gets a region.
TEST(Residency, KeptRangesLeaveTheAddressSpaceToANewAllocation) {
  Env env(16 * kMiB);
  env.dev.cap_reserve(4 * kMiB);  // room for three 1 MiB regions and their guard granules
  CUdeviceptr r[3];
  for (CUdeviceptr& p : r) p = env.alloc(kMiB);
  for (CUdeviceptr p : r) ASSERT_TRUE(env.res.free_region(p, nullptr, false, false));
  env.res.drain();
  EXPECT_EQ(env.res.stats().pooled, 3 * kMiB);
  CUdeviceptr b = env.alloc(2 * kMiB);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_EQ(env.dev.count("unmap"), 3);
  EXPECT_LE(env.res.stats().pooled, 3 * kMiB);
}

// Kept memory that cannot be unmapped when the budget needs it is logged and counted, and lost
// to gswap (never handed out again), not a crash or a double use.
TEST(Residency, KeptMemoryThatCannotBeUnmappedIsLostNotReused) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.alloc(kMiB);
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.drain();
  env.dev.fail("unmap", 1);
  CUdeviceptr c = env.alloc(kMiB + kGran);
  EXPECT_NE(c, a);
  EXPECT_EQ(env.res.stats().swap_errors, 1u);
  EXPECT_EQ(env.res.stats().pooled, 0u);
  CUdeviceptr d = env.alloc(kMiB);  // not a's range: it was lost
  EXPECT_NE(d, a);
}

// Two streams whose slots of the stream table fall in the same bucket.
std::pair<CUstream, CUstream> bucket_mates(Env& env) {
  std::vector<std::pair<CUstream, unsigned>> seen;
  for (int i = 0; i < 500; ++i) {
    CUstream s = env.dev.user_stream();
    unsigned slot = 0;
    env.fast.streams.bit(reinterpret_cast<std::uintptr_t>(s), false, &slot);
    for (auto& [o, os] : seen)
      if (os % StreamTable::kBuckets == slot % StreamTable::kBuckets) return {o, s};
    seen.push_back({s, slot});
  }
  return {nullptr, nullptr};
}

// A region used on stream A, which the application destroys while A's kernel still runs (legal:
// queued work runs on), then frees it; another live stream shares A's bucket. The free must wait
// for A's work (through the order stream, which the destroy ordered after A), not be recorded on
// the bucket's other stream.
TEST(Residency, AFreeAfterItsStreamWasDestroyedWaitsForThatStreamsWork) {
  Env env(4 * kMiB);
  env.alloc(kMiB);  // the device is set up
  auto [a_stream, mate] = bucket_mates(env);
  ASSERT_NE(a_stream, nullptr);
  env.res.stream_created(a_stream, CU_STREAM_NON_BLOCKING);
  env.res.stream_created(mate, CU_STREAM_NON_BLOCKING);
  CUdeviceptr a = 0;
  bool made = false;  // a cuMemAlloc: no stream of its own
  ASSERT_EQ(env.res.alloc_region(&a, kMiB, nullptr, false, false, &made), CUDA_SUCCESS);
  ASSERT_TRUE(made);
  CUstream first = env.stream;
  env.stream = a_stream;  // Env launches on env.stream
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.stream = first;
  env.dev.hold(a_stream);  // its kernel using a still runs
  env.res.stream_destroyed(a_stream);
  bool handled = false;
  ASSERT_EQ(env.res.free_allocation(a, nullptr, false, false, &handled), CUDA_SUCCESS);
  ASSERT_TRUE(handled);
  env.res.swapper_step();
  env.res.swapper_step();
  EXPECT_EQ(env.res.stats().freeing, kMiB);  // not back while A's kernel runs
  EXPECT_EQ(env.res.stats().pooled, 0u);
  env.dev.release_stream(a_stream);
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
}

// The free's order point is the free call: work the program enqueues on the stream afterwards
// (the host running ahead of the device) does not hold the memory back.
TEST(Residency, AFreeWaitsOnlyForWhatItsStreamsHadEnqueued) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  FakeDevice::Stream other = env.dev.long_kernel(env.stream);  // enqueued after the free
  env.res.swapper_step();
  EXPECT_EQ(env.res.stats().freeing, 0u);
  EXPECT_EQ(env.res.stats().pooled, kMiB);
  env.dev.release_stream(other);
  env.res.drain();
}

// A region freed while its rescued swap-out copy still waits to run keeps its memory until the
// copy has read it (the free follows the region's last swap-out, not only its users).
TEST(Residency, AFreeFollowsTheRegionsSwapOutCopy) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  CUdeviceptr b = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  env.dev.hold(env.stream);  // the launch that used a is still running: a's copy waits for it
  env.res.set_budget(kMiB);
  env.res.swapper_step();
  ASSERT_EQ(env.state(a), kRegionEvicting);
  // A launch on another stream, which has run, rescues it; then the program frees it.
  CUstream held = env.stream;
  env.stream = env.dev.user_stream();
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.stream = held;
  ASSERT_EQ(env.state(a), kRegionResident);
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.swapper_step();
  EXPECT_EQ(env.res.stats().freeing, kMiB);  // the copy has not run yet
  env.dev.release_stream(env.stream);
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
  EXPECT_EQ(env.dev.count("fault"), 0);
}

// A planned swap-out begun by the thread that enqueued its access takes its order point there:
// launches the program enqueues afterwards (the host running ahead) do not hold its copy back.
TEST(Residency, APlannedSwapOutWaitsOnlyForWhatItsStreamsHadEnqueued) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 7);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  Region* r = env.region(a);
  ASSERT_TRUE(env.res.plan_evict(r, r->id, 0));
  // Enqueued after the planned access.
  FakeDevice::Stream other = env.dev.long_kernel(env.stream);
  for (int i = 0; i < 3; ++i) env.res.swapper_step();
  EXPECT_EQ(env.state(a), kRegionHost);
  env.dev.release_stream(other);
  env.res.drain();
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  EXPECT_TRUE(env.holds(a, kMiB, 7));
}

// The order point still covers the access: a kernel of the stream still running holds the copy.
TEST(Residency, APlannedSwapOutWaitsForItsAccess) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.dev.hold(env.stream);  // the planned access is still running
  Region* r = env.region(a);
  ASSERT_TRUE(env.res.plan_evict(r, r->id, 0));
  for (int i = 0; i < 3; ++i) env.res.swapper_step();
  EXPECT_EQ(env.state(a), kRegionEvicting);
  EXPECT_EQ(env.dev.count("copy_d2h"), 1);
  EXPECT_TRUE(env.dev.d2h_run().empty());
  // Freed before the copy ran: the memory waits for the access too.
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.swapper_step();
  EXPECT_GT(env.res.stats().evicting + env.res.stats().freeing, 0u);
  env.dev.release_stream(env.stream);
  env.res.drain();
  EXPECT_EQ(env.dev.count("fault"), 0);
  EXPECT_EQ(env.res.stats().evicting, 0u);
  EXPECT_EQ(env.res.stats().freeing, 0u);
  EXPECT_EQ(env.res.stats().regions, 0u);
}

// A region just used is asked to leave after its access (plan_evict, begun at once when nothing is
// queued) and asked back for its next back-access (plan_prefetch), in either order. Returns its
// state once the swapper is done, and the prefetches started.
std::pair<std::uint32_t, std::uint64_t> evict_and_prefetch(bool evict_first) {
  constexpr std::uint64_t kDue = 10'000;  // the next iteration's back-access
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  EXPECT_EQ(env.launch({a}), CUDA_SUCCESS);
  Region* r = env.region(a);
  if (evict_first) {
    EXPECT_TRUE(env.res.plan_evict(r, r->id, 0));
    EXPECT_EQ(env.state(a), kRegionEvicting);
  }
  EXPECT_TRUE(env.res.plan_prefetch(r, r->id, 0, kDue));
  if (!evict_first) {
    EXPECT_TRUE(env.res.plan_evict(r, r->id, 0));
  }
  env.res.drain();
  return {env.state(a), env.res.stats().prefetches};
}

// A prefetch asked for while the region's swap-out is under way cancels it: the region stays.
TEST(Residency, APrefetchAskedForDuringASwapOutCancelsIt) {
  auto [state, prefetches] = evict_and_prefetch(/*evict_first=*/true);
  EXPECT_EQ(state, kRegionResident);
  EXPECT_EQ(prefetches, 1u);
}

// A prefetch asked for before a swap-out of the same region (for its next back-access, while it
// is still resident) comes to nothing; the swap-out, asked for after it, is not cancelled by it.
TEST(Residency, APrefetchAskedForBeforeASwapOutDoesNotCancelIt) {
  auto [state, prefetches] = evict_and_prefetch(/*evict_first=*/false);
  EXPECT_EQ(state, kRegionHost);
  EXPECT_EQ(prefetches, 0u);
}

// The same when the swap-out begins ahead of the queued prefetch (the end of a capture begins the
// plan's queued swap-outs at once): the prefetch, asked for while the region was resident,
// cancels nothing.
TEST(Residency, APrefetchAskedForBeforeASwapOutBegunAheadOfItCancelsNothing) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  Region* r = env.region(a);
  env.res.capture_begin();
  CUdeviceptr c = env.alloc(kMiB);  // above the budget while the stream captures
  ASSERT_TRUE(env.res.plan_prefetch(r, r->id, 0, /*due=*/10'000));
  ASSERT_TRUE(env.res.plan_evict(r, r->id, 0));  // queued: nothing leaves during a capture
  env.res.capture_end();
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionHost);
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_EQ(env.state(c), kRegionResident);
  EXPECT_EQ(env.res.stats().prefetches, 0u);
}

// Swap-outs begun one after the other by application threads are copied in that order.
TEST(Residency, PlannedSwapOutsBegunByTheApplicationKeepTheirOrder) {
  Env env(4 * kMiB);
  CUdeviceptr p[3] = {env.alloc(kMiB), env.alloc(kMiB), env.alloc(kMiB)};
  for (CUdeviceptr q : p) {
    ASSERT_EQ(env.launch({q}), CUDA_SUCCESS);
    Region* r = env.region(q);
    ASSERT_TRUE(env.res.plan_evict(r, r->id, 0));
  }
  env.res.drain();
  EXPECT_EQ(env.dev.d2h_run(), (std::vector<std::uint64_t>{p[0], p[1], p[2]}));
}

// A region's events outlive it (regions are recycled): the event a free creates can time the
// swap-outs of the region that reuses it, which measure the link.
TEST(Residency, ASwapOutOfARecycledRegionIsTimed) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.drain();
  CUdeviceptr b = env.alloc(kMiB);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  env.res.set_budget(kMiB / 2);
  env.res.drain();
  ASSERT_EQ(env.state(b), kRegionHost);
  EXPECT_EQ(env.res.timings().d2h_bytes_per_s(), 1000u * kMiB);  // 1 MiB in the fake's 1 ms
}

TEST(Residency, FreeDuringSwapOutFinishesAfterTheCopy) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.alloc(kMiB);
  env.dev.set_manual(true);
  env.res.set_budget(kMiB);
  env.res.swapper_step();  // a's swap-out is issued, not run
  ASSERT_EQ(env.state(a), kRegionEvicting);
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  EXPECT_EQ(env.region(a), nullptr);  // gone from the map at once
  env.dev.set_manual(false);
  env.res.drain();
  ResidencyStats s = env.res.stats();
  EXPECT_EQ(s.evicting, 0u);
  EXPECT_EQ(s.regions, 1u);
  EXPECT_LE(s.used, kMiB);
}

TEST(Residency, OutOfMemoryLeavesEverythingUsable) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(a, kMiB, 5);
  env.fill(b, kMiB, 6);
  CUdeviceptr c = env.alloc(kMiB);  // one of a, b leaves
  env.fill(c, kMiB, 7);
  // No launch can have three 1 MiB regions resident under 2 MiB.
  EXPECT_EQ(env.launch({a, b, c}), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(env.res.stats().oom, 1u);
  // Later calls work, and no byte was lost.
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  ASSERT_EQ(env.launch({c}), CUDA_SUCCESS);
  env.res.drain();
  for (auto [p, seed] : {std::pair{a, 5u}, {b, 6u}, {c, 7u}}) {
    ASSERT_EQ(env.launch({p}), CUDA_SUCCESS);
    env.res.drain();
    EXPECT_TRUE(env.holds(p, kMiB, seed));
  }
  // An allocation larger than the whole budget is refused with one error.
  env.alloc(3 * kMiB, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(env.res.stats().oom, 2u);
}

TEST(Residency, AFailedKeepResidentMarksNothing) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB), c = env.alloc(kMiB);
  TouchSet t;
  for (CUdeviceptr p : {a, b, c}) t.add(env.region(p));
  EXPECT_EQ(env.res.keep_resident(t), CUDA_ERROR_OUT_OF_MEMORY);
  for (CUdeviceptr p : {a, b, c}) EXPECT_FALSE(env.region(p)->must_stay);
  // Each region alone still comes and goes.
  for (int round = 0; round < 2; ++round)
    for (CUdeviceptr p : {a, b, c}) ASSERT_EQ(env.launch({p}), CUDA_SUCCESS);
  // Two fit: they stay from now on, and the third still works.
  TouchSet two;
  two.add(env.region(a));
  two.add(env.region(b));
  ASSERT_EQ(env.res.keep_resident(two), CUDA_SUCCESS);
  EXPECT_TRUE(env.region(a)->must_stay);
  EXPECT_EQ(env.launch({c}), CUDA_ERROR_OUT_OF_MEMORY);  // both others must stay
  EXPECT_EQ(env.state(a), kRegionResident);
}

TEST(Residency, AFailedSwapOutCopyLosesNothing) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(a, kMiB, 8);
  env.fill(b, kMiB, 9);
  env.dev.fail("copy_d2h", 1);
  // a's swap-out cannot be enqueued: a stays (for good), b leaves instead.
  CUdeviceptr c = env.alloc(kMiB);
  EXPECT_EQ(env.res.stats().swap_errors, 1u);
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_TRUE(env.region(a)->must_stay);
  EXPECT_TRUE(env.holds(a, kMiB, 8));
  EXPECT_EQ(env.state(b), kRegionHost);
  // b comes back (c leaves: a must stay), with its bytes.
  ASSERT_EQ(env.launch({b}, true, [&] { EXPECT_TRUE(env.holds(b, kMiB, 9)); }), CUDA_SUCCESS);
  EXPECT_EQ(env.state(c), kRegionHost);
  EXPECT_TRUE(env.holds(a, kMiB, 8));
}

TEST(Residency, AFailedUnmapKeepsTheRegionWithItsBytes) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 10);
  env.alloc(kMiB);
  env.dev.fail("unmap", 1);
  env.res.set_budget(kMiB);
  env.res.drain();
  EXPECT_EQ(env.res.stats().swap_errors, 1u);
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_TRUE(env.region(a)->must_stay);
  EXPECT_TRUE(env.holds(a, kMiB, 10));
}

TEST(Residency, AFailedRestoreCopyIsReportedAndCanBeRetried) {
  Env env(kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.fill(a, kMiB, 11);
  CUdeviceptr b = env.alloc(kMiB);  // a leaves
  ASSERT_EQ(env.state(a), kRegionHost);
  env.dev.fail("copy_h2d", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(env.launch({a}), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(env.state(a), kRegionHost);  // its bytes are still on the host
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(a, kMiB, 11));
  EXPECT_EQ(env.state(b), kRegionHost);
}

TEST(Residency, NothingLeavesDuringACaptureAndTheExcessGoesAfter) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  int records = env.dev.count("record");
  env.res.capture_begin();
  // An allocation during the capture goes above the budget: nothing may be evicted.
  CUdeviceptr c = env.alloc(kMiB);
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_EQ(env.state(b), kRegionResident);
  EXPECT_EQ(env.res.stats().used, 3 * kMiB);
  EXPECT_EQ(env.res.stats().capture_overshoot, kMiB);
  EXPECT_EQ(env.dev.count("record"), records);  // nothing recorded on any stream
  env.res.capture_end();
  env.res.drain();
  EXPECT_LE(env.res.stats().used, 2 * kMiB);
  (void)c;
}

// During a capture memory goes over the budget, and a call touching more than the budget of
// regions already on the device (the capture's own allocations among them) is not refused as
// one that could never fit: it restores nothing.
TEST(Residency, ACallAboveTheBudgetDuringACaptureIsNotRefused) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a, b}), CUDA_SUCCESS);
  env.res.capture_begin();
  CUdeviceptr c = env.alloc(kMiB);  // over the budget, admitted: a capture evicts nothing
  EXPECT_EQ(env.launch({a, b, c}), CUDA_SUCCESS);
  TouchSet t;
  for (CUdeviceptr p : {a, b, c}) t.add(env.region(p));
  EXPECT_EQ(env.res.keep_resident(t, /*for_capture=*/true), CUDA_SUCCESS);
  EXPECT_EQ(env.res.stats().oom, 0u);
  env.res.capture_end();
  env.res.drain();
}

TEST(Residency, FreesDuringACaptureWaitForItsEnd) {
  Env env(4 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  int records = env.dev.count("record");
  env.res.capture_begin();
  ASSERT_TRUE(env.res.free_region(a, nullptr, false, false));
  env.res.swapper_step();
  EXPECT_EQ(env.res.stats().freeing, kMiB);
  EXPECT_EQ(env.dev.count("record"), records);  // nothing recorded on any stream
  env.res.capture_end();
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
}

// During a capture a free on a capturing stream is a graph free node, which must name a graph
// allocation: the driver answers it and the region stays. On another stream it is a free (that
// waits for the capture's end).
TEST(Residency, AFreeOnACapturingStreamIsTheDriversToAnswer) {
  Env env(4 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  Device::Stream other = env.dev.user_stream();
  env.res.capture_begin();
  env.dev.set_capturing(env.stream, true);
  bool handled = true;
  EXPECT_EQ(env.res.free_allocation(a, env.stream, true, false, &handled), CUDA_SUCCESS);
  EXPECT_FALSE(handled);
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_EQ(env.res.stats().freeing, 0u);
  EXPECT_EQ(env.res.free_allocation(a, other, true, false, &handled), CUDA_SUCCESS);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.res.stats().freeing, kMiB);
  env.dev.set_capturing(env.stream, false);
  env.res.capture_end();
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
}

// During a capture cuMemAlloc and cuMemFree are potentially unsafe calls: the driver judges the
// thread (unsafe_call), and a refusal is the call's answer, nothing allocated or freed.
// Stream-ordered calls are not judged.
TEST(Residency, UnsafeCallsDuringACaptureAreJudgedByTheDriver) {
  Env env(4 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.res.capture_begin();
  env.dev.set_unsafe_answer(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUdeviceptr p = 0;
  bool handled = false;
  EXPECT_EQ(env.res.alloc_region(&p, kMiB, nullptr, false, false, &handled),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.res.free_allocation(a, nullptr, false, false, &handled),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.state(a), kRegionResident);
  EXPECT_EQ(env.res.stats().used, kMiB);
  EXPECT_EQ(env.dev.count("unsafe_call"), 2);
  EXPECT_EQ(env.res.alloc_region(&p, kMiB, env.stream, true, false, &handled), CUDA_SUCCESS);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.dev.count("unsafe_call"), 2);
  env.dev.set_unsafe_answer(CUDA_SUCCESS);
  EXPECT_EQ(env.res.free_allocation(a, nullptr, false, false, &handled), CUDA_SUCCESS);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.dev.count("unsafe_call"), 3);
  env.res.capture_end();
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
  EXPECT_EQ(env.res.stats().resident, kMiB);
}

// cuMemFree of a region waits, as the driver's does, for the work queued before it on the
// application's streams: the legacy stream (which follows the blocking ones) and every
// non-blocking stream made in the context; never for the whole context, where gswap's own copies
// run. A wait that fails frees nothing. A region from cuMemAllocAsync is freed without a wait, as
// the driver frees such memory.
TEST(Residency, ASynchronousFreeWaitsForTheApplicationsStreams) {
  Env env(4 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  Device::Stream s = env.dev.user_stream(), gone = env.dev.user_stream();
  env.res.stream_created(s, CU_STREAM_NON_BLOCKING);
  env.res.stream_created(gone, CU_STREAM_NON_BLOCKING);
  env.res.stream_created(env.stream, CU_STREAM_DEFAULT);  // followed by the legacy stream
  env.res.stream_destroyed(gone);
  env.dev.hold(s);  // a long kernel on s
  int legacy = env.dev.count("record_legacy"), records = env.dev.count("record");
  bool handled = false;
  EXPECT_EQ(env.res.free_allocation(a, nullptr, false, false, &handled), CUDA_ERROR_NOT_READY);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.state(a), kRegionResident);  // the fake's wait failed: nothing freed
  EXPECT_EQ(env.dev.count("record_legacy"), legacy + 1);
  EXPECT_EQ(env.dev.count("record"), records + 2);  // the legacy stream and s
  env.dev.release_stream(s);
  EXPECT_EQ(env.res.free_allocation(a, nullptr, false, false, &handled), CUDA_SUCCESS);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.dev.count("synchronize_context"), 0);

  CUdeviceptr b = 0;
  ASSERT_EQ(env.res.alloc_region(&b, kMiB, env.stream, true, false, &handled), CUDA_SUCCESS);
  env.dev.hold(s);
  records = env.dev.count("record_legacy");
  EXPECT_EQ(env.res.free_allocation(b, nullptr, false, false, &handled), CUDA_SUCCESS);
  EXPECT_TRUE(handled);
  EXPECT_EQ(env.dev.count("record_legacy"), records);
  env.dev.release_stream(s);
  env.res.drain();
  EXPECT_EQ(env.res.stats().freeing, 0u);
}

TEST(Residency, PerThreadStreamsAreOrderedThroughTheLegacyStream) {
  Env env(2 * kMiB);
  CUdeviceptr a = env.alloc(kMiB);
  env.region(a)->streams.fetch_or(StreamTable::kPerThreadBit);
  env.alloc(kMiB);
  env.res.set_budget(kMiB);
  env.res.drain();
  EXPECT_EQ(env.state(a), kRegionHost);
  EXPECT_GE(env.dev.count("record_legacy"), 1);
  EXPECT_EQ(env.dev.count("synchronize_context"), 0);  // no device-wide wait
}

TEST(Residency, ALowerBudgetIsEnforcedByTheSwapper) {
  Env env(4 * kMiB, /*thread=*/true);
  std::vector<CUdeviceptr> v;
  for (int i = 0; i < 4; ++i) {
    v.push_back(env.alloc(kMiB));
    env.fill(v.back(), kMiB, 20 + i);
  }
  env.res.set_budget(2 * kMiB);
  env.res.drain();
  EXPECT_LE(env.res.stats().used, 2 * kMiB);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(
        env.launch({v[i]}, /*sync=*/true, [&] { EXPECT_TRUE(env.holds(v[i], kMiB, 20 + i)); }),
        CUDA_SUCCESS);
  env.res.stop_swapper();
}

// Launch threads and an evictor on shared regions: every launch sees its regions mapped with
// their bytes, and the accounting ends consistent.
TEST(Residency, ConcurrentLaunchesAndEvictions) {
  Env env(4 * kMiB, /*thread=*/true);
  std::vector<CUdeviceptr> v;
  for (int i = 0; i < 8; ++i) {
    v.push_back(env.alloc(kMiB / 2));
    env.fill(v.back(), kMiB / 2, 40 + i);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) {
        int i = (t * 3 + k) % 8, j = (t + k * 5) % 8;
        CUresult e = env.launch({v[i], v[j]}, true, [&] {
          if (!env.holds(v[i], kMiB / 2, 40 + i) || !env.holds(v[j], kMiB / 2, 40 + j)) ++bad;
        });
        if (e != CUDA_SUCCESS) ++bad;
      }
    });
  std::thread evictor([&] {
    for (int k = 0; k < 50; ++k) {
      env.res.set_budget(k % 2 ? 4 * kMiB : 2 * kMiB);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (auto& th : threads) th.join();
  evictor.join();
  EXPECT_EQ(bad.load(), 0);
  // However the threads and the swapper were scheduled, a budget below what is resident now
  // makes the swapper evict.
  env.res.set_budget(2 * kMiB);
  env.res.drain();
  ResidencyStats s = env.res.stats();
  EXPECT_LE(s.used, 2 * kMiB);
  EXPECT_EQ(s.evicting, 0u);
  EXPECT_EQ(s.freeing, 0u);
  EXPECT_GT(s.swapped_out, 0u);
  env.res.stop_swapper();
}

// A name longer than a region keeps (63 bytes) is cut before a character the cut would split.
TEST(Residency, ALongNameIsCutBetweenCharacters) {
  Env env(8 * kMiB);
  CUdeviceptr p = env.alloc(kMiB);
  const std::string ascii(62, 'a');
  ASSERT_TRUE(env.res.name_region(p, (ascii + "\xc3\xa9tail").c_str()));  // e-acute at 62-63
  EXPECT_EQ(std::string(env.region(p)->name), ascii);
  ASSERT_TRUE(env.res.name_region(p, (ascii + "b\xc3\xa9").c_str()));
  EXPECT_EQ(std::string(env.region(p)->name), ascii + "b");
  ASSERT_TRUE(env.res.name_region(p, "short \xc3\xa9"));
  EXPECT_EQ(std::string(env.region(p)->name), "short \xc3\xa9");
}

}  // namespace
}  // namespace gswap::interpose
