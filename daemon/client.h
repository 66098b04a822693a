// client.h: what gswapd knows about one library client: its shared memory, the events decoded
// from its ring, its regions, a bounded window of recent launches, its counters and its detected
// iteration.
//
// Threading: gswapd is single-threaded; the server's poll loop owns every Client. The shared
// memory is also written by the client process, so everything read from it is copied out and
// validated first (the ring through proto/decode.h, the status block through a bounded seqlock
// read).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/plan.h"
#include "policy/trace.h"
#include "proto/decode.h"
#include "proto/ring.h"
#include "proto/wire.h"

namespace gswap::daemon {

struct ClientLimits {
  // Launches kept for detection and trace dump. Freed regions those launches may use are kept
  // too, at most Client::kFreedPerLaunch times as many.
  std::size_t trace_launches = 65536;
  std::size_t timeline_records = 65536;  // swaps and host waits kept for trace dump --timeline
  std::size_t max_regions = 1 << 20;     // live regions before the client is considered hostile
  std::uint32_t ring_capacity = 16384;
  std::uint32_t plan_capacity = 16384;
  // Kernel and region names kept, in bytes (Client::kNameOverhead each besides its text). A
  // PyTorch program names a few thousand kernels, each name cut at 256 bytes by the protocol
  // (1 KiB at most once made printable): a few MiB. Names beyond are ignored.
  std::size_t max_name_bytes = 16 << 20;
};

// Shared memory created by the daemon for one client.
class ClientShm {
 public:
  ClientShm() = default;
  ~ClientShm();
  ClientShm(const ClientShm&) = delete;
  ClientShm& operator=(const ClientShm&) = delete;

  // Creates, sizes, seals (no shrinking: the client cannot make our mapping fault) and maps it.
  bool create(std::uint32_t ring_capacity, std::uint32_t plan_capacity, std::string* error);
  int fd() const { return fd_; }
  std::uint64_t bytes() const { return bytes_; }
  unsigned char* base() const { return base_; }
  const proto::ShmHeader& header() const { return *reinterpret_cast<proto::ShmHeader*>(base_); }

