// copy_telemetry.cpp: what libgswap tells gswapd about copies, read from the event ring by a
// minimal daemon inside the test program itself (gswapd keeps no copy records to ask about).
//
//   copy_telemetry     (runs under LD_PRELOAD=libgswap.so on simcuda)
//
// The program listens on its GPU's socket in a private runtime directory, accepts libgswap's
// connection with a shared-memory ring as gswapd would, then makes 2D and 3D copies in every
// direction between two regions and host memory, linear copies and a memset. Each must arrive as
// one kCopy record naming its source region as the source and its destination region as the
// destination (0 for host memory), and the link it crosses (host to device, device to host, or
// none for a device-to-device copy or a memset).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "daemon/client.h"
#include "preload_common.h"
#include "proto/decode.h"
#include "proto/fdpass.h"
#include "proto/rendezvous.h"
#include "proto/ring.h"
#include "proto/wire.h"

namespace {

namespace p = gswap::proto;

struct Copy {
  std::uint64_t src, dst, bytes, link;
};

// Keeps the announced regions (base -> id) and the copies.
struct Sink : p::EventSink {
  std::map<std::uint64_t, std::uint64_t> region_at;
  std::vector<Copy> copies;
  void on_alloc(std::uint64_t, std::uint32_t, std::uint64_t region, std::uint64_t base,
                std::uint64_t) override {
    region_at[base] = region;
  }
  void on_copy(std::uint64_t, std::uint32_t, std::uint64_t src, std::uint64_t dst,
               std::uint64_t bytes, std::uint32_t link) override {
    copies.push_back({src, dst, bytes, link});
  }
  void on_free(std::uint64_t, std::uint64_t) override {}
  void on_launch(std::uint64_t, std::uint32_t, std::uint64_t, const std::uint64_t*, std::uint32_t,
                 bool) override {}
  void on_eviction(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void on_restore(std::uint64_t, std::uint64_t, std::uint64_t, bool) override {}
  void on_stall(std::uint64_t, std::uint64_t) override {}
  void on_gpu_timing(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void on_iteration_mark(std::uint64_t) override {}
};

void die(const char* what) {
  std::fprintf(stderr, "copy_telemetry: %s\n", what);
  std::exit(1);
}

// The daemon side: one library client.
struct Daemon {
  int listen_fd = -1, fd = -1;
  gswap::daemon::ClientShm shm;
  p::RingConsumer ring;
  Sink sink;

  void listen_at(const char* path) {
    listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path, std::strlen(path) + 1);  // fits: socket_path checked it
    if (listen_fd < 0 || bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listen_fd, 4) != 0)
      die("cannot listen");
  }

  // Accepts libgswap (it retries every half second) and hands it the ring.
  void accept_library(const std::uint8_t uuid[16]) {
    pollfd pfd{listen_fd, POLLIN, 0};
    if (poll(&pfd, 1, 10000) != 1) die("libgswap did not connect within 10 s");
    fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    alignas(8) unsigned char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    p::Hello h{};
    if (n <= 0 || p::check_hello(buf, static_cast<std::size_t>(n), uuid, &h) != p::HelloStatus::kOk)
      die("bad hello");
    std::string error;
    if (!shm.create(4096, 64, &error)) die(error.c_str());
    p::HelloReply r{};
    r.magic = p::kReplyMagic;
    r.version = p::kProtocolVersion;
    r.shm_bytes = shm.bytes();
    if (p::send_with_fd(fd, &r, sizeof r, shm.fd(), MSG_NOSIGNAL) != sizeof r) die("no reply");
    const p::ShmHeader& hd = shm.header();
    auto* rc = reinterpret_cast<p::RingControl*>(shm.base() + hd.ring_control_offset);
    ring = p::RingConsumer(&rc->head, &rc->tail,
                           reinterpret_cast<p::EventRecord*>(shm.base() + hd.ring_offset),
                           hd.ring_capacity);
  }

