// wire.h: the gswap wire format between libgswap.so and gswapd, in one header.
//
// Everything here is fixed-width and trivially copyable, with static_asserts on sizes and offsets,
// because the same bytes are read by two processes that may have been built at different times.
// Both sides re-validate every header field they read; neither trusts the other's sizes.
//
// Protocol version rule: bump kProtocolVersion whenever any struct in proto/wire.h, proto/ring.h or
// proto/seqlock.h changes size, layout or meaning, or a new EventType changes how an old one is
// read. Adding a new EventType that old daemons may safely reject also bumps it (old daemons
// disconnect clients that send unknown types). Reserved fields must be written as zero and are
// ignored on read, so giving a reserved field a meaning whose zero value means "absent" does not
// need a bump. Both sides refuse a peer whose version differs, with a message both log.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gswap::proto {

inline constexpr std::uint32_t kProtocolVersion = 4;

// Magic numbers: ASCII tags, so a hexdump says what it is.
inline constexpr std::uint32_t kHelloMagic = 0x48575347;        // "GSWH" little-endian
inline constexpr std::uint32_t kReplyMagic = 0x52575347;        // "GSWR"
inline constexpr std::uint64_t kShmMagic = 0x314D485350415753;  // "SWAPSHM1"

// ---------------------------------------------------------------------------------------------
// Handshake (over the Unix SOCK_SEQPACKET socket, one message each way).

enum class PeerKind : std::uint32_t {
  kLibrary = 1,  // a training process: gets a shared-memory region
  kControl = 2,  // gswapctl: exchanges JSON requests and responses
};

struct Hello {
  std::uint32_t magic;    // kHelloMagic
  std::uint32_t version;  // kProtocolVersion
  std::uint32_t kind;     // PeerKind
  std::int32_t pid;
  std::uint8_t gpu_uuid[16];  // the GPU the client uses (CUuuid bytes); ignored for kControl
  std::uint64_t device_total_bytes;
  std::uint64_t requested_budget_bytes;  // the client's own budget (GSWAP_BUDGET), 0 = none
  char exe[64];                          // executable name, NUL-padded (need not be terminated)
  std::uint64_t reserved[4];
};
static_assert(std::is_trivially_copyable_v<Hello>);
static_assert(sizeof(Hello) == 144);
static_assert(offsetof(Hello, gpu_uuid) == 16);
static_assert(offsetof(Hello, exe) == 48);

enum class HelloStatus : std::int32_t {
  kOk = 0,
  kBadMagic = 1,
  kBadVersion = 2,
  kWrongGpu = 3,
  kBadPid = 4,
  kNotAllowed = 5,  // SO_PEERCRED uid/gid not allowed
  kBadSize = 6,
  kBadKind = 7,
  kFull = 8,  // too many clients
};

struct HelloReply {
  std::uint32_t magic;    // kReplyMagic
  std::uint32_t version;  // the daemon's kProtocolVersion (even when refusing)
  std::int32_t status;    // HelloStatus
  std::uint32_t reserved0;
  std::uint64_t shm_bytes;  // size of the memfd passed with this message (kOk, kLibrary only)
  char message[112];        // NUL-terminated human-readable reason
};
static_assert(std::is_trivially_copyable_v<HelloReply>);
static_assert(sizeof(HelloReply) == 136);
static_assert(offsetof(HelloReply, message) == 24);

// Short name of a status, for logs on both sides.
const char* hello_status_name(HelloStatus status);

// Checks a Hello received as `len` untrusted bytes against what the daemon expects. Returns kOk
// or the reason for refusal: kBadVersion for a hello of another version (of any size), else
// kBadSize for any other message that is not sizeof(Hello) bytes, then the fields in order.
// `*hello` is filled whenever len == sizeof(Hello).
HelloStatus check_hello(const void* bytes, std::size_t len, const std::uint8_t expected_uuid[16],
                        Hello* hello);

// ---------------------------------------------------------------------------------------------
// Events (ring records). Every record is 64 bytes: a 24-byte head and five 64-bit words.