 private:
  int fd_ = -1;
  unsigned char* base_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// A region the program registered as recomputable (gswap.h): the library's announcement.
struct RecomputeInfo {
  std::uint64_t cost_ns = 0;  // the program's hint, 0 when unknown
  std::vector<std::uint64_t> sources;
  std::uint64_t measured_ns = 0;  // the last recomputation's device time, 0 until one ran
};

struct RegionInfo {
  std::uint64_t base = 0;
  std::uint64_t bytes = 0;
  std::uint64_t alloc_seq = 0;
  std::optional<std::uint64_t> free_seq;
  std::optional<RecomputeInfo> recompute;  // kept after the free: traces of past iterations
};

struct LaunchInfo {
  std::uint64_t seq = 0;
  std::uint32_t stream = 0;
  std::uint64_t function_id = 0;
  std::vector<std::uint64_t> regions;
  bool truncated = false;
  std::uint64_t start_ns = 0, duration_ns = 0;  // GPU timing, 0 until reported
  std::uint8_t link = 0;                        // a copy: proto::kCopyLink...
};

// A completed swap copy the library reported (device-axis ns, the kernel timings' axis).
struct SwapRecord {
  std::uint64_t region = 0, bytes = 0, start_ns = 0, end_ns = 0;
  bool to_device = false, planned = false;
};

// An application thread's wait in the library (host CLOCK_MONOTONIC ns).
struct HostWait {
  std::uint64_t seq = 0, start_ns = 0, ns = 0, thread = 0;
};

// The library's memory counters as the daemon read them (host CLOCK_MONOTONIC ns), kept when
// they change, for trace dump --timeline.
struct CounterSample {
  std::uint64_t host_ns = 0, resident = 0, budget = 0, pinned = 0;
};

struct ClientCounters {
  proto::StatusPayload status{};  // the library's own counters (last consistent read)
  std::uint64_t events = 0;
  std::uint64_t launches_seen = 0;
  std::uint64_t evictions = 0, restores = 0, late_restores = 0;
  std::uint64_t stall_events = 0, stall_ns_events = 0;
  std::uint64_t iteration_marks = 0;
  std::uint64_t timings = 0;  // kernel durations received
  std::uint64_t lateness_reports = 0, late_reports = 0, missed_reports = 0;
  std::uint64_t divergences = 0;                             // reported by the library
  std::uint64_t recomputations = 0, recompute_failures = 0;  // kRecomputed events
  // Ignored (ClientLimits, and what a trace may say: policy/trace_json.h), each logged once.
  std::uint64_t timings_refused = 0, names_refused = 0, regions_refused = 0;
  std::uint64_t freed_regions_dropped = 0;  // still used by kept launches, over the cap
};

// The shortest prefix of an iteration's functions (at most proto::kSignatureLength) by which the
// library recognises the iteration's start in a stream of such iterations
// (signature_found_at_start); when none is, proto::kSignatureLength or the whole iteration,
// whichever is shorter.
std::size_t signature_length(const std::vector<std::uint64_t>& functions);

// Whether the library's matcher (proto::match_signature: it counts launches that continue the
// signature and, on a mismatch, starts over at the signature's first function) completes the
// first `length` functions of `functions` only where an iteration starts, in a stream that
// repeats the iteration. A prefix found nowhere else in the iteration can still fail: fwd x7
// then loss is unique in a stream of fwd x12 then loss, but the matcher starting over at the
// eighth fwd never sees it.
bool signature_found_at_start(const std::vector<std::uint64_t>& functions, std::size_t length);

// Where a detected period of `symbols` (the launches' functions) should start so that the library
// finds its start by a short prefix (signature_found_at_start): `phase` itself when it does; else
// the first launch whose function occurs once per period (a loss, an upload, an optimizer step);
// else, where every launch belongs to a block that repeats, the first start of a window of
// proto::kSignatureLength functions found nowhere else in the period (the end of the backward and
// the start of the forward), checked with the matcher; else `phase`. A complete period starts at
// the launch returned.
std::size_t recognisable_phase(const std::vector<std::uint64_t>& symbols, std::size_t phase,
                               std::size_t period);

// One complete iteration with (nearly) every launch timed: what the planner plans from, with
// what the plan needs to name positions the way the library counts them.
struct MeasuredIteration {
  policy::Trace trace;                              // durations, names, measured bandwidth
  std::vector<std::uint64_t> functions;             // per launch: the function id reported
  std::vector<std::vector<std::uint64_t>> regions;  // per launch: region ids as reported
  std::uint64_t first_seq = 0;
  std::uint64_t seq_length = 0;  // seq numbers from this iteration's start to the next's
  double timed_fraction = 0;
  // Whether each direction's bandwidth in trace.device was measured, not the default figure.
  bool h2d_measured = false, d2h_measured = false;
  std::uint64_t token = 0;  // numbers the snapshots of a client
};

// What the daemon last published to a client's plan area.
struct PublishedPlan {
  proto::PlanMode mode = proto::PlanMode::kPassive;
  std::vector<proto::PlanEntry> entries;
  std::uint64_t iteration_length = 0, first_seq = 0, seq_length = 0;
  std::vector<std::uint64_t> signature;
  std::uint32_t measure_every = 0;
};

// Lateness the library reported for one entry of the current plan.
struct EntryLateness {
  std::uint64_t late_ns = 0;  // the largest seen
  std::uint64_t reports = 0, late = 0, missed = 0;
  bool settled = false;  // feedback left its trigger where it is (for this generation)
};

struct IterationInfo {
  std::uint64_t length = 0;     // launches per iteration, 0 = not detected
  std::uint64_t first_seq = 0;  // seq of the first launch of the last complete iteration
  std::uint64_t last_seq = 0;
  double match = 0;
  std::string source;  // "marks" (library iteration marks) or "detected" (period detection)
};

class Client : public proto::EventSink {
 public:
  // Freed regions kept for the launch window, at most this many per launch it holds: programs
  // free about one region per kernel they launch, and the oldest freed go first.
  static constexpr std::size_t kFreedPerLaunch = 2;
  // What a kept name costs besides its text: its map node and string.
  static constexpr std::size_t kNameOverhead = 64;
  // Names being assembled from their chunks, per kind: the library sends a name's chunks one
  // after the other, so more unfinished ones than this means chunks were lost.
  static constexpr std::size_t kMaxPartialNames = 64;
  // The largest region kept (512 GiB, more than any GPU holds) and the slowest link believed
  // (1 MB/s, slower than any PCIe or NVLink): such a region crosses such a link in 5.5e11 us,
  // within what a trace or a plan may say (policy::kMaxTraceTimeUs), and 2^21 of them (more
  // than a client may hold) within policy::kMaxTotalRegionBytes.
  static constexpr std::uint64_t kMaxRegionBytes = std::uint64_t{1} << 39;
  static constexpr std::uint64_t kMinLinkBytesPerS = 1'000'000;

