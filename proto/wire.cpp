// wire.cpp: the checks both sides run on handshake messages and shared-memory headers.
#include "proto/wire.h"

#include <cstring>

namespace gswap::proto {

const char* hello_status_name(HelloStatus status) {
  switch (status) {
    case HelloStatus::kOk:
      return "ok";
    case HelloStatus::kBadMagic:
      return "bad magic";
    case HelloStatus::kBadVersion:
      return "protocol version mismatch";
    case HelloStatus::kWrongGpu:
      return "wrong GPU";
    case HelloStatus::kBadPid:
      return "bad pid";
    case HelloStatus::kNotAllowed:
      return "peer not allowed";
    case HelloStatus::kBadSize:
      return "bad message size";
    case HelloStatus::kBadKind:
      return "bad peer kind";
    case HelloStatus::kFull:
      return "too many clients";
  }
  return "unknown status";
}

HelloStatus check_hello(const void* bytes, std::size_t len, const std::uint8_t expected_uuid[16],
                        Hello* hello) {
  // A hello of another protocol version is told so whatever its size (that version's Hello may
  // differ). Otherwise the size comes first: a message of another size is no hello, and calling
  // it a bad magic or version would depend on what its first bytes happen to be.
  if (len < 8) return HelloStatus::kBadSize;
  std::uint32_t magic, version;
  std::memcpy(&magic, bytes, 4);
  std::memcpy(&version, static_cast<const char*>(bytes) + 4, 4);
  if (magic == kHelloMagic && version != kProtocolVersion) return HelloStatus::kBadVersion;
  if (len != sizeof(Hello)) return HelloStatus::kBadSize;
  if (magic != kHelloMagic) return HelloStatus::kBadMagic;
  std::memcpy(hello, bytes, sizeof(Hello));
  if (hello->kind == static_cast<std::uint32_t>(PeerKind::kControl)) return HelloStatus::kOk;
  if (hello->kind != static_cast<std::uint32_t>(PeerKind::kLibrary)) return HelloStatus::kBadKind;
  if (hello->pid <= 0) return HelloStatus::kBadPid;
  if (std::memcmp(hello->gpu_uuid, expected_uuid, 16) != 0) return HelloStatus::kWrongGpu;
  return HelloStatus::kOk;
}

namespace {
constexpr std::uint64_t align64(std::uint64_t v) {
  return (v + 63) & ~std::uint64_t{63};
}
}  // namespace

Layout make_layout(std::uint32_t ring_capacity, std::uint32_t plan_capacity) {
  Layout l{};
  l.ring_capacity = ring_capacity;
  l.plan_capacity = plan_capacity;
  l.ring_control_offset = sizeof(ShmHeader);
  l.ring_offset = align64(l.ring_control_offset + sizeof(RingControl));
  l.status_offset = align64(l.ring_offset + std::uint64_t{ring_capacity} * sizeof(EventRecord));
  l.plan_offset = align64(l.status_offset + sizeof(StatusBlock));
  l.plan_bytes = static_cast<std::uint32_t>(sizeof(PlanBlock) + sizeof(PlanHeader) +
                                            std::uint64_t{plan_capacity} * sizeof(PlanEntry));
  l.total_bytes = (l.plan_offset + l.plan_bytes + 4095) & ~std::uint64_t{4095};
  return l;
}

const char* validate_shm_header(const ShmHeader& h, std::uint64_t mapped_bytes) {
  if (h.magic != kShmMagic) return "bad shared-memory magic";
  if (h.version != kProtocolVersion) return "shared-memory protocol version mismatch";
  if (h.header_bytes != sizeof(ShmHeader)) return "bad header size";
  if (h.record_bytes != sizeof(EventRecord)) return "bad record size";
  if (h.status_bytes != sizeof(StatusBlock)) return "bad status size";
  if (h.total_bytes != mapped_bytes) return "total size differs from the mapping";
  if (h.ring_capacity < 2 || h.ring_capacity > (1u << 24) ||
      (h.ring_capacity & (h.ring_capacity - 1)) != 0)
    return "ring capacity not a power of two in [2, 2^24]";
  if (h.plan_capacity > (1u << 20)) return "plan capacity too large";
  std::uint64_t want_plan =
      sizeof(PlanBlock) + sizeof(PlanHeader) + std::uint64_t{h.plan_capacity} * sizeof(PlanEntry);
  if (h.plan_bytes != want_plan) return "bad plan size";
  struct Area {
    std::uint64_t off, len;
  } areas[] = {
      {0, sizeof(ShmHeader)},
      {h.ring_control_offset, sizeof(RingControl)},
      {h.ring_offset, std::uint64_t{h.ring_capacity} * sizeof(EventRecord)},
      {h.status_offset, sizeof(StatusBlock)},
      {h.plan_offset, h.plan_bytes},
  };
  for (const Area& a : areas) {
    if (a.off % 64 != 0) return "area not 64-byte aligned";
    if (a.off > mapped_bytes || a.len > mapped_bytes - a.off) return "area outside the mapping";
  }
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = i + 1; j < 5; ++j)
      if (areas[i].off < areas[j].off + areas[j].len && areas[j].off < areas[i].off + areas[i].len)
        return "areas overlap";
  return nullptr;
}

char* format_uuid(const std::uint8_t u[16], char* out) {
  static const char kHex[] = "0123456789abcdef";
  char* p = out;
  for (const char* s = "GPU-"; *s; ++s) *p++ = *s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
    *p++ = kHex[u[i] >> 4];
    *p++ = kHex[u[i] & 15];
  }
  *p = '\0';
  return out;
}

bool parse_uuid(const char* text, std::uint8_t out[16]) {
  const char* p = text;
  if (std::strncmp(p, "GPU-", 4) == 0) p += 4;
  int nibbles = 0;
  std::uint8_t bytes[16] = {};
  for (; *p; ++p) {
    if (*p == '-') continue;
    int v;
    if (*p >= '0' && *p <= '9')
      v = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      v = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      v = *p - 'A' + 10;
    else
      return false;
    if (nibbles >= 32) return false;
    bytes[nibbles / 2] =
        static_cast<std::uint8_t>(bytes[nibbles / 2] | (v << ((nibbles % 2) ? 0 : 4)));
    ++nibbles;
  }
  if (nibbles != 32) return false;
  std::memcpy(out, bytes, 16);
  return true;
}

}  // namespace gswap::proto
