// recompute_test.cpp: recomputation (recompute.h) over the fake device: planned drops, recompute
// at the next use (chains, the callback's own launches), the failure rule, and registrations that
// end while a drop is planned or done.
//
// A "kernel" here is the callback writing through the region's mapping at once (the fake device
// runs stream work as it is enqueued); it first checks that its source holds what it should, so
// a recomputation from a source that is not resident, or not restored yet, fails the test.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "interpose/residency_test_env.h"

namespace gswap::interpose {
namespace {

using testing::Env;
using testing::kMiB;

// out = the pattern of out_seed, computed "from" src, which must hold the pattern of src_seed.
struct Recipe {
  Env* env = nullptr;
  CUdeviceptr src = 0;
  std::uint32_t src_seed = 0, out_seed = 0;
  int calls = 0;
  int fail_at = 0;           // the call (1-based) from which it fails; 0: never
  bool nested = false;       // launches over dst and src itself, as a framework's kernel would
  bool kept = false;         // its launch is one gswap keeps resident (a launch during a capture)
  bool unregisters = false;  // calls gswap_unregister_recompute on dst (refused from here)
  int unregister_result = 1;
  std::vector<Recipe*>* order = nullptr;  // appends itself when called
};

int recompute_fn(void* ctx, unsigned long long dst, unsigned long long bytes, void* stream) {
  auto* r = static_cast<Recipe*>(ctx);
  ++r->calls;
  if (r->order) r->order->push_back(r);
  if (r->fail_at && r->calls >= r->fail_at) return 7;
  if (stream != r->env->stream) return 8;  // the stream of the access that needs the bytes
  if (r->src && !r->env->holds(r->src, bytes, r->src_seed)) return 9;
  if (r->nested && r->env->launch({dst, r->src}) != CUDA_SUCCESS) return 10;
  if (r->kept) {
    TouchSet t;
    t.add(r->env->region(dst));
    if (r->env->res.keep_resident(t, /*for_capture=*/true) != CUDA_SUCCESS) return 11;
  }
  if (r->unregisters) r->unregister_result = r->env->res.unregister_recompute(dst);
  r->env->fill(dst, bytes, r->out_seed);
  return 0;
}

// A second callback function: trust is per function.
int other_fn(void* ctx, unsigned long long dst, unsigned long long bytes, void* stream) {
  return recompute_fn(ctx, dst, bytes, stream);
}

int reg(Env& env, CUdeviceptr p, std::uint64_t bytes, std::initializer_list<CUdeviceptr> srcs,
        Recipe* recipe, gswap_recompute_fn fn = recompute_fn) {
  std::vector<unsigned long long> s(srcs.begin(), srcs.end());
  return env.res.register_recompute(p, bytes, s.data(), static_cast<int>(s.size()), 0, fn, recipe);
}

void drop(Env& env, CUdeviceptr p) {
  Region* r = env.region(p);
  ASSERT_TRUE(env.res.plan_drop(r, r->id, 1));
  env.res.drain();
}

TEST(Recompute, AFirstDropKeepsACopyLaterOnesDoNotAndTheBytesComeBack) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  env.fill(d, kMiB, 2);
  Recipe recipe{&env, src, 1, 2};
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);

  // Not trusted yet: the drop copies to the host first.
  drop(env, d);
  EXPECT_EQ(env.state(d), kRegionDropped);
  EXPECT_TRUE(env.region(d)->host_valid);
  EXPECT_EQ(env.res.stats().swapped_out, kMiB);
  EXPECT_EQ(env.res.stats().planned_drops, 1u);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  EXPECT_EQ(recipe.calls, 1);
  EXPECT_TRUE(env.holds(d, kMiB, 2));

  // Trusted: no copy, and the bytes still come back.
  drop(env, d);
  EXPECT_EQ(env.state(d), kRegionDropped);
  EXPECT_FALSE(env.region(d)->host_valid);
  EXPECT_EQ(env.res.stats().swapped_out, kMiB);
  EXPECT_FALSE(env.holds(d, kMiB, 2));  // unmapped
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_EQ(recipe.calls, 2);
  EXPECT_EQ(env.state(d), kRegionResident);
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  ResidencyStats s = env.res.stats();
  EXPECT_EQ(s.recomputes, 2u);
  EXPECT_EQ(s.recomputed_bytes, 2 * kMiB);
  EXPECT_EQ(s.recompute_failures, 0u);
  EXPECT_EQ(s.swapped_in, 0u);
  EXPECT_LE(s.used, 8 * kMiB);
}