  // `exe` is the name the hello carried, as sent; the client keeps it made printable.
  Client(int fd, pid_t pid, uid_t uid, std::string exe, const ClientLimits& limits);
  ~Client() override;

  // Sets up the shared memory; on failure the client is refused.
  bool init_shm(std::string* error);
  const ClientShm& shm() const { return shm_; }

  // Drains the ring and refreshes counters. Returns false, with *error set, when the client broke
  // the protocol: the caller disconnects it.
  bool poll(std::string* error);

  // Publishes budget and plan in the plan area (seqlock), as a new generation.
  void publish(std::uint64_t budget, PublishedPlan plan);
  void publish_budget(std::uint64_t budget) { publish(budget, published_); }
  const PublishedPlan& published() const { return published_; }

  // Runs period detection over the launch window if enough new launches arrived.
  void maybe_detect_iteration();

  // The last complete iteration as a policy trace; empty (no launches) when none was detected.
  policy::Trace last_iteration_trace(std::uint64_t device_bytes) const;
  // The newest complete iteration with (nearly) every launch timed, once per new one.
  std::optional<MeasuredIteration> take_measured(std::uint64_t device_bytes);
  // Why the last take_measured took nothing (empty once it took one): no iteration found, or
  // the newest complete period not timed enough, or not recurring at its start.
  const std::string& measure_wait() const { return measure_wait_; }
  // When gswapd last logged measure_wait (ms, its own clock).
  std::int64_t& wait_logged_ms() { return wait_logged_ms_; }
  // The snapshot the current plan was made from (empty trace when none).
  const MeasuredIteration& planned_from() const { return planned_from_; }
  // The planner's plan the published entries come from, and which entry each of them is.
  policy::Plan& current_plan() { return current_plan_; }
  std::vector<std::size_t>& entry_of_published() { return entry_of_published_; }
  // Most entries a published plan holds (the plan area's size).
  std::uint32_t plan_capacity() const { return limits_.plan_capacity; }
  void set_planned_from(MeasuredIteration m) { planned_from_ = std::move(m); }
  // Whether a plan for planned_from() is being made (submitted, its result not yet collected).
  bool planning() const { return planning_; }
  // How the last measured iteration drifted from the one planned from (Server::tick's drift
  // codes; 0: it did not).
  int drift() const { return drift_; }
  void set_drift(int d) { drift_ = d; }
  void set_planning(bool p) { planning_ = p; }
  bool feedback_pending() const { return feedback_pending_; }
  void set_feedback_pending(bool p) { feedback_pending_ = p; }
  // The refinement of the plan made from planned_from() (Server::refine): searches that go on
  // from the best plan found, step by step, while time is left.
  struct Refinement {
    std::uint64_t serial = 0;  // bumped by every new plan: a step of an older one is stale
    policy::Plan best;         // the best plan found, and its simulated step
    double best_us = 0;
    double searched_us = 0;   // the simulated step of the search's plan
    double published_us = 0;  // and of the plan last published (the search's or a refined one)
    std::string planner;      // what the search that made the plan said (Client::planner)
    double left_ms = 0;       // search time left
    std::uint64_t seed = 0;   // the next step's
    // The seeds no search of the plan's iteration made yet (policy::SearchResult::seeds_left):
    // the next step makes them.
    std::vector<std::string> seeds_left;
    std::size_t steps = 0, evaluations = 0;
    double spent_ms = 0;
    bool pending = false;  // a step submitted, its result not yet collected
  };
  Refinement& refinement() { return refinement_; }
  const Refinement& refinement() const { return refinement_; }
  // Forgets the refinement (a new plan is made, or none followed): a step under way is stale.
  Refinement& restart_refinement() {
    const std::uint64_t serial = refinement_.serial + 1;
    refinement_ = Refinement();
    refinement_.serial = serial;
    return refinement_;
  }
  // Forgets the launch window (the program changed shape: detect afresh).
  void forget_launches();
  // The most fixed_bytes the library has reported since it connected (small allocations come and
  // go within an iteration), and whether it rose since the last take_fixed_most_rose().
  std::uint64_t fixed_most() const { return fixed_most_; }
  bool take_fixed_most_rose() { return std::exchange(fixed_most_rose_, false); }
  // What plans leave to memory the library cannot move: fixed_most() rounded up, so that it rises
  // seldom (Server::raise_fixed_reserve). Never lowered.
  std::uint64_t fixed_reserve() const { return fixed_reserve_; }
  void set_fixed_reserve(std::uint64_t bytes) { fixed_reserve_ = bytes; }