  // Decodes what the library published until done() or ten seconds pass.
  template <class Done>
  bool read_until(Done done) {
    static p::EventRecord records[4096];
    for (int i = 0; i < 2000 && !done(); ++i) {
      std::int64_t n = ring.peek(records, 4096);
      if (n < 0) die("broken ring");
      if (n > 0) {
        p::DecodeResult d = p::decode_events(records, static_cast<std::size_t>(n), true, sink);
        if (!d.ok) die(d.error);
        ring.commit(d.consumed);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }
};

constexpr std::size_t kRegionBytes = 1 << 20;
alignas(64) unsigned char g_host[64 * 1024];

CUDA_MEMCPY2D copy_2d(CUdeviceptr dst, CUdeviceptr src, std::size_t width) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = src ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  c.srcDevice = src;
  c.srcHost = g_host;
  c.srcPitch = 512;
  c.dstMemoryType = dst ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  c.dstDevice = dst;
  c.dstHost = g_host;
  c.dstPitch = 512;
  c.WidthInBytes = width;
  c.Height = 4;
  return c;
}

template <class C>
C copy_3d(CUdeviceptr dst, CUdeviceptr src, std::size_t width) {
  C c{};
  c.srcMemoryType = src ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  c.srcDevice = src;
  c.srcHost = g_host;
  c.srcPitch = 512;
  c.srcHeight = 4;
  c.dstMemoryType = dst ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  c.dstDevice = dst;
  c.dstHost = g_host;
  c.dstPitch = 512;
  c.dstHeight = 4;
  c.WidthInBytes = width;
  c.Height = 4;
  c.Depth = 2;
  return c;
}

}  // namespace

int main() {
  char tmpl[] = "/tmp/gswap-copy-telemetry-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (!dir) die("mkdtemp");
  setenv("GSWAP_RUNTIME_DIR", dir, 1);
  setenv("GSWAP_DAEMON", "connect", 1);
  preload_init();
  CUdevice dev;
  PCHECK(cuCtxGetDevice(&dev));
  CUuuid uuid;
  PCHECK(cuDeviceGetUuid(&uuid, dev));
  std::uint8_t uuid_bytes[16];
  std::memcpy(uuid_bytes, uuid.bytes, 16);
  char uuid_text[48], path[p::kMaxSocketPath];
  p::format_uuid(uuid_bytes, uuid_text);
  if (!p::socket_path(dir, uuid_text, path, sizeof path)) die("socket path");

  // Two regions, announced to the daemon when the library connects.
  CUdeviceptr a, b;
  PCHECK(cuMemAlloc(&a, kRegionBytes));
  PCHECK(cuMemAlloc(&b, kRegionBytes));
  PCHECK(cuMemsetD8(a, 1, kRegionBytes));
  PCHECK(cuMemsetD8(b, 2, kRegionBytes));

  Daemon d;
  d.listen_at(path);
  d.accept_library(uuid_bytes);
  if (!d.read_until([&] { return d.sink.region_at.count(a) && d.sink.region_at.count(b); }))
    die("the library never announced its regions");
  std::uint64_t id_a = d.sink.region_at[a], id_b = d.sink.region_at[b];
  d.sink.copies.clear();

  // One copy per case; its width tells its record apart. Expected: {src, dst}.
  struct Case {
    const char* name;
    std::size_t width;
    std::uint64_t src, dst, link;
  };
  std::vector<Case> cases;
  auto link_of = [](CUdeviceptr dst, CUdeviceptr src) {
    return dst && !src ? p::kCopyLinkToDevice : src && !dst ? p::kCopyLinkToHost : p::kCopyLinkNone;
  };
  auto run = [&](const char* name, std::size_t width, CUdeviceptr dst, CUdeviceptr src, int kind) {
    if (kind == 2) {
      CUDA_MEMCPY2D c = copy_2d(dst, src, width);
      PCHECK(cuMemcpy2D(&c));
    } else if (kind == 3) {
      CUDA_MEMCPY3D c = copy_3d<CUDA_MEMCPY3D>(dst, src, width);
      PCHECK(cuMemcpy3D(&c));
    } else {
      CUDA_MEMCPY3D_PEER c = copy_3d<CUDA_MEMCPY3D_PEER>(dst, src, width);
      PCHECK(cuMemcpy3DPeer(&c));
    }
    cases.push_back({name, width, src == b ? id_b : 0, dst == a ? id_a : 0, link_of(dst, src)});
  };
  run("2D host to region", 64, a, 0, 2);
  run("2D region to host", 72, 0, b, 2);
  run("2D region to region", 80, a, b, 2);
  run("3D host to region", 88, a, 0, 3);
  run("3D region to host", 96, 0, b, 3);
  run("3D region to region", 104, a, b, 3);
  run("3D peer region to region", 112, a, b, 4);
  PCHECK(cuMemcpyHtoD(a, g_host, 120));
  cases.push_back({"host to region", 120, 0, id_a, p::kCopyLinkToDevice});
  PCHECK(cuMemcpyDtoHAsync(g_host, b, 128, nullptr));
  PCHECK(cuStreamSynchronize(nullptr));
  cases.push_back({"region to host, async", 128, id_b, 0, p::kCopyLinkToHost});
  PCHECK(cuMemcpyDtoD(a, b, 136));
  cases.push_back({"region to region", 136, id_b, id_a, p::kCopyLinkNone});
  PCHECK(cuMemsetD8(a, 3, 144));
  cases.push_back({"memset of a region", 144, 0, id_a, p::kCopyLinkNone});
  if (!d.read_until([&] { return d.sink.copies.size() >= cases.size(); }))
    die("the copies never arrived");

  int failures = 0;
  for (const Case& c : cases) {
    // The bytes a record carries are the span of its device side: (rows - 1) * pitch + width.
    const Copy* got = nullptr;
    for (const Copy& r : d.sink.copies)
      if (r.bytes % 512 == c.width) got = &r;
    if (!got) {
      std::fprintf(stderr, "%s: no record\n", c.name);
      ++failures;
      continue;
    }
    bool ok = got->src == c.src && got->dst == c.dst && got->link == c.link;
    std::printf("%s %s: src %llu dst %llu link %llu (expected src %llu dst %llu link %llu)\n",
                ok ? "ok  " : "FAIL", c.name, (unsigned long long)got->src,
                (unsigned long long)got->dst, (unsigned long long)got->link,
                (unsigned long long)c.src, (unsigned long long)c.dst, (unsigned long long)c.link);
    failures += !ok;
  }
  close(d.fd);
  unlink(path);
  rmdir(dir);
  if (failures) return 1;
  std::printf("copy_telemetry: every copy names its source, its destination and its link\n");
  return 0;
}