TEST(Recompute, ASwappedOutSourceIsRestoredBeforeTheCallbackRuns) {
  Env env(2 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  env.fill(d, kMiB, 2);
  Recipe recipe{&env, src, 1, 2};
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);  // trusted from here
  drop(env, d);
  // The source leaves too (a planned swap-out), and something else takes its place.
  Region* s = env.region(src);
  ASSERT_TRUE(env.res.plan_evict(s, s->id, 2));
  env.res.drain();
  ASSERT_EQ(env.state(src), kRegionHost);
  CUdeviceptr other = env.alloc(kMiB);
  ASSERT_EQ(env.launch({other}), CUDA_SUCCESS);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  EXPECT_EQ(recipe.calls, 2);
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_LE(env.res.stats().used, 2 * kMiB);
}

TEST(Recompute, AChainIsRecomputedSourceFirstAndKeepsItsIntermediate) {
  Env env(8 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB), c = env.alloc(kMiB);
  env.fill(a, kMiB, 1);
  env.fill(b, kMiB, 2);
  env.fill(c, kMiB, 3);
  std::vector<Recipe*> order;
  Recipe rb{&env, a, 1, 2}, rc{&env, b, 2, 3};
  rb.order = rc.order = &order;
  ASSERT_EQ(reg(env, b, kMiB, {a}, &rb), GSWAP_OK);
  ASSERT_EQ(reg(env, c, kMiB, {b}, &rc), GSWAP_OK);
  for (int round = 0; round < 2; ++round) {  // the first round makes the callback trusted
    order.clear();
    drop(env, b);
    drop(env, c);
    ASSERT_EQ(env.state(b), kRegionDropped);
    ASSERT_EQ(env.state(c), kRegionDropped);
    ASSERT_EQ(env.launch({c}), CUDA_SUCCESS);
    ASSERT_EQ(order.size(), 2u);
    EXPECT_EQ(order[0], &rb);
    EXPECT_EQ(order[1], &rc);
    EXPECT_TRUE(env.holds(c, kMiB, 3));
    // The intermediate stays on the device while memory allows.
    EXPECT_NE(env.state(b), kRegionDropped);
    EXPECT_TRUE(env.holds(b, kMiB, 2));
  }
  EXPECT_EQ(env.res.stats().recomputes, 4u);
}