  // After a plan that moved nothing (everything fitted): whether the library still swaps.
  // arm_idle_watch() when such a plan is published (publish() disarms it); swapped_while_idle()
  // is what the library swapped out since `grace_ms` after that (swaps already under way then
  // still count up), 0 when unarmed.
  void arm_idle_watch(std::int64_t now_ms);
  std::uint64_t swapped_while_idle(std::int64_t now_ms, std::int64_t grace_ms);
  // Times the client was measured again because its plan was made from part of its iteration.
  unsigned remeasures() const { return remeasures_; }
  void count_remeasure() { ++remeasures_; }

  // Plan feedback: lateness per entry of the current generation, and divergences since.
  std::vector<EntryLateness>& lateness() { return lateness_; }
  const std::vector<EntryLateness>& lateness() const { return lateness_; }
  std::uint64_t divergences_since_plan() const { return divergences_since_plan_; }
  // Launches seen since the library last finished an iteration of the plan (its
  // guided_iterations counter moved), or since the plan was published: a program that left the
  // plan once and never comes back to its start diverges only once.
  std::uint64_t launches_off_plan() const { return counters_.launches_seen - launches_at_guided_; }
  // Milliseconds since the library last finished an iteration of the plan, or since the plan was
  // published, as seen at the calls (the server's ticks).
  std::int64_t off_plan_ms(std::int64_t now_ms);
  std::string name_of_kernel(std::uint64_t function_id) const;
  std::string name_of_region(std::uint64_t region_id) const;
  // The recent launch window (oldest first), swaps and host waits, for trace dump --timeline.
  const std::deque<LaunchInfo>& launches() const { return launches_; }
  std::size_t early_timings() const { return early_timings_.size(); }
  const std::deque<SwapRecord>& swaps() const { return swaps_; }
  const std::deque<HostWait>& host_waits() const { return host_waits_; }
  const std::deque<CounterSample>& counter_samples() const { return counter_samples_; }
  // Host ns minus device-axis ns (from the library's clock pair); false until one arrived.
  bool host_minus_device(std::int64_t* offset) const {
    if (!has_clock_) return false;
    *offset = host_minus_device_;
    return true;
  }
  std::uint64_t serial() const { return serial_; }
  void set_serial(std::uint64_t s) { serial_ = s; }

  int fd() const { return fd_; }
  int release_fd() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  pid_t pid() const { return pid_; }
  uid_t uid() const { return uid_; }
  const std::string& exe() const { return exe_; }
  std::uint64_t budget() const { return budget_; }
  const ClientCounters& counters() const { return counters_; }
  const IterationInfo& iteration() const { return iteration_; }
  std::size_t live_regions() const { return live_; }
  // What the client costs gswapd (for tests): the freed regions kept for the launch window; how
  // many freed regions pruning has looked at since it connected (at most two per region freed:
  // the cost per record stays constant); the bytes its names take (ClientLimits::max_name_bytes).
  std::size_t freed_regions() const { return regions_.size() - live_; }
  std::uint64_t prune_visits() const { return prune_visits_; }
  std::size_t name_bytes() const { return name_bytes_; }
  // How many times take_measured has scanned the launch window (for tests: once per change).
  std::uint64_t measure_scans() const { return measure_scans_; }
  // What gswapd warned about this client (each kind once), as logged.
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::vector<proto::PlanEntry>& plan() const { return published_.entries; }
  std::uint64_t plan_generation() const { return generation_; }
  std::int64_t connected_at() const { return connected_at_; }
  // The budget the process asked for itself (GSWAP_BUDGET), 0 when none.
  std::uint64_t requested_budget() const { return requested_budget_; }
  void set_requested_budget(std::uint64_t b) { requested_budget_ = b; }
  // What produced the current plan entries ("none", "capuchin", or why there is no plan).
  const std::string& planner() const { return planner_; }
  void set_planner(std::string p) { planner_ = std::move(p); }

