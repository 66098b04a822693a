// param_scan_test.cpp: which regions a launch's parameter bytes name.
#include "interpose/param_scan.h"

#include <gtest/gtest.h>

#include <cstddef>

namespace gswap::interpose {
namespace {

constexpr std::uint64_t kBase = 0x7e0000000000ull;
constexpr unsigned kShift = 16;
constexpr std::uint64_t kGran = 1ull << kShift;

class ParamScan : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(map.init(kBase, 1024 * kGran, kShift));
    map.set(kBase, kGran, &a);
    map.set(kBase + 4 * kGran, 2 * kGran, &b);
    map.set(kBase + 10 * kGran, kGran, &c);
  }
  RegionMap map;
  Region a, b, c;
};

TEST_F(ParamScan, KernelParamsIncludingStructsAndInteriorPointers) {
  // (float* x, int n, struct { int k; double* y; double* z; } s, float alpha)
  struct S {
    int k;
    std::uint64_t y;
    std::uint64_t z;
  };
  std::uint64_t x = kBase + 100;  // interior of a
  int n = 7;
  S s{3, kBase + 5 * kGran + 8, kBase + 4 * kGran};  // both in b
  float alpha = 1.0f;
  void* params[] = {&x, &n, &s, &alpha};
  std::uint32_t offsets[] = {0, 8, 16, 40};
  std::uint32_t sizes[] = {8, 4, sizeof(S), 4};
  ParamLayout layout{4, offsets, sizes};
  TouchSet t;
  scan_kernel_params(map, layout, params, &t);
  ASSERT_EQ(t.n, 2u);
  EXPECT_EQ(t.regions[0], &a);
  EXPECT_EQ(t.regions[1], &b);
  EXPECT_FALSE(t.overflow);
}

TEST_F(ParamScan, NonPointersAreIgnored) {
  std::uint64_t v = 42, w = kBase + 2 * kGran;  // a gap between regions
  void* params[] = {&v, &w};
  std::uint32_t offsets[] = {0, 8};
  std::uint32_t sizes[] = {8, 8};
  TouchSet t;
  scan_kernel_params(map, ParamLayout{2, offsets, sizes}, params, &t);
  EXPECT_EQ(t.n, 0u);
}

TEST_F(ParamScan, ExtraBufferIsScanned) {
  std::uint64_t buf[3] = {5, kBase + 10 * kGran + 64, kBase};
  std::size_t size = sizeof buf;
  void* extra[] = {reinterpret_cast<void*>(0x01), buf, reinterpret_cast<void*>(0x02), &size,
                   nullptr};
  TouchSet t;
  ASSERT_TRUE(scan_extra(map, extra, &t));
  ASSERT_EQ(t.n, 2u);
  EXPECT_EQ(t.regions[0], &c);
  EXPECT_EQ(t.regions[1], &a);
}

// Arrays the driver refuses: no size, a null size pointer, no buffer for a size, a key it does
// not know (nothing says whether a value follows it).
TEST_F(ParamScan, ExtraArraysTheDriverRefusesAreNotScanned) {
  std::uint64_t buf[1] = {kBase};
  std::size_t size = sizeof buf;
  void* const kPtr = reinterpret_cast<void*>(0x01);
  void* const kSize = reinterpret_cast<void*>(0x02);
  void* no_size[] = {kPtr, buf, nullptr};
  void* null_size[] = {kPtr, buf, kSize, nullptr, nullptr};
  void* no_buffer[] = {kSize, &size, nullptr};
  void* unknown_key[] = {kPtr, buf, reinterpret_cast<void*>(0x07), buf, kSize, &size, nullptr};
  for (void** extra : {no_size, null_size, no_buffer, unknown_key}) {
    TouchSet t;
    EXPECT_FALSE(scan_extra(map, extra, &t));
  }
  std::size_t zero = 0;
  void* empty_buffer[] = {kSize, &zero, nullptr};  // a kernel without parameters
  TouchSet t;
  EXPECT_TRUE(scan_extra(map, empty_buffer, &t));
  EXPECT_EQ(t.n, 0u);
}