// A launch over a dropped region and another, at a budget that holds the two but not the
// dropped one's source beside them: where a run with no drop passes, the other region leaves
// while the recomputation runs and comes back after, and the source makes room for it.
void other_regions_make_room(bool swapper_thread) {
  Env env(2 * kMiB, swapper_thread);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB);
  env.fill(a, kMiB, 1);
  env.fill(b, kMiB, 2);
  Recipe rb{&env, a, 1, 2};
  ASSERT_EQ(reg(env, b, kMiB, {a}, &rb), GSWAP_OK);
  drop(env, b);
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);  // trusted from here: the next drop keeps no copy
  drop(env, b);
  ASSERT_FALSE(env.region(b)->host_valid);
  CUdeviceptr c = env.alloc(kMiB);
  env.fill(c, kMiB, 3);
  ASSERT_EQ(env.state(a), kRegionResident);
  ASSERT_EQ(env.state(c), kRegionResident);
  const std::uint64_t oom = env.res.stats().oom;
  ASSERT_EQ(env.launch({b, c}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_EQ(rb.calls, 2);
  EXPECT_TRUE(env.holds(b, kMiB, 2));
  EXPECT_TRUE(env.holds(c, kMiB, 3));
  EXPECT_NE(env.state(a), kRegionResident);  // left for c
  EXPECT_EQ(env.res.stats().oom, oom);
  EXPECT_LE(env.res.stats().used, 2 * kMiB);
  // The source's bytes are intact.
  ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
  EXPECT_TRUE(env.holds(a, kMiB, 1));
}

TEST(Recompute, TheLaunchsOtherRegionsMakeRoomForARecomputationsSource) {
  other_regions_make_room(false);
}

TEST(Recompute, TheLaunchsOtherRegionsMakeRoomWithASwapperThread) {
  other_regions_make_room(true);
}

TEST(Recompute, AKeptIntermediateIsDroppedBeforeAnyRegionIsSwapped) {
  Env env(4 * kMiB);
  CUdeviceptr w = env.alloc(kMiB);  // the least recently used region
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB), c = env.alloc(kMiB);
  env.fill(w, kMiB, 9);
  env.fill(a, kMiB, 1);
  env.fill(b, kMiB, 2);
  env.fill(c, kMiB, 3);
  Recipe rb{&env, a, 1, 2}, rc{&env, b, 2, 3};
  ASSERT_EQ(reg(env, b, kMiB, {a}, &rb), GSWAP_OK);
  ASSERT_EQ(reg(env, c, kMiB, {b}, &rc), GSWAP_OK);
  for (int round = 0; round < 2; ++round) {  // the first round makes the callbacks trusted
    drop(env, b);
    drop(env, c);
    ASSERT_EQ(env.launch({a}), CUDA_SUCCESS);
    ASSERT_EQ(env.launch({c}), CUDA_SUCCESS);  // recomputes b (kept), then c
    env.res.drain();
  }
  ASSERT_EQ(env.state(b), kRegionResident);
  ASSERT_TRUE(env.region(b)->kept);
  ASSERT_FALSE(env.region(c)->kept);  // touched by the launch itself
  const std::uint64_t out = env.res.stats().swapped_out;
  // Memory for one more region: the kept intermediate goes, with no copy, and w stays.
  CUdeviceptr d = env.alloc(kMiB);
  env.res.drain();
  EXPECT_EQ(env.state(b), kRegionDropped);
  EXPECT_EQ(env.state(w), kRegionResident);
  EXPECT_EQ(env.state(d), kRegionResident);
  EXPECT_EQ(env.res.stats().swapped_out, out);
  EXPECT_TRUE(env.holds(w, kMiB, 9));
  // It comes back when used, recomputed.
  ASSERT_EQ(env.launch({b}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(b, kMiB, 2));
  EXPECT_FALSE(env.region(b)->kept);
  EXPECT_LE(env.res.stats().used, 4 * kMiB);
}

TEST(Recompute, TheCallbacksOwnLaunchesReachTheRegionBeingRecomputed) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe recipe{&env, src, 1, 2};
  recipe.nested = true;
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  for (int round = 0; round < 2; ++round) {
    drop(env, d);
    ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);  // no deadlock on the restorer lock
    EXPECT_TRUE(env.holds(d, kMiB, 2));
  }
  EXPECT_EQ(recipe.calls, 2);
}

// A launch gswap keeps resident (during a capture, every launch is) from inside a callback finds
// the region being recomputed still dropped: it goes on instead of waiting for it forever.
TEST(Recompute, ACallbacksLaunchThatIsKeptResidentDoesNotWaitForItsOwnRegion) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe recipe{&env, src, 1, 2};
  recipe.kept = true;
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_EQ(recipe.calls, 1);
}

// Ending the registration that is running would recompute, or restore over, the region being
// written: refused from a callback; the recomputation ends as usual.
TEST(Recompute, UnregisteringFromACallbackIsRefused) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe recipe{&env, src, 1, 2};
  recipe.unregisters = true;
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  EXPECT_EQ(recipe.unregister_result, GSWAP_ERROR_INVALID);
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_EQ(env.res.unregister_recompute(d), GSWAP_OK);  // after the callback, it ends
}