  // EventSink
  void on_alloc(std::uint64_t seq, std::uint32_t stream, std::uint64_t region, std::uint64_t base,
                std::uint64_t bytes) override;
  void on_free(std::uint64_t seq, std::uint64_t region) override;
  void on_launch(std::uint64_t seq, std::uint32_t stream, std::uint64_t function_id,
                 const std::uint64_t* regions, std::uint32_t num_regions, bool truncated) override;
  void on_copy(std::uint64_t seq, std::uint32_t stream, std::uint64_t src, std::uint64_t dst,
               std::uint64_t bytes, std::uint32_t link) override;
  void on_eviction(std::uint64_t seq, std::uint64_t region, std::uint64_t bytes) override;
  void on_restore(std::uint64_t seq, std::uint64_t region, std::uint64_t bytes, bool late) override;
  void on_stall(std::uint64_t seq, std::uint64_t ns) override;
  void on_gpu_timing(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t duration_ns) override;
  void on_iteration_mark(std::uint64_t seq) override;
  void on_name(NameKind kind, std::uint64_t id, std::uint32_t chunk, const char* bytes32,
               bool last) override;
  void on_lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns,
                   bool missed) override;
  void on_divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                     std::uint64_t got) override;
  void on_swap_done(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                    std::uint64_t end_ns, std::uint64_t flags) override;
  void on_clock(std::uint64_t device_ns, std::uint64_t host_ns) override;
  void on_host_wait(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t ns,
                    std::uint64_t thread) override;
  void on_recomputable(std::uint64_t region, std::uint64_t cost_ns, const std::uint64_t* sources,
                       std::uint32_t num_sources) override;
  void on_not_recomputable(std::uint64_t region) override;
  void on_recomputed(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                     std::uint64_t end_ns, bool failed) override;

  // Recomputations the library ran (device ns on the kernel axis), for trace dump --timeline.
  struct RecomputeRecord {
    std::uint64_t region = 0, bytes = 0, start_ns = 0, end_ns = 0;
    bool failed = false;
  };
  const std::deque<RecomputeRecord>& recomputations() const { return recomputations_; }

 private:
  using RegionMap = std::unordered_map<std::uint64_t, RegionInfo>;
  using NameMap = std::unordered_map<std::uint64_t, std::string>;
  void prune_freed();
  void erase_region(RegionMap::iterator it);
  void keep_name(NameMap& names, std::uint64_t id, std::string text);
  void forget_name(NameMap& names, std::uint64_t id);
  void ignore_impossible_link(proto::StatusPayload* st);
  // Kinds of warning, each logged once per client.
  enum Warning : unsigned {
    kWarnFreedRegions = 1,
    kWarnNames = 2,
    kWarnTimings = 4,
    kWarnLink = 8,
    kWarnRegionBytes = 16,
    kWarnRecomputeCost = 32,
    kWarnLaunchSeq = 64,
    kWarnIterationLength = 128,
  };
  void warn_once(Warning kind, std::string text);
  void sample_counters();
  void build_iteration(std::size_t begin, std::size_t end, std::uint64_t device_bytes,
                       MeasuredIteration* m) const;
  void estimate_untimed(std::size_t begin, MeasuredIteration* m) const;
  bool start_recurs(std::size_t begin, std::size_t length) const;