enum class EventType : std::uint16_t {
  kAlloc = 1,           // w0 region id, w1 base address, w2 bytes
  kFree = 2,            // w0 region id
  kLaunch = 3,          // w0 function id, w1..w4 region ids; count = regions in the whole launch
  kLaunchMore = 4,      // continuation of the previous kLaunch: w0..w4 region ids
  kCopy = 5,            // w0 src region, w1 dst region, w2 bytes (region 0: not a region),
                        // w3 the link it crosses (kCopyLink...)
  kEviction = 6,        // w0 region id, w1 bytes
  kRestore = 7,         // w0 region id, w1 bytes, w2 late (0/1)
  kStall = 8,           // w0 nanoseconds
  kGpuTiming = 9,       // w0 start ns, w1 duration ns (of the launch with this seq)
  kIterationMark = 10,  // the iteration boundary is at seq
  kKernelName = 11,     // w0 function id, w1..w4 bytes [32*count, 32*count+32) of its name;
                        // flags kLastChunk on the last chunk (names are cut at kMaxNameChunks)
  kRegionName = 12,     // w0 region id, w1..w4 a chunk of the name it was given, as kKernelName
  kLateness = 13,       // w0 plan generation, w1 entry index, w2 ns its restore was late at the
                        // back-access (0: on time), w3 1 when it was not restored by the plan at
                        // all (brought back on demand)
  kDivergence = 14,     // w0 plan generation, w1 seq offset in the iteration, w2 function id the
                        // plan expected there, w3 the one launched
  kSwapDone = 15,       // a completed swap copy: w0 region id, w1 bytes, w2 start and w3 end in
                        // device ns (the kernel-timing axis), w4 kSwapToDevice | kSwapPlanned
  kClock = 16,          // w0 device ns that corresponds to w1 host (CLOCK_MONOTONIC) ns
  kRecomputable = 17,   // w0 region id, w1 cost hint ns (0: unknown, measure it), w2..w4 its first
                        // sources; count = sources in all (<= kMaxRecomputeSources)
  kRecomputableMore = 18,  // continuation of kRecomputable when count > 3: w0..w4 sources 3..7
  kNotRecomputable = 19,   // w0 region id: its registration ended
  kRecomputed = 20,        // w0 region id, w1 bytes, w2 start and w3 end in device ns (both 0: not
                           // timed), w4 kRecomputeFailed when the callback failed (host copy used)
};
inline constexpr std::uint16_t kMaxEventType = 20;
inline constexpr std::uint32_t kMaxRecomputeSources = 8;
inline constexpr std::uint32_t kRecomputableInlineSources = 3;
inline constexpr std::uint64_t kRecomputeFailed = 1;

// kSwapDone flags (w4).
inline constexpr std::uint64_t kSwapToDevice = 1;  // a restore (else a swap-out)
inline constexpr std::uint64_t kSwapPlanned = 2;   // started by the plan (else on demand)

// kCopy w3: the link a copy crosses. Memsets, device-to-device and array copies cross none; a
// copy through unified addresses is counted by the sides the program named.
inline constexpr std::uint64_t kCopyLinkNone = 0;
inline constexpr std::uint64_t kCopyLinkToDevice = 1;  // host to device
inline constexpr std::uint64_t kCopyLinkToHost = 2;    // device to host

// kStall: w0 nanoseconds the call waited, w1 its start (host ns), w2 the thread's id.

// Flags in EventRecord::flags of name chunks.
inline constexpr std::uint16_t kLastChunk = 1;
inline constexpr std::uint32_t kMaxNameChunks = 8;  // names are cut at 256 bytes

// Function ids of the accesses that are not kernels (kLaunch records for copies, memsets and
// batch/stream memory operations; kernel ids are odd: a handle | 1).
inline constexpr std::uint64_t kCopyFunction = 2;
inline constexpr std::uint64_t kMemsetFunction = 4;
inline constexpr std::uint64_t kMemOpFunction = 6;