// A chain deeper than 16 is refused whichever end it is registered from, and a dense graph (each
// region read by every region of the next layer) registers at once (its paths are exponentially
// many; each region is walked once).
TEST(Recompute, ChainsAreLimitedFromEitherEndAndDenseGraphsRegisterAtOnce) {
  for (bool from_top : {false, true}) {
    Env env(256 * kMiB);
    std::vector<CUdeviceptr> x;
    for (int k = 0; k < 20; ++k) x.push_back(env.alloc(2 * kMiB));
    Recipe recipe{&env};
    int accepted = 0;
    for (int i = 0; i < 19; ++i) {
      const int k = from_top ? 19 - i : i + 1;  // x[k] from x[k - 1]
      accepted += reg(env, x[k], 2 * kMiB, {x[k - 1]}, &recipe) == GSWAP_OK;
    }
    EXPECT_LT(accepted, 19) << (from_top ? "from the top" : "from the bottom");
  }
  Env env(1024 * kMiB);
  constexpr int kLayers = 24, kWidth = 8;
  std::vector<std::vector<CUdeviceptr>> layer(kLayers);
  Recipe recipe{&env};
  for (int l = 0; l < kLayers; ++l)
    for (int w = 0; w < kWidth; ++w) {
      layer[l].push_back(env.alloc(2 * kMiB));
      if (l == 0) continue;
      std::vector<unsigned long long> s(layer[l - 1].begin(), layer[l - 1].end());
      const int e = env.res.register_recompute(layer[l][w], 2 * kMiB, s.data(), kWidth, 0,
                                               recompute_fn, &recipe);
      // Layer 17 would make chains of 17: refused, so layer 18 starts chains anew.
      EXPECT_EQ(e, l == 17 ? GSWAP_ERROR_INVALID : GSWAP_OK) << "layer " << l;
    }
}

TEST(Recompute, AFailingCallbackWithACopyRestoresTheBytesAndTheRegionIsSwappedFromThen) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  env.fill(d, kMiB, 2);
  Recipe recipe{&env, src, 1, 2};
  recipe.fail_at = 1;
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_TRUE(env.region(d)->host_valid);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_EQ(env.res.stats().recompute_failures, 1u);
  EXPECT_EQ(env.region(d)->recompute, nullptr);  // the registration ended
  // The plan still says "drop": the region is swapped instead, and its bytes come back.
  drop(env, d);
  EXPECT_EQ(env.state(d), kRegionHost);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_EQ(recipe.calls, 1);
}

TEST(Recompute, TrustIsPerCallbackFunction) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB), e = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe rd{&env, src, 1, 2}, re{&env, src, 1, 3};
  ASSERT_EQ(reg(env, d, kMiB, {src}, &rd), GSWAP_OK);
  ASSERT_EQ(reg(env, e, kMiB, {src}, &re, other_fn), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);  // recompute_fn is trusted now, other_fn is not
  drop(env, e);
  EXPECT_TRUE(env.region(e)->host_valid);
}

TEST(Recompute, KeepCopyRecoversFromAFailureAfterTrust) {
  Env env(8 * kMiB, false, /*keep_copy=*/true);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  env.fill(d, kMiB, 2);
  Recipe recipe{&env, src, 1, 2};
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  recipe.fail_at = 2;
  drop(env, d);
  EXPECT_TRUE(env.region(d)->host_valid);  // a copy although the callback is trusted
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_EQ(env.res.stats().recompute_failures, 1u);
}

// A trusted callback that fails on a region dropped without a copy: nothing can bring the bytes
// back.
void fail_after_trust() {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe recipe{&env, src, 1, 2};
  (void)reg(env, d, kMiB, {src}, &recipe);
  drop(env, d);
  (void)env.launch({d});
  recipe.fail_at = 2;
  drop(env, d);
  (void)env.launch({d});
}

TEST(RecomputeDeathTest, AFailureAfterTrustWithNoCopyStopsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(fail_after_trust(), "holds no copy");
}

TEST(Recompute, UnregisteringWhileADropIsPlannedSwapsInstead) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  env.fill(d, kMiB, 2);
  Recipe recipe{&env, src, 1, 2};
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  Region* r = env.region(d);
  ASSERT_TRUE(env.res.plan_drop(r, r->id, 1));  // queued, not yet carried out
  ASSERT_EQ(env.res.unregister_recompute(d), GSWAP_OK);
  env.res.drain();
  EXPECT_EQ(env.state(d), kRegionHost);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  env.res.drain();
  EXPECT_TRUE(env.holds(d, kMiB, 2));
  EXPECT_EQ(recipe.calls, 0);
}

TEST(Recompute, UnregisteringADroppedRegionRecomputesItFirst) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe recipe{&env, src, 1, 2};
  recipe.env = &env;
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);  // trusted
  drop(env, d);
  ASSERT_FALSE(env.region(d)->host_valid);
  // unregister's recomputation runs on the legacy stream: the recipe accepts any stream here.
  env.stream = legacy_stream();
  ASSERT_EQ(env.res.unregister_recompute(d), GSWAP_OK);
  EXPECT_EQ(recipe.calls, 2);
  EXPECT_NE(env.state(d), kRegionDropped);
  EXPECT_EQ(env.region(d)->recompute, nullptr);
  EXPECT_TRUE(env.holds(d, kMiB, 2));
}

