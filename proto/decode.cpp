// decode.cpp: validation and dispatch of ring records (see decode.h).
#include "proto/decode.h"

#include <algorithm>
#include <cstring>

namespace gswap::proto {
namespace {

// True when words [from, 5) are all zero: unused words must be written as zero.
bool tail_zero(const EventRecord& r, int from) {
  for (int i = from; i < 5; ++i)
    if (r.w[i] != 0) return false;
  return true;
}

DecodeResult fail(std::size_t index, const char* what) {
  DecodeResult r;
  r.ok = false;
  r.error = what;
  r.error_index = index;
  return r;
}

}  // namespace

DecodeResult decode_events(const EventRecord* records, std::size_t n, bool complete,
                           EventSink& sink) {
  DecodeResult result;
  std::uint64_t ids[kMaxLaunchRegions];
  std::size_t i = 0;
  while (i < n) {
    const EventRecord& r = records[i];
    if (r.type == 0 || r.type > kMaxEventType) return fail(i, "unknown event type");
    if (r.reserved0 != 0 || r.reserved1 != 0) return fail(i, "reserved field not zero");
    auto type = static_cast<EventType>(r.type);
    bool is_name = type == EventType::kKernelName || type == EventType::kRegionName;
    if (r.flags != 0 && !(type == EventType::kLaunch && r.flags == kLaunchTruncated) &&
        !(is_name && r.flags == kLastChunk))
      return fail(i, "bad flags");
    bool has_count = type == EventType::kLaunch || type == EventType::kLaunchMore ||
                     type == EventType::kRecomputable || type == EventType::kRecomputableMore;
    if (!has_count && !is_name && r.count != 0) return fail(i, "count on a record without regions");
    switch (type) {
      case EventType::kAlloc:
        if (r.w[0] == 0) return fail(i, "alloc of region id 0");
        if (r.w[2] == 0) return fail(i, "alloc of zero bytes");
        if (r.w[1] + r.w[2] < r.w[1]) return fail(i, "alloc range wraps");
        if (!tail_zero(r, 3)) return fail(i, "unused words not zero");
        sink.on_alloc(r.seq, r.stream, r.w[0], r.w[1], r.w[2]);
        break;
      case EventType::kFree:
        if (r.w[0] == 0) return fail(i, "free of region id 0");
        if (!tail_zero(r, 1)) return fail(i, "unused words not zero");
        sink.on_free(r.seq, r.w[0]);
        break;
      case EventType::kLaunch: {
        std::uint32_t count = r.count;
        if (count > kMaxLaunchRegions) return fail(i, "launch region count too large");
        if ((r.flags & kLaunchTruncated) && count != kMaxLaunchRegions)
          return fail(i, "truncated launch without a full region list");
        std::uint32_t groups = launch_records(count);
        if (i + groups > n) {
          if (complete) return fail(i, "launch group cut short");
          return result;  // wait for the rest
        }
        std::uint32_t inline_n = count < kLaunchInlineRegions ? count : kLaunchInlineRegions;
        for (std::uint32_t k = 0; k < inline_n; ++k) ids[k] = r.w[1 + k];
        if (!tail_zero(r, 1 + static_cast<int>(inline_n))) return fail(i, "unused words not zero");
        std::uint32_t got = inline_n;
        for (std::uint32_t g = 1; g < groups; ++g) {
          const EventRecord& m = records[i + g];
          if (m.type != static_cast<std::uint16_t>(EventType::kLaunchMore))
            return fail(i + g, "launch continuation missing");
          if (m.reserved0 != 0 || m.reserved1 != 0 || m.flags != 0)
            return fail(i + g, "reserved field not zero");
          if (m.seq != r.seq || m.stream != r.stream)
            return fail(i + g, "continuation of another launch");
          std::uint32_t want = count - got < kLaunchMoreRegions ? count - got : kLaunchMoreRegions;
          if (m.count != want) return fail(i + g, "continuation count mismatch");
          for (std::uint32_t k = 0; k < want; ++k) ids[got + k] = m.w[k];
          if (!tail_zero(m, static_cast<int>(want))) return fail(i + g, "unused words not zero");
          got += want;
        }
        for (std::uint32_t k = 0; k < count; ++k)
          if (ids[k] == 0) return fail(i, "launch touches region id 0");
        sink.on_launch(r.seq, r.stream, r.w[0], ids, count, (r.flags & kLaunchTruncated) != 0);
        i += groups;
        result.consumed = i;
        continue;
      }
      case EventType::kLaunchMore:
        return fail(i, "launch continuation without a launch");
      case EventType::kCopy:
        if (r.w[3] > kCopyLinkToHost) return fail(i, "copy across an unknown link");
        if (!tail_zero(r, 4)) return fail(i, "unused words not zero");
        sink.on_copy(r.seq, r.stream, r.w[0], r.w[1], r.w[2], static_cast<std::uint32_t>(r.w[3]));
        break;
      case EventType::kEviction:
        if (r.w[0] == 0) return fail(i, "eviction of region id 0");
        if (!tail_zero(r, 2)) return fail(i, "unused words not zero");
        sink.on_eviction(r.seq, r.w[0], r.w[1]);
        break;
      case EventType::kRestore:
        if (r.w[0] == 0) return fail(i, "restore of region id 0");
        if (r.w[2] > 1) return fail(i, "restore late flag not 0 or 1");
        if (!tail_zero(r, 3)) return fail(i, "unused words not zero");
        sink.on_restore(r.seq, r.w[0], r.w[1], r.w[2] != 0);
        break;
      case EventType::kStall:
        if (!tail_zero(r, 3)) return fail(i, "unused words not zero");
        sink.on_stall(r.seq, r.w[0]);
        if (r.w[1]) sink.on_host_wait(r.seq, r.w[1], r.w[0], r.w[2]);
        break;
      case EventType::kGpuTiming:
        if (!tail_zero(r, 2)) return fail(i, "unused words not zero");
        sink.on_gpu_timing(r.seq, r.w[0], r.w[1]);
        break;
      case EventType::kIterationMark:
        if (!tail_zero(r, 0)) return fail(i, "unused words not zero");
        sink.on_iteration_mark(r.seq);
        break;
      case EventType::kKernelName:
      case EventType::kRegionName: {
        if (r.w[0] == 0) return fail(i, "name of id 0");
        if (r.count >= kMaxNameChunks) return fail(i, "name chunk index too large");
        char bytes[32];
        std::memcpy(bytes, &r.w[1], 32);
        sink.on_name(type == EventType::kKernelName ? EventSink::NameKind::kKernel
                                                    : EventSink::NameKind::kRegion,
                     r.w[0], r.count, bytes, (r.flags & kLastChunk) != 0);
        break;
      }
      case EventType::kLateness:
        if (r.w[3] > 1) return fail(i, "lateness missed flag not 0 or 1");
        if (!tail_zero(r, 4)) return fail(i, "unused words not zero");
        sink.on_lateness(r.w[0], r.w[1], r.w[2], r.w[3] != 0);
        break;
      case EventType::kDivergence:
        if (!tail_zero(r, 4)) return fail(i, "unused words not zero");
        sink.on_divergence(r.w[0], r.w[1], r.w[2], r.w[3]);
        break;
      case EventType::kSwapDone:
        if (r.w[0] == 0) return fail(i, "swap of region id 0");
        if (r.w[3] < r.w[2]) return fail(i, "swap ends before it starts");
        if (r.w[4] > (kSwapToDevice | kSwapPlanned)) return fail(i, "unknown swap flags");
        sink.on_swap_done(r.w[0], r.w[1], r.w[2], r.w[3], r.w[4]);
        break;
      case EventType::kRecomputable: {
        std::uint32_t count = r.count;
        if (r.w[0] == 0) return fail(i, "recomputable region id 0");
        if (count > kMaxRecomputeSources) return fail(i, "too many recompute sources");
        if (r.flags != 0) return fail(i, "reserved field not zero");
        std::uint32_t inline_n = std::min(count, kRecomputableInlineSources);
        std::uint64_t src[kMaxRecomputeSources];
        for (std::uint32_t k = 0; k < inline_n; ++k) src[k] = r.w[2 + k];
        if (!tail_zero(r, 2 + static_cast<int>(inline_n))) return fail(i, "unused words not zero");
        if (count > kRecomputableInlineSources) {
          if (i + 1 >= n) {
            if (complete) return fail(i, "recomputable group cut short");
            return result;  // wait for the rest
          }
          const EventRecord& m = records[i + 1];
          if (m.type != static_cast<std::uint16_t>(EventType::kRecomputableMore))
            return fail(i + 1, "recomputable continuation missing");
          if (m.reserved0 != 0 || m.reserved1 != 0 || m.flags != 0 || m.seq != r.seq ||
              m.count != count - kRecomputableInlineSources)
            return fail(i + 1, "bad recomputable continuation");
          for (std::uint32_t k = 0; k < m.count; ++k) src[kRecomputableInlineSources + k] = m.w[k];
          if (!tail_zero(m, static_cast<int>(m.count))) return fail(i + 1, "unused words not zero");
        }
        for (std::uint32_t k = 0; k < count; ++k)
          if (src[k] == 0 || src[k] == r.w[0]) return fail(i, "bad recompute source");
        sink.on_recomputable(r.w[0], r.w[1], src, count);
        if (count > kRecomputableInlineSources) ++i;
        break;
      }
      case EventType::kRecomputableMore:
        return fail(i, "recomputable continuation without its head");
      case EventType::kNotRecomputable:
        if (r.w[0] == 0 || !tail_zero(r, 1)) return fail(i, "bad end of a registration");
        sink.on_not_recomputable(r.w[0]);
        break;
      case EventType::kRecomputed:
        if (r.w[0] == 0) return fail(i, "recomputation of region id 0");
        if (r.w[3] < r.w[2]) return fail(i, "recomputation ends before it starts");
        if (r.w[4] > kRecomputeFailed) return fail(i, "unknown recomputation flags");
        sink.on_recomputed(r.w[0], r.w[1], r.w[2], r.w[3], r.w[4] != 0);
        break;
      case EventType::kClock:
        if (!tail_zero(r, 2)) return fail(i, "unused words not zero");
        sink.on_clock(r.w[0], r.w[1]);
        break;
    }
    ++i;
    result.consumed = i;
  }
  return result;
}

DecodeResult decode_event_bytes(const void* bytes, std::size_t len, EventSink& sink) {
  if (len % sizeof(EventRecord) != 0) return fail(len / sizeof(EventRecord), "partial record");
  // Copy record by record: the source may be unaligned or changing under us.
  constexpr std::size_t kChunk = 256;
  EventRecord buf[kChunk];
  const auto* p = static_cast<const unsigned char*>(bytes);
  std::size_t total = len / sizeof(EventRecord);
  std::size_t done = 0;
  DecodeResult out;
  while (done < total) {
    std::size_t n = total - done < kChunk ? total - done : kChunk;
    std::memcpy(buf, p + done * sizeof(EventRecord), n * sizeof(EventRecord));
    bool last = done + n == total;
    DecodeResult r = decode_events(buf, n, last, sink);
    if (!r.ok) {
      r.error_index += done;
      r.consumed += done;
      return r;
    }
    if (r.consumed == 0) return fail(done, "launch group larger than a decode chunk");
    done += r.consumed;
    out.consumed = done;
  }
  return out;
}

}  // namespace gswap::proto