// Flags in EventRecord::flags.
inline constexpr std::uint16_t kLaunchTruncated =
    1;  // kLaunch: more regions than kMaxLaunchRegions

inline constexpr std::uint32_t kLaunchInlineRegions = 4;
inline constexpr std::uint32_t kLaunchMoreRegions = 5;
// A launch is at most one kLaunch and kMaxLaunchMore continuations; more regions set the
// truncated flag (the daemon then treats the launch's touched set as incomplete).
inline constexpr std::uint32_t kMaxLaunchMore = 15;
inline constexpr std::uint32_t kMaxLaunchRegions =
    kLaunchInlineRegions + kMaxLaunchMore * kLaunchMoreRegions;  // 79
inline constexpr std::uint32_t kMaxGroupRecords = 1 + kMaxLaunchMore;

struct EventRecord {
  std::uint16_t type;   // EventType
  std::uint16_t flags;  // kLaunchTruncated; other bits reserved (zero)
  std::uint16_t count;  // kLaunch: regions in the launch; kLaunchMore: ids used in this record
  std::uint16_t reserved0;
  std::uint32_t stream;
  std::uint32_t reserved1;
  std::uint64_t seq;
  std::uint64_t w[5];
};
static_assert(std::is_trivially_copyable_v<EventRecord>);
static_assert(sizeof(EventRecord) == 64);
static_assert(offsetof(EventRecord, stream) == 8);
static_assert(offsetof(EventRecord, seq) == 16);
static_assert(offsetof(EventRecord, w) == 24);

// Records a kLaunch with n regions occupies (1 + continuations).
constexpr std::uint32_t launch_records(std::uint32_t num_regions) {
  std::uint32_t n = num_regions > kMaxLaunchRegions ? kMaxLaunchRegions : num_regions;
  return n <= kLaunchInlineRegions
             ? 1
             : 1 + (n - kLaunchInlineRegions + kLaunchMoreRegions - 1) / kLaunchMoreRegions;
}

// ---------------------------------------------------------------------------------------------
// Shared memory: created by the daemon as a memfd, sized and laid out by it, mapped by both.
//
//   [ShmHeader 256 B][RingControl 128 B][ring records][StatusBlock][PlanBlock + entries]
//
// Writers: the library writes RingControl::head, the records and StatusBlock; the daemon writes
// RingControl::tail, the header (once, before passing the fd) and PlanBlock.

struct ShmHeader {
  std::uint64_t magic;  // kShmMagic
  std::uint32_t version;
  std::uint32_t header_bytes;  // sizeof(ShmHeader)
  std::uint64_t total_bytes;
  std::uint64_t ring_control_offset;
  std::uint64_t ring_offset;
  std::uint32_t ring_capacity;  // records, a power of two
  std::uint32_t record_bytes;   // sizeof(EventRecord)
  std::uint64_t status_offset;
  std::uint32_t status_bytes;  // sizeof(StatusBlock)
  std::uint32_t reserved0;
  std::uint64_t plan_offset;
  std::uint32_t plan_bytes;     // sizeof(PlanBlock) + plan_capacity * sizeof(PlanEntry)
  std::uint32_t plan_capacity;  // entries
  std::uint64_t reserved[22];
};
static_assert(std::is_trivially_copyable_v<ShmHeader>);
static_assert(sizeof(ShmHeader) == 256);
static_assert(offsetof(ShmHeader, ring_offset) == 32);
static_assert(offsetof(ShmHeader, plan_offset) == 64);

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free (no libc locks in shared memory)");

struct RingControl {
  alignas(64) std::atomic<std::uint64_t> head;  // written by the producer (library)
  char pad0[56];
  alignas(64) std::atomic<std::uint64_t> tail;  // written by the consumer (daemon)
  char pad1[56];
};
static_assert(sizeof(RingControl) == 128);
static_assert(offsetof(RingControl, tail) == 64);

