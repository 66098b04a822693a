// host_memory.cpp: the pinned pool and the staging ring (see host_memory.h).
#include "interpose/host_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "interpose/log.h"

namespace gswap::interpose {

bool HostMemory::acquire(std::uint64_t bytes, std::uint64_t now_ns, HostBuffer* out) {
  (void)now_ns;
  bool reserved = false;
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    // The smallest pooled buffer that fits and wastes at most a quarter of itself.
    auto it = pool_.lower_bound(bytes);
    if (it != pool_.end() && it->first <= bytes + bytes / 3) {
      *out = HostBuffer{it->second.ptr, it->first, true};
      pooled_ -= it->first;
      pool_.erase(it);
      return true;
    }
    // Room under the cap: reserve it. The pool is never trimmed to make room: cuMemFreeHost
    // waits until the device is idle and holds up every thread's driver calls meanwhile (480 ms
    // behind a running kernel on an H200, docs/gpu-validation.md).
    if (pinned_ + bytes <= pinned_cap_) {
      pinned_ += bytes;
      reserved = true;
    } else if (it != pool_.end()) {
      // At the cap: a larger pooled buffer, however much of it goes unused, still copies at the
      // pinned rate, where pageable memory goes through the staging ring.
      *out = HostBuffer{it->second.ptr, it->first, true};
      pooled_ -= it->first;
      pool_.erase(it);
      return true;
    }
  }
  if (reserved) {
    void* p = nullptr;
    // Outside the pool mutex: pinning memory can take milliseconds.
    if (device_.host_alloc(bytes, &p) == CUDA_SUCCESS && p) {
      *out = HostBuffer{p, bytes, true};
      return true;
    }
    std::lock_guard<std::mutex> lock(pool_mutex_);
    pinned_ -= bytes;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  *out = HostBuffer{p, bytes, false};
  return true;
}

void HostMemory::release(HostBuffer* b, std::uint64_t now_ns) {
  if (!b->ptr) return;
  if (!b->pinned) {
    ::munmap(b->ptr, b->bytes);
  } else {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    pool_.emplace(b->bytes, Pooled{b->ptr, now_ns});
    pooled_ += b->bytes;
  }
  *b = HostBuffer{};
}

void HostMemory::trim_idle(std::uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  for (auto it = pool_.begin(); it != pool_.end();) {
    if (now_ns - it->second.since_ns >= kIdleTrimNs) {
      device_.host_free(it->second.ptr);
      pooled_ -= it->first;
      pinned_ -= it->first;
      it = pool_.erase(it);
    } else {
      ++it;
    }
  }
}

std::uint64_t HostMemory::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return pinned_;
}

std::uint64_t HostMemory::pooled_bytes() const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  return pooled_;
}

bool HostMemory::ensure_staging() {
  if (staging_) return true;
  void* p = nullptr;
  if (device_.host_alloc(staging_bytes_, &p) != CUDA_SUCCESS) {
    char b[32];
    GSWAP_LOG_ONCE(kError,
                   "the staging ring (GSWAP_STAGING_BYTES=%s of pinned memory) cannot be "
                   "allocated: swaps past GSWAP_PINNED_CAP fail until it can",
                   format_bytes(staging_bytes_, b, 32));
    return false;
  }
  for (auto& e : staging_events_) {
    if (!e && device_.event_create(&e, false) != CUDA_SUCCESS) {
      device_.host_free(p);
      return false;
    }
  }
  staging_ = p;
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pinned_ += staging_bytes_;
  return true;
}

CUresult HostMemory::staged_d2h(void* host, std::uint64_t src, std::uint64_t bytes,
                                Device::Stream s) {
  if (!ensure_staging()) return CUDA_ERROR_OUT_OF_MEMORY;
  std::uint64_t half = staging_bytes_ / 2;
  std::uint64_t off[2] = {0, 0}, len[2] = {0, 0};
  CUresult first_error = CUDA_SUCCESS;
  // Half s's copy must have landed before its bytes are moved out and the half is reused.
  auto drain = [&](int h) {
    if (!len[h]) return;
    CUresult e = device_.synchronize(staging_events_[h]);
    if (e == CUDA_SUCCESS && first_error == CUDA_SUCCESS)
      std::memcpy(static_cast<char*>(host) + off[h], static_cast<char*>(staging_) + h * half,
                  len[h]);
    else if (first_error == CUDA_SUCCESS)
      first_error = e;
    len[h] = 0;
  };
  int h = 0;
  for (std::uint64_t o = 0; o < bytes && first_error == CUDA_SUCCESS; o += half, h ^= 1) {
    drain(h);
    std::uint64_t n = std::min(half, bytes - o);
    CUresult e = device_.copy_d2h(static_cast<char*>(staging_) + h * half, src + o, n, s);
    if (e == CUDA_SUCCESS) e = device_.record(staging_events_[h], s);
    if (e != CUDA_SUCCESS) {
      first_error = e;
      break;
    }
    off[h] = o;
    len[h] = n;
  }
  drain(0);
  drain(1);
  return first_error;
}

CUresult HostMemory::staged_h2d(std::uint64_t dst, const void* host, std::uint64_t bytes,
                                Device::Stream s) {
  if (!ensure_staging()) return CUDA_ERROR_OUT_OF_MEMORY;
  std::uint64_t half = staging_bytes_ / 2;
  bool busy[2] = {false, false};
  CUresult first_error = CUDA_SUCCESS;
  int h = 0;
  for (std::uint64_t o = 0; o < bytes; o += half, h ^= 1) {
    if (busy[h]) {
      CUresult e = device_.synchronize(staging_events_[h]);
      busy[h] = false;
      if (e != CUDA_SUCCESS) {
        first_error = e;
        break;
      }
    }
    std::uint64_t n = std::min(half, bytes - o);
    std::memcpy(static_cast<char*>(staging_) + h * half, static_cast<const char*>(host) + o, n);
    CUresult e = device_.copy_h2d(dst + o, static_cast<char*>(staging_) + h * half, n, s);
    if (e == CUDA_SUCCESS) e = device_.record(staging_events_[h], s);
    if (e != CUDA_SUCCESS) {
      first_error = e;
      break;
    }
    busy[h] = true;
  }
  // The ring is reused by the next staged copy: both halves must be free when this returns. The
  // caller's restore event, recorded after this on the same stream, covers the copies themselves.
  for (int k = 0; k < 2; ++k)
    if (busy[k]) {
      CUresult e = device_.synchronize(staging_events_[k]);
      if (e != CUDA_SUCCESS && first_error == CUDA_SUCCESS) first_error = e;
    }
  return first_error;
}

void HostMemory::forget() {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.clear();
  pinned_ = pooled_ = 0;
  staging_ = nullptr;
  staging_events_[0] = staging_events_[1] = nullptr;
}

}  // namespace gswap::interpose
