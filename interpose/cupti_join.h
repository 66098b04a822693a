// cupti_join.h: pairs CUPTI's records of one driver call (cupti_timing.h).
//
// A measured access is enqueued between a push and a pop of an external correlation id, its seq.
// CUPTI then writes two records for the driver call: an external correlation record (our seq for
// CUPTI's correlation id, written when the call is made) and an activity record (a kernel, copy
// or memset with its device start and end, written when it has run). The two may reach the
// buffer callback in either order, in different buffers. Join holds whichever came first in a
// slot chosen by the correlation id (CUPTI numbers calls consecutively) and gives a timing when
// its partner comes. A slot taken over by a later call before its partner came loses the older
// half: a measurement skipped, counted, never a wrong pairing (the slot remembers its id).
//
// Not thread-safe: the caller serialises (cupti_timing.cpp holds a mutex around the callback).
// Fixed size, no allocation.
#pragma once

#include <cstdint>

namespace gswap::interpose::cupti {

struct Timing {
  std::uint64_t seq = 0;
  std::uint64_t start_ns = 0, end_ns = 0;  // CUPTI's timestamps (the clock it was given)
};

class Join {
 public:
  static constexpr std::uint32_t kSlots = 1u << 16;

  // The external correlation record: call `correlation` was made with `seq` pushed. True, with
  // *out filled, when its activity record had come already.
  bool external(std::uint32_t correlation, std::uint64_t seq, Timing* out) {
    Slot& s = slots_[correlation & (kSlots - 1)];
    if (s.used && s.correlation == correlation && s.has_times) {
      *out = Timing{seq, s.start, s.end};
      s.used = false;
      return true;
    }
    take(s, correlation);
    s.has_seq = true;
    s.seq = seq;
    return false;
  }

  // An activity record of call `correlation`. True, with *out filled, when its external
  // correlation record had come already. Activity records of calls made with nothing pushed (not
  // measured, or gswap's own copies) never find a partner and are overwritten in time.
  bool activity(std::uint32_t correlation, std::uint64_t start_ns, std::uint64_t end_ns,
                Timing* out) {
    Slot& s = slots_[correlation & (kSlots - 1)];
    if (s.used && s.correlation == correlation && s.has_seq) {
      *out = Timing{s.seq, start_ns, end_ns};
      s.used = false;
      return true;
    }
    take(s, correlation);
    s.has_times = true;
    s.start = start_ns;
    s.end = end_ns;
    return false;
  }

  // Measurements lost: an external record whose slot was taken over before its activity came.
  std::uint64_t lost() const { return lost_; }

 private:
  struct Slot {
    std::uint32_t correlation = 0;
    bool used = false, has_seq = false, has_times = false;
    std::uint64_t seq = 0, start = 0, end = 0;
  };
  void take(Slot& s, std::uint32_t correlation) {
    if (s.used && s.has_seq) ++lost_;
    s = Slot{};
    s.used = true;
    s.correlation = correlation;
  }

  Slot slots_[kSlots];
  std::uint64_t lost_ = 0;
};

}  // namespace gswap::interpose::cupti