  // Declared first, so destroyed last: hands the memory the other members held back to the system.
  struct ReturnMemory {
    ~ReturnMemory();
  } return_memory_;
  int fd_;
  pid_t pid_;
  uid_t uid_;
  std::string exe_;
  ClientLimits limits_;
  ClientShm shm_;
  proto::RingConsumer ring_;
  proto::StatusBlock* status_ = nullptr;
  proto::PlanBlock* plan_block_ = nullptr;
  std::vector<proto::EventRecord> scratch_;
  RegionMap regions_;  // live and recently freed
  std::size_t live_ = 0;
  // Freed regions kept, as (free seq, id), in the order they were freed; entries whose region
  // was dropped or allocated again since are skipped when they come out.
  std::deque<std::pair<std::uint64_t, std::uint64_t>> freed_;
  std::uint64_t prune_visits_ = 0;
  std::deque<LaunchInfo> launches_;       // in seq order (but see on_launch)
  std::uint64_t dropped_before_seq_ = 0;  // 1 + the newest seq the window let go of (0: none)
  static constexpr std::size_t kMaxReorder = 4096;
  // Launches moved in the window by launches put back in seq order, per drain (poll).
  static constexpr std::size_t kMaxReorderMoves = std::size_t{1} << 20;
  std::size_t reorder_moves_ = 0;
  // Periods take_measured looks at in one scan, newest first.
  static constexpr std::size_t kMaxMeasureCandidates = 256;
  // Timings that came before their launch (on_gpu_timing), by seq: (start, duration).
  static constexpr std::size_t kMaxEarlyTimings = 16384;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> early_timings_;
  // The last copy record: the library sends it just before the copy's launch record.
  std::uint64_t copy_seq_ = ~0ull;
  std::uint32_t copy_link_ = 0;
  std::deque<std::uint64_t> marks_;  // seqs of recent iteration marks
  std::size_t launches_since_detect_ = 0;
  std::string protocol_error_;
  ClientCounters counters_;
  IterationInfo iteration_;
  std::uint64_t budget_ = 0;
  std::uint64_t generation_ = 0;
  PublishedPlan published_;
  MeasuredIteration planned_from_;
  std::string measure_wait_;
  std::int64_t wait_logged_ms_ = 0;
  bool planning_ = false;
  int drift_ = 0;
  bool feedback_pending_ = false;
  Refinement refinement_;
  std::uint64_t fixed_most_ = 0;
  bool fixed_most_rose_ = false;
  std::uint64_t fixed_reserve_ = 0;
  bool idle_armed_ = false;
  std::int64_t idle_since_ms_ = 0;
  std::uint64_t idle_swapped_out_ = 0;
  unsigned remeasures_ = 0;
  policy::Plan current_plan_;
  std::vector<std::size_t> entry_of_published_;
  std::uint64_t measured_token_ = 0;
  std::uint64_t measured_first_seq_ = ~0ull;  // the last snapshot taken
  // Bumped by whatever take_measured reads (a launch, a timing, the iteration, the window
  // cleared); take_measured scans the window only when it moved since its last scan, so a client
  // whose iteration cannot be measured costs nothing per tick beyond its new records.
  std::uint64_t window_changes_ = 0, scanned_changes_ = ~0ull, measure_scans_ = 0;
  std::vector<EntryLateness> lateness_;
  std::uint64_t divergences_since_plan_ = 0;
  std::uint64_t guided_seen_ = 0, launches_at_guided_ = 0;  // launches_off_plan()
  // off_plan_ms(): what it saw last, and since when.
  std::uint64_t off_plan_guided_ = ~0ull, off_plan_generation_ = ~0ull;
  std::int64_t off_plan_since_ms_ = 0;
  // Names arrive in chunks and are assembled raw in partial_*; they enter kernel_names_ or
  // region_names_ made printable (untrusted_text.h) once their last chunk has arrived, since a
  // character may straddle two chunks.
  NameMap kernel_names_, region_names_;
  NameMap partial_kernel_names_, partial_region_names_;
  std::size_t name_bytes_ = 0;  // of kernel_names_ and region_names_, kNameOverhead each
  unsigned warned_ = 0;         // Warning bits
  std::vector<std::string> warnings_;
  std::uint64_t serial_ = 0;
  std::int64_t connected_at_ = 0;
  std::uint64_t requested_budget_ = 0;
  std::string planner_ = "none";
  std::deque<SwapRecord> swaps_;
  std::deque<HostWait> host_waits_;
  std::deque<CounterSample> counter_samples_;
  std::deque<RecomputeRecord> recomputations_;
  bool has_clock_ = false;
  std::int64_t host_minus_device_ = 0;
};

}  // namespace gswap::daemon