TEST_F(ParamScan, RangesLookUpBothEndsAndDeduplicate) {
  TouchSet t;
  t.add_range(map, kBase + 4 * kGran + 10, kGran);  // inside b only
  t.add_range(map, kBase + 4 * kGran, 2 * kGran);
  t.add_range(map, kBase + 7 * kGran, 0);  // empty range touches nothing
  ASSERT_EQ(t.n, 1u);
  EXPECT_EQ(t.regions[0], &b);
}

// Residency lays regions out with one guard granule after each, assigned to the region before
// it in the map (residency.cpp, alloc_region): a one-past-the-end pointer then names the region it
// ends and never the next one, whose base is a granule further on.
TEST(ParamScanEnd, OnePastTheEndNamesTheRegionEndingThere) {
  RegionMap map;
  ASSERT_TRUE(map.init(kBase, 1024 * kGran, kShift));
  // a: exactly two granules, then its guard, then b; c: not a multiple of the granularity.
  Region a, b, c;
  a.base = kBase, a.size = 2 * kGran;
  b.base = kBase + 3 * kGran, b.size = kGran;
  c.base = kBase + 8 * kGran, c.size = kGran - 256;
  for (Region* r : {&a, &b, &c})
    map.set(r->base, ((r->size + kGran - 1) & ~(kGran - 1)) + kGran, r);

  auto scan = [&](std::uint64_t w) {
    TouchSet t;
    scan_bytes(map, &w, 8, &t);
    return t;
  };
  // a's end lies in its guard: a alone.
  TouchSet t = scan(kBase + 2 * kGran);
  ASSERT_EQ(t.n, 1u);
  EXPECT_EQ(t.regions[0], &a);
  // b's base names b alone, not a before it.
  t = scan(kBase + 3 * kGran);
  ASSERT_EQ(t.n, 1u);
  EXPECT_EQ(t.regions[0], &b);
  // b's end: b.
  t = scan(kBase + 4 * kGran);
  ASSERT_EQ(t.n, 1u);
  EXPECT_EQ(t.regions[0], &b);
  // c's end is inside its last granule; past its guard nothing is named.
  t = scan(kBase + 9 * kGran - 256);
  ASSERT_EQ(t.n, 1u);
  EXPECT_EQ(t.regions[0], &c);
  EXPECT_EQ(scan(kBase + 10 * kGran).n, 0u);
  // Words outside the reservation name nothing.
  EXPECT_EQ(scan(kBase - kGran).n, 0u);
  EXPECT_EQ(scan(kBase + 1025 * kGran).n, 0u);
  EXPECT_EQ(scan(0).n, 0u);
}

TEST(TouchSet, HoldsMoreRegionsThanItsInlineCapacity) {
  TouchSet t;
  static Region many[5 * TouchSet::kCapacity + 3];
  for (int pass = 0; pass < 2; ++pass)  // the second pass adds nothing new
    for (auto& r : many) t.add(&r);
  ASSERT_EQ(t.n, std::size(many));
  EXPECT_FALSE(t.overflow);
  for (std::size_t i = 0; i < t.n; ++i) EXPECT_EQ(t.regions[i], &many[i]);
  TouchSet copy = t;  // a copy owns its own list
  t.add(&many[0]);
  ASSERT_EQ(copy.n, t.n);
  for (std::size_t i = 0; i < copy.n; ++i) EXPECT_EQ(copy.regions[i], &many[i]);
  TouchSet small;
  small.add(&many[1]);
  copy = small;
  ASSERT_EQ(copy.n, 1u);
  EXPECT_EQ(copy.regions[0], &many[1]);
}

}  // namespace
}  // namespace gswap::interpose
