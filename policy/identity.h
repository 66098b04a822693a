// identity.h: stable region identity across iterations. Device addresses (and so region ids)
// change from one iteration to the next; what a framework does not change is the order in which
// it allocates within an iteration, the sizes, and which kernel first writes each allocation.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/trace.h"

namespace gswap::policy {

struct RegionKey {
  std::uint64_t alloc_order = 0;  // rank among the iteration's allocations with this size/producer
  std::uint64_t bytes = 0;
  std::string producer;  // kernel of the first launch in the iteration that touches the region
  bool operator==(const RegionKey&) const = default;
};

// Keys of the regions touched or allocated within launches [first, last] (positions in
// trace.launches), keyed by region id.
std::unordered_map<RegionId, RegionKey> region_keys(const Trace& trace, std::size_t first,
                                                    std::size_t last);

// Maps region ids of iteration k to region ids of iteration k+1 (both given as launch position
// ranges, possibly of different traces). Regions with no counterpart are left out.
std::unordered_map<RegionId, RegionId> match_regions(const Trace& prev, std::size_t prev_first,
                                                     std::size_t prev_last, const Trace& next,
                                                     std::size_t next_first, std::size_t next_last);

}  // namespace gswap::policy