enum class PlanMode : std::uint32_t {
  kPassive = 0,  // no plan: the library keeps within its budget on demand
  kMeasure = 1,  // time every launch (kGpuTiming) so the daemon can plan with real durations
  kGuided = 2,   // follow the plan's entries (and time one iteration in measure_every)
};

// Counters the library publishes (seqlock payload). Field order is the wire order.
enum class TimingSource : std::uint64_t { kEvents = 0, kCupti = 1 };

struct StatusPayload {
  std::uint64_t budget;
  std::uint64_t resident;
  std::uint64_t peak_resident;
  std::uint64_t swapped_out;
  std::uint64_t swapped_in;
  std::uint64_t stalls;
  std::uint64_t stall_ns;  // host time calls waited in gswap, summed over threads
  std::uint64_t pinned;
  std::uint64_t regions;
  std::uint64_t launches;
  std::uint64_t dropped_events;     // events the library dropped (staging or ring full, no daemon)
  std::uint64_t applied_budget;     // the daemon budget the library last applied
  std::uint64_t mode;               // PlanMode the library runs in
  std::uint64_t plan_generation;    // the plan it follows (0: none)
  std::uint64_t planned_evictions;  // swap-outs started by the plan
  std::uint64_t prefetches;         // restores started at planned triggers
  std::uint64_t late_restores;      // planned restores still in flight at their back-access
  std::uint64_t divergences;        // iterations in which the plan stopped matching
  std::uint64_t device_stall_ns;    // time streams waited on the device for gswap's restores
  std::uint64_t h2d_bytes_per_s;    // measured on gswap's own copies (0: not yet)
  std::uint64_t d2h_bytes_per_s;
  std::uint64_t guided_iterations;  // iterations followed to their end
  std::uint64_t fixed_bytes;        // device memory plans cannot move or do not see (small
                                    // allocations, regions that must stay, the rounding of
                                    // regions to the granularity): the planner plans around it
  std::uint64_t planned_drops;      // regions the plan dropped to be recomputed
  std::uint64_t recomputes;         // recomputations run (callbacks called)
  std::uint64_t recomputed_bytes;
  std::uint64_t recompute_ns;        // their device time, as measured
  std::uint64_t recompute_failures;  // callbacks that failed (the host copy was used)
  // Words that were reserved (0 from a library before them): device timings not taken for want
  // of an event or queue slot, or lost by CUPTI; and what times measured accesses.
  std::uint64_t timing_skips;
  std::uint64_t timing_source;  // TimingSource
  std::uint64_t reserved[2];
};
static_assert(std::is_trivially_copyable_v<StatusPayload>);
static_assert(sizeof(StatusPayload) == 256);
static_assert(offsetof(StatusPayload, mode) == 96);
inline constexpr std::size_t kStatusWords = sizeof(StatusPayload) / 8;

struct StatusBlock {
  std::atomic<std::uint64_t> seq;  // seqlock: odd while the library writes
  std::atomic<std::uint64_t> words[kStatusWords];
};
static_assert(sizeof(StatusBlock) == 8 + sizeof(StatusPayload));

inline constexpr std::uint32_t kSignatureLength = 16;
inline constexpr std::uint64_t kNoOffset = ~std::uint64_t{0};

// How the library finds `signature` in its launches, one launch at a time: `matched` counts the
// signature's launches seen in a row; on a mismatch it starts over (at one when the launch is the
// signature's first function). True when this launch begins the match under way. The library
// follows plans with it (plan_executor.cpp) and gswapd chooses signatures it completes only where
// an iteration starts (daemon/client.cpp).
inline bool match_signature(const std::uint64_t* signature, std::uint32_t* matched,
                            std::uint64_t function) {
  if (function == signature[*matched]) return ++*matched == 1;
  *matched = function == signature[0] ? 1 : 0;
  return true;
}

