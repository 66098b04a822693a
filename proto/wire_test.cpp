// wire_test.cpp: handshake refusals (magic, version, UUID, pid, size, kind), shared-memory header
// validation, and the UUID text form.
#include "proto/wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace gswap::proto {
namespace {

const std::uint8_t kUuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

Hello good_hello() {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.kind = static_cast<std::uint32_t>(PeerKind::kLibrary);
  h.pid = 1234;
  std::memcpy(h.gpu_uuid, kUuid, 16);
  return h;
}

TEST(Handshake, AcceptsGoodHello) {
  Hello h = good_hello(), out;
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kOk);
  EXPECT_EQ(out.pid, 1234);
}

TEST(Handshake, RefusesBadMagic) {
  Hello h = good_hello(), out;
  h.magic ^= 1;
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kBadMagic);
}

TEST(Handshake, RefusesOtherVersionEvenWhenShorter) {
  Hello h = good_hello(), out;
  h.version = kProtocolVersion + 1;
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kBadVersion);
  EXPECT_EQ(check_hello(&h, 16, kUuid, &out), HelloStatus::kBadVersion);
}

// A message of the wrong size is a size error whatever its first bytes; only a hello of another
// version is told about the version instead.
TEST(Handshake, WrongSizeIsASizeErrorWhateverItHolds) {
  Hello out;
  for (std::size_t len : {8u, 143u, 145u}) {
    std::vector<unsigned char> junk(len, 0xff);
    EXPECT_EQ(check_hello(junk.data(), len, kUuid, &out), HelloStatus::kBadSize) << len;
    Hello h = good_hello();
    std::vector<unsigned char> bytes(len, 0);
    std::memcpy(bytes.data(), &h, std::min(len, sizeof h));
    EXPECT_EQ(check_hello(bytes.data(), len, kUuid, &out), HelloStatus::kBadSize) << len;
  }
  Hello h = good_hello();
  h.magic ^= 1;
  EXPECT_EQ(check_hello(&h, sizeof h - 1, kUuid, &out), HelloStatus::kBadSize);
}

TEST(Handshake, RefusesWrongGpu) {
  Hello h = good_hello(), out;
  h.gpu_uuid[7] ^= 0xff;
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kWrongGpu);
}

TEST(Handshake, RefusesBadPidSizeAndKind) {
  Hello h = good_hello(), out;
  h.pid = 0;
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kBadPid);
  h = good_hello();
  EXPECT_EQ(check_hello(&h, sizeof h - 1, kUuid, &out), HelloStatus::kBadSize);
  EXPECT_EQ(check_hello(&h, 3, kUuid, &out), HelloStatus::kBadSize);
  h.kind = 9;
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kBadKind);
  h.kind = static_cast<std::uint32_t>(PeerKind::kControl);
  h.gpu_uuid[0] ^= 1;  // control peers are not tied to the GPU identity
  EXPECT_EQ(check_hello(&h, sizeof h, kUuid, &out), HelloStatus::kOk);
}

ShmHeader header_for(const Layout& l) {
  ShmHeader h{};
  h.magic = kShmMagic;
  h.version = kProtocolVersion;
  h.header_bytes = sizeof(ShmHeader);
  h.total_bytes = l.total_bytes;
  h.ring_control_offset = l.ring_control_offset;
  h.ring_offset = l.ring_offset;
  h.ring_capacity = l.ring_capacity;
  h.record_bytes = sizeof(EventRecord);
  h.status_offset = l.status_offset;
  h.status_bytes = sizeof(StatusBlock);
  h.plan_offset = l.plan_offset;
  h.plan_bytes = l.plan_bytes;
  h.plan_capacity = l.plan_capacity;
  return h;
}

TEST(ShmHeaderCheck, AcceptsOwnLayoutAndRejectsEachBreakage) {
  Layout l = make_layout(4096, 512);
  ShmHeader h = header_for(l);
  EXPECT_EQ(validate_shm_header(h, l.total_bytes), nullptr);
  EXPECT_NE(validate_shm_header(h, l.total_bytes - 4096), nullptr);
  ShmHeader b = h;
  b.magic = 0;
  EXPECT_NE(validate_shm_header(b, l.total_bytes), nullptr);
  b = h;
  b.version = 0;
  EXPECT_NE(validate_shm_header(b, l.total_bytes), nullptr);
  b = h;
  b.ring_capacity = 3000;
  EXPECT_NE(validate_shm_header(b, l.total_bytes), nullptr);
  b = h;
  b.plan_offset = h.status_offset;  // overlap
  EXPECT_NE(validate_shm_header(b, l.total_bytes), nullptr);
  b = h;
  b.ring_offset = ~0ull - 64 * 10;  // outside, and would overflow a naive sum
  EXPECT_NE(validate_shm_header(b, l.total_bytes), nullptr);
  b = h;
  b.plan_capacity = 100;
  EXPECT_NE(validate_shm_header(b, l.total_bytes), nullptr);
}

TEST(Uuid, RoundTrips) {
  char text[48];
  format_uuid(kUuid, text);
  EXPECT_STREQ(text, "GPU-01020304-0506-0708-090a-0b0c0d0e0f10");
  std::uint8_t back[16];
  ASSERT_TRUE(parse_uuid(text, back));
  EXPECT_EQ(std::memcmp(back, kUuid, 16), 0);
  ASSERT_TRUE(parse_uuid("0102030405060708090a0b0c0d0e0f10", back));
  EXPECT_FALSE(parse_uuid("GPU-0102", back));
  EXPECT_FALSE(parse_uuid("GPU-01020304-0506-0708-090a-0b0c0d0e0f10ff", back));
  EXPECT_FALSE(parse_uuid("GPU-01020304-0506-0708-090a-0b0c0d0e0fzz", back));
}

}  // namespace
}  // namespace gswap::proto
