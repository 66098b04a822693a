// identity.cpp: keys regions by (allocation order, size, producing kernel) and matches them.
//
// alloc_order counts only among regions with the same size and producer, so one extra or missing
// allocation elsewhere in the iteration (a logging tensor, a cuDNN workspace that appears once)
// does not shift every later identity.
#include "policy/identity.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace gswap::policy {

std::unordered_map<RegionId, RegionKey> region_keys(const Trace& trace, std::size_t first,
                                                    std::size_t last) {
  std::unordered_map<RegionId, RegionKey> keys;
  if (trace.launches.empty() || first > last) return keys;
  last = std::min(last, trace.launches.size() - 1);
  // Order regions by first touch inside the window, with allocation sequence breaking ties.
  std::unordered_map<RegionId, std::pair<std::size_t, std::string>> first_touch;
  for (std::size_t i = first; i <= last; ++i)
    for (RegionId id : trace.launches[i].regions)
      first_touch.try_emplace(id, i, trace.launches[i].kernel);
  std::unordered_map<RegionId, const Region*> by_id;
  for (const Region& r : trace.regions) by_id.emplace(r.id, &r);
  struct Item {
    Seq alloc_seq;
    std::size_t touch;
    RegionId id;
  };
  std::vector<Item> items;
  for (auto& [id, ft] : first_touch) {
    auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    items.push_back({it->second->alloc_seq, ft.first, id});
  }
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return x.alloc_seq != y.alloc_seq ? x.alloc_seq < y.alloc_seq
                                      : (x.touch != y.touch ? x.touch < y.touch : x.id < y.id);
  });
  std::map<std::pair<std::uint64_t, std::string>, std::uint64_t> counters;
  for (const Item& it : items) {
    const Region& r = *by_id.at(it.id);
    RegionKey k;
    k.bytes = r.bytes;
    k.producer = first_touch.at(it.id).second;
    k.alloc_order = counters[{k.bytes, k.producer}]++;
    keys.emplace(it.id, std::move(k));
  }
  return keys;
}

std::unordered_map<RegionId, RegionId> match_regions(const Trace& prev, std::size_t prev_first,
                                                     std::size_t prev_last, const Trace& next,
                                                     std::size_t next_first,
                                                     std::size_t next_last) {
  auto pk = region_keys(prev, prev_first, prev_last);
  auto nk = region_keys(next, next_first, next_last);
  std::map<std::tuple<std::uint64_t, std::uint64_t, std::string>, RegionId> index;
  for (auto& [id, k] : nk) index.emplace(std::make_tuple(k.alloc_order, k.bytes, k.producer), id);
  std::unordered_map<RegionId, RegionId> out;
  for (auto& [id, k] : pk) {
    auto it = index.find(std::make_tuple(k.alloc_order, k.bytes, k.producer));
    if (it != index.end()) out.emplace(id, it->second);
  }
  return out;
}

}  // namespace gswap::policy
