// identity_test.cpp: regions keep their identity across iterations although their ids change.
#include "policy/identity.h"

#include <gtest/gtest.h>

#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::kMiB;

// One iteration: weights W (persistent), activations A1, A2 (same size, different producers),
// A3 (same size and producer as A1, allocated later). `id_base` shifts every region id, as new
// addresses would.
Trace iteration(RegionId id_base, bool extra_alloc) {
  Trace t;
  t.device = {1ull << 34, 1e10, 1e10};
  auto region = [&](RegionId id, std::uint64_t bytes, Seq alloc) {
    t.regions.push_back({id_base + id, bytes, alloc, std::nullopt, std::nullopt});
  };
  region(1, 8 * kMiB, 0);
  region(2, 4 * kMiB, 0);
  region(3, 4 * kMiB, 1);
  region(4, 4 * kMiB, 2);
  std::vector<Launch> ls = {{0, 0, 1, 0, {id_base + 1, id_base + 2}, "gemm"},
                            {1, 1, 1, 0, {id_base + 2, id_base + 3}, "relu"},
                            {2, 2, 1, 0, {id_base + 1, id_base + 4}, "gemm"}};
  if (extra_alloc) {  // a one-off allocation in the middle must not shift the others
    region(9, 1 * kMiB, 1);
    ls[1].regions.push_back(id_base + 9);
  }
  t.launches = ls;
  return t;
}

TEST(IdentityTest, KeysUseOrderSizeAndProducer) {
  Trace t = iteration(0, false);
  auto k = region_keys(t, 0, 2);
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(k[2].producer, "gemm");
  EXPECT_EQ(k[2].alloc_order, 0u);
  EXPECT_EQ(k[4].producer, "gemm");
  EXPECT_EQ(k[4].alloc_order, 1u);  // second 4 MiB region first written by a gemm
  EXPECT_EQ(k[3].producer, "relu");
  EXPECT_EQ(k[3].alloc_order, 0u);
}

TEST(IdentityTest, MapsRegionsOfOneIterationToTheNext) {
  Trace a = iteration(0, false), b = iteration(100, true);
  auto m = match_regions(a, 0, 2, b, 0, 2);
  ASSERT_EQ(m.size(), 4u);
  for (RegionId id = 1; id <= 4; ++id) EXPECT_EQ(m.at(id), id + 100) << id;
}

TEST(IdentityTest, ChangedSizeBreaksTheMatch) {
  Trace a = iteration(0, false), b = iteration(100, false);
  b.regions[3].bytes = 6 * kMiB;  // region 104 is no longer the same tensor
  auto m = match_regions(a, 0, 2, b, 0, 2);
  EXPECT_EQ(m.count(4), 0u);
  EXPECT_EQ(m.at(2), 102u);
}

}  // namespace
}  // namespace gswap::policy
