// plan_executor.h: follows gswapd's plan (proto::PlanEntry) on the launch path.
//
// A plan names positions as seq offsets from the start of an iteration, which the executor finds
// itself: the iteration starts at the first launch of the plan's signature (function ids that
// occur only at the start of the planned iteration). Every position carries the function id
// expected there; a mismatch means the program no longer does what was planned: the executor
// stops following the plan for the rest of that iteration (the passive path keeps everything
// correct), counts it and reports it. Regions are named by id (persistent) or bound at their
// first access in each iteration (by position and index among that access's regions).
//
// At each access it does what the plan says for that position: bind a region, start a prefetch
// (before the access is enqueued), note a back-access (whether its restore came in time), and,
// after the access is enqueued, start a planned swap-out. The work itself goes to the swapper
// through residency's lock-free command queue: the launch path never waits, locks or allocates.
//
// Threads: load() runs on telemetry's thread and publishes a compiled plan with one release store
// (older plans are kept until eight newer ones have been loaded, longer than any launch can hold
// one). The launch path calls before()/after() from any thread; the iteration state is owned by
// whichever thread holds a try-lock for the duration of one call; a call that finds it held skips
// the plan for that access (counted), so threads never wait for each other. Accesses up to the
// next planned position skip the try-lock altogether (quiet_below_), so concurrent launches that
// have nothing to do do not contend on it. load() takes the same lock (waiting for the one call
// that may hold it) to carry the regions bound so far in this iteration over to a new plan of the
// same shape (feedback republishes plans mid-iteration).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "interpose/param_scan.h"
#include "interpose/region.h"
#include "proto/wire.h"

namespace gswap::interpose {

// What following a plan does to the world (residency, telemetry); a fake in the unit tests.
class PlanActions {
 public:
  virtual ~PlanActions() = default;
  virtual Region* region_by_id(std::uint64_t id) = 0;  // a live region, or nullptr (telemetry
                                                       // thread, at load)
  // A planned eviction: a swap-out, or a drop to be recomputed (drop: the plan's kRecompute).
  virtual bool evict(Region* r, std::uint64_t id, std::uint64_t tag, bool drop) = 0;
  // A planned prefetch; due: the call number from which its back-access is prepared (~0 when it
  // has none), which orders it against other prefetches and against calls waiting for memory.
  virtual bool prefetch(Region* r, std::uint64_t id, std::uint64_t tag, std::uint64_t due) = 0;
  virtual void lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns,
                        bool missed) = 0;
  virtual void divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                          std::uint64_t got) = 0;
  virtual void iteration_started() {}
};

// A region's plan tag (Region::plan_tag): which entry of which plan last moved it, and how.
namespace plan_tag {
inline constexpr std::uint64_t kEvicted = 1ull << 62;
inline constexpr std::uint64_t kPrefetched = 1ull << 63;
inline std::uint64_t make(std::uint64_t generation, std::uint64_t entry) {
  return ((generation & 0x3fffffffull) << 32) | (entry & 0xffffffffull);
}
inline std::uint64_t key(std::uint64_t tag) {
  return tag & ~(kEvicted | kPrefetched);
}
inline std::uint64_t entry(std::uint64_t tag) {
  return tag & 0xffffffffull;
}
}  // namespace plan_tag

struct PlanCounters {
  std::atomic<std::uint64_t> planned_evictions{0};
  std::atomic<std::uint64_t> prefetches{0};
  std::atomic<std::uint64_t> divergences{0};
  std::atomic<std::uint64_t> guided_iterations{0};
  std::atomic<std::uint64_t> skipped{0};  // accesses that found the executor busy or a queue full
};

class PlanExecutor {
 public:
  explicit PlanExecutor(PlanActions& actions) : actions_(actions) {}
  PlanExecutor(const PlanExecutor&) = delete;
  PlanExecutor& operator=(const PlanExecutor&) = delete;

  // Telemetry thread: a new plan (entries valid during the call). A passive header unloads.
  void load(const proto::PlanHeader& header, const proto::PlanEntry* entries, std::uint32_t n);
  void unload();