TEST(Recompute, FreeingASourceBringsItsDroppedDependentBack) {
  Env env(8 * kMiB);
  CUdeviceptr src = env.alloc(kMiB), d = env.alloc(kMiB);
  env.fill(src, kMiB, 1);
  Recipe recipe{&env, src, 1, 2};
  ASSERT_EQ(reg(env, d, kMiB, {src}, &recipe), GSWAP_OK);
  drop(env, d);
  ASSERT_EQ(env.launch({d}), CUDA_SUCCESS);
  drop(env, d);
  env.stream = legacy_stream();
  ASSERT_TRUE(env.res.free_region(src, nullptr, false, false));
  EXPECT_EQ(recipe.calls, 2);
  EXPECT_EQ(env.region(d)->recompute, nullptr);
  env.res.drain();
  EXPECT_TRUE(env.holds(d, kMiB, 2));
}

TEST(Recompute, RegistrationsAreValidated) {
  Env env(8 * kMiB);
  CUdeviceptr a = env.alloc(kMiB), b = env.alloc(kMiB), c = env.alloc(kMiB);
  Recipe recipe{&env};
  unsigned long long srcs[9] = {a, a, a, a, a, a, a, a, a};
  Residency& res = env.res;
  EXPECT_EQ(res.register_recompute(b, kMiB, srcs, 1, 0, nullptr, &recipe), GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, 0, srcs, 1, 0, recompute_fn, &recipe), GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, kMiB + 1, srcs, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b + 16, kMiB, srcs, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, kMiB, srcs, 9, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, kMiB, srcs, -1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, kMiB, nullptr, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, kMiB, srcs, 1, -1, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b, kMiB, srcs, 1, 0.0 / 0.0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(0x1000, kMiB, srcs, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);       // not gswap's
  unsigned long long nowhere[1] = {0};  // a source that is no device memory at all
  EXPECT_EQ(res.register_recompute(b, kMiB, nowhere, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  unsigned long long self[1] = {b};
  EXPECT_EQ(res.register_recompute(b, kMiB, self, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  // Two halves, then an overlapping range.
  EXPECT_EQ(res.register_recompute(b, kMiB / 2, srcs, 1, 3.5, recompute_fn, &recipe), GSWAP_OK);
  EXPECT_EQ(res.register_recompute(b + kMiB / 4, kMiB / 2, srcs, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.register_recompute(b + kMiB / 2, kMiB / 2, srcs, 1, 0, recompute_fn, &recipe),
            GSWAP_OK);
  EXPECT_EQ(env.region(a)->dependents, 2u);
  // A cycle: a from b, while b is computed from a.
  unsigned long long from_b[1] = {b};
  EXPECT_EQ(res.register_recompute(a, kMiB, from_b, 1, 0, recompute_fn, &recipe),
            GSWAP_ERROR_INVALID);
  // A partly registered region is swapped when the plan says drop.
  unsigned long long from_a[1] = {a};
  ASSERT_EQ(res.register_recompute(c, kMiB / 2, from_a, 1, 0, recompute_fn, &recipe), GSWAP_OK);
  drop(env, c);
  EXPECT_EQ(env.state(c), kRegionHost);
  // Unregistering names a range by its start.
  EXPECT_EQ(res.unregister_recompute(b + 1), GSWAP_ERROR_INVALID);
  EXPECT_EQ(res.unregister_recompute(b + kMiB / 2), GSWAP_OK);
  EXPECT_EQ(res.unregister_recompute(b), GSWAP_OK);
  EXPECT_EQ(res.unregister_recompute(b), GSWAP_ERROR_INVALID);
  EXPECT_EQ(env.region(b)->recompute, nullptr);
  // Freeing a region ends its registrations (and its sources' dependent counts).
  ASSERT_TRUE(res.free_region(c, nullptr, false, false));
  EXPECT_EQ(env.region(a)->dependents, 0u);
}

}  // namespace
}  // namespace gswap::interpose