// Positions in a plan are seq offsets from the start of an iteration: the library numbers every
// allocation, free and access while a daemon records or a plan is followed, and an iteration
// starts at the first launch of `signature` (the function ids of its first signature_len
// launches, a sequence the daemon chose because match_signature completes it only there).
struct PlanHeader {
  std::uint64_t generation;           // bumped by the daemon on every publish
  std::uint64_t budget_bytes;         // this client's share of the GPU budget
  std::uint32_t mode;                 // PlanMode
  std::uint32_t num_entries;          // valid PlanEntry records (<= plan_capacity)
  std::uint64_t iteration_length;     // launches per detected iteration, 0 = none
  std::uint64_t iteration_first_seq;  // where the planned iteration started (informational)
  std::uint64_t seq_length;           // the iteration's length in seq numbers
  std::uint32_t signature_length;     // valid words of signature (1..kSignatureLength)
  std::uint32_t measure_every;        // guided: time one iteration in this many (0: never)
  std::uint64_t signature[kSignatureLength];
  std::uint64_t reserved[1];
};
static_assert(std::is_trivially_copyable_v<PlanHeader>);
static_assert(sizeof(PlanHeader) == 192);
static_assert(offsetof(PlanHeader, signature) == 56);
inline constexpr std::size_t kPlanHeaderWords = sizeof(PlanHeader) / 8;

enum class PlanAction : std::uint16_t { kSwap = 1, kRecompute = 2 };

// One planned eviction and its return. The region is named either by id (a region alive across
// iterations: weights, optimiser state) or, for one allocated anew every iteration, by an access
// to it (its first from the signature's last launch on, where the library knows the iteration has
// begun): bind_offset, and its index among that access's regions (the order the library reports
// them in). Every position carries the function id expected there;
// a mismatch means the program no longer does what was planned.
struct PlanEntry {
  std::uint64_t region_id;    // persistent region, 0 for a per-iteration one
  std::uint64_t bind_offset;  // per-iteration: the seq offset of the access binding it
  std::uint32_t bind_slot;    // per-iteration: its index among that access's regions
  std::uint16_t action;       // PlanAction
  // Calls (allocations, frees) between the launch before the back-access and the back-access:
  // they prepare the back-access, so a prefetch does not make them wait for memory.
  std::uint16_t back_lead;
  std::uint64_t evict_after;  // seq offset of the access after which it leaves
  std::uint64_t evict_function;
  std::uint64_t trigger;  // seq offset of the access before which its restore starts
                          // (kNoOffset: brought back on demand)
  std::uint64_t trigger_function;
  std::uint64_t back_access;  // seq offset of the access that needs it back (kNoOffset: none)
};
static_assert(std::is_trivially_copyable_v<PlanEntry>);
static_assert(sizeof(PlanEntry) == 64);
inline constexpr std::size_t kPlanEntryWords = sizeof(PlanEntry) / 8;

struct PlanBlock {
  std::atomic<std::uint64_t> seq;  // seqlock: odd while the daemon writes
  // Followed by kPlanHeaderWords + plan_capacity * kPlanEntryWords atomic words.
};

// The layout the daemon uses; the library validates whatever it receives instead of assuming it.
struct Layout {
  std::uint64_t ring_control_offset, ring_offset, status_offset, plan_offset, total_bytes;
  std::uint32_t ring_capacity, plan_capacity, plan_bytes;
};
Layout make_layout(std::uint32_t ring_capacity, std::uint32_t plan_capacity);

// Validates a header read from `mapped_bytes` of shared memory: magic, version, sizes, that every
// area lies inside the mapping, is 64-byte aligned and does not overlap another. Returns nullptr
// when valid, else a static description of the first problem.
const char* validate_shm_header(const ShmHeader& header, std::uint64_t mapped_bytes);

// Formats a 16-byte GPU UUID as nvidia-smi does ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx") into
// out (at least 41 bytes). Returns out.
char* format_uuid(const std::uint8_t uuid[16], char* out);
// Parses that form (with or without the "GPU-" prefix, dashes optional). False on bad input.
bool parse_uuid(const char* text, std::uint8_t out[16]);

}  // namespace gswap::proto