  // The mode the library runs in (proto::PlanMode) and the generation it follows.
  std::uint32_t mode() const { return mode_.load(std::memory_order_relaxed); }
  std::uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }
  bool active() const { return mode() != static_cast<std::uint32_t>(proto::PlanMode::kPassive); }

  // Launch path, around one access with sequence number `seq` of function `function` (a kernel's
  // id, or proto::kCopyFunction...). before() returns what after() must do; `measure` tells the
  // caller to time this access (kernel timing while gswapd asks for it).
  struct Step {
    const void* plan = nullptr;  // the plan before() followed (kept alive: see load)
    std::uint32_t evicts = 0;
    std::uint32_t evict_entry[8];
    bool measure = false;
  };
  void before(std::uint64_t seq, std::uint64_t function, const TouchSet& t, Step* step);
  void after(const Step& step);

  const PlanCounters& counters() const { return counters_; }

 private:
  enum ActionKind : std::uint8_t { kBind, kPrefetch, kBack, kEvict };
  struct Action {
    std::uint32_t entry;
    std::uint8_t kind;
    std::uint64_t function;  // expected at this position (0: not checked)
  };
  struct Entry {
    std::uint64_t region_id = 0;  // persistent
    std::uint64_t bind_offset = proto::kNoOffset;
    std::uint32_t bind_slot = 0;
    std::uint64_t back_offset = proto::kNoOffset;  // its back-access
    std::uint16_t back_lead = 0;                   // calls that prepare the back-access
    bool has_trigger = false;
    bool drop = false;  // PlanAction::kRecompute
    std::atomic<Region*> region{nullptr};
    std::atomic<std::uint64_t> id{0};  // the bound region's id (a recycled Region has another)
  };
  struct Compiled {
    std::uint64_t generation = 0;
    std::uint32_t mode = 0;
    std::uint64_t seq_length = 0;
    std::uint32_t measure_every = 0;
    std::uint32_t signature_length = 0;
    std::uint64_t signature[proto::kSignatureLength] = {};
    std::vector<std::uint32_t> first;        // actions at offset o: [first[o], first[o + 1])
    std::vector<std::uint32_t> next_action;  // the first offset >= o with actions, or seq_length
    std::vector<Action> actions;
    std::unique_ptr<Entry[]> entries;
    std::uint32_t num_entries = 0;
  };

  void start_iteration(Compiled& p, std::uint64_t start);
  static std::uint64_t shape_of(const Compiled& p);
  std::uint64_t due_seq(const Compiled& p, const Entry& e, std::uint64_t off) const;
  static void carry_bindings(const Compiled& from, Compiled* to);
  void diverge(Compiled& p, std::uint64_t offset, std::uint64_t expected, std::uint64_t got);

  PlanActions& actions_;
  std::unique_ptr<Compiled> retired_[8];  // telemetry thread
  unsigned next_retired_ = 0;

  // Launches on several threads share this object, so what each launch reads, what planned
  // positions write, and the counters sit on cache lines of their own.

  // Read by every launch; written when a plan is loaded.
  alignas(64) std::atomic<Compiled*> plan_{nullptr};
  std::atomic<std::uint32_t> mode_{0};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> quiet_function_{0};  // the signature's first function

  // What before() may skip without busy_: a launch numbered below quiet_below_ that is not the
  // signature's first function has nothing to do (no planned action at its offset, no signature
  // match under way) but take the measure flag. Written under busy_ after each access; 0 (never
  // skip) when a plan is loaded, which also sets quiet_function_.
  alignas(64) std::atomic<std::uint64_t> quiet_below_{0};
  std::atomic<bool> quiet_measure_{false};

  // Iteration state, owned by the holder of busy_.
  alignas(64) std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  bool in_iteration_ = false;
  bool diverged_ = false;
  bool measuring_ = false;
  std::uint64_t start_ = 0;      // seq of the current iteration's first launch
  std::uint32_t matched_ = 0;    // signature launches matched so far
  std::uint64_t candidate_ = 0;  // seq where the current signature match began
  std::uint64_t iteration_ = 0;
  std::uint64_t shape_ = 0;  // signature and length of the plan the state above belongs to

  alignas(64) PlanCounters counters_;
};

}  // namespace gswap::interpose
