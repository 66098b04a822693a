// server_test.cpp: gswapd's server driven in-process over real sockets: handshake refusals (bad
// magic, version, UUID, pid), a library client receiving its shared memory, budget sharing
// between two clients, a client writing garbage into its ring being dropped while the other
// carries on, and the measure-plan-feedback loop as a library sees it through its plan area.
#include "daemon/server.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/ostream_sink.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <future>
#include <random>
#include <set>
#include <sstream>
#include <chrono>
#include <thread>

#include "daemon/control.h"
#include "daemon/untrusted_text.h"
#include "policy/analysis.h"
#include "policy/iteration.h"
#include "policy/corpus.h"
#include "policy/simulator.h"
#include "policy/trace_json.h"
#include "proto/fdpass.h"
#include "proto/ring.h"
#include "proto/seqlock.h"

namespace gswap::daemon {
namespace {

const std::uint8_t kUuid[16] = {0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// A library client as the daemon sees it: allocations, launches with their timings, and the plan
// area it reads back.
struct FakeLibrary {
  unsigned char* base = nullptr;
  std::uint64_t bytes = 0;
  const proto::ShmHeader* hdr = nullptr;
  proto::RingProducer ring;
  std::uint64_t seq = 1;

  void map(int shm, std::uint64_t n) {
    bytes = n;
    base =
        static_cast<unsigned char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0));
    hdr = reinterpret_cast<const proto::ShmHeader*>(base);
    auto* rc = reinterpret_cast<proto::RingControl*>(base + hdr->ring_control_offset);
    ring = proto::RingProducer(&rc->head, &rc->tail,
                               reinterpret_cast<proto::EventRecord*>(base + hdr->ring_offset),
                               hdr->ring_capacity);
  }
  ~FakeLibrary() {
    if (base) munmap(base, bytes);
  }
  bool push(const proto::EventRecord& e) { return ring.push(&e, 1); }
  // The library left plan generation `generation` (at offset 3, kernel 999 where 101 was due).
  void divergence(std::uint64_t generation) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kDivergence);
    e.w[0] = generation & 0x3fffffff;
    e.w[1] = 3;
    e.w[2] = 101;
    e.w[3] = 999;
    ASSERT_TRUE(push(e));
  }
  // The plan area, read as the library reads it.
  bool plan(proto::PlanHeader* h, std::vector<proto::PlanEntry>* entries) {
    auto* block = reinterpret_cast<proto::PlanBlock*>(base + hdr->plan_offset);
    auto* area = reinterpret_cast<std::atomic<std::uint64_t>*>(block + 1);
    std::vector<std::uint64_t> words(proto::kPlanHeaderWords +
                                     std::size_t{hdr->plan_capacity} * proto::kPlanEntryWords);
    if (!proto::seqlock_read(&block->seq, area, words.data(), words.size())) return false;
    std::memcpy(h, words.data(), sizeof *h);
    entries->resize(h->num_entries);
    std::memcpy(entries->data(), words.data() + proto::kPlanHeaderWords,
                h->num_entries * sizeof(proto::PlanEntry));
    return true;
  }
  // The status block, written as the library writes it.
  void status(const proto::StatusPayload& st) {
    last_status = st;
    auto* block = reinterpret_cast<proto::StatusBlock*>(base + hdr->status_offset);
    std::uint64_t words[proto::kStatusWords];
    std::memcpy(words, &st, sizeof words);
    proto::seqlock_write(&block->seq, block->words, words, proto::kStatusWords);
  }

  // n regions of 64 MiB, ids 1 to n.
  void regions(std::uint64_t n) {
    for (std::uint64_t id = 1; id <= n; ++id) ASSERT_NO_FATAL_FAILURE(alloc(id, 64ull << 20));
  }
  void alloc(std::uint64_t id, std::uint64_t bytes) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kAlloc);
    e.seq = seq++;
    e.w[0] = id;
    e.w[1] = id << 32;
    e.w[2] = bytes;
    ASSERT_TRUE(push(e));
  }
  void free(std::uint64_t id) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kFree);
    e.seq = seq++;
    e.w[0] = id;
    ASSERT_TRUE(push(e));
  }
  // An iteration mark, as gswap_mark_iteration sends it: at the seq the next call takes.
  void mark() {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kIterationMark);
    e.seq = seq;
    ASSERT_TRUE(push(e));
  }
  // A launch of `function` touching regions a and b, timed 100 us; a copy (function
  // kCopyFunction) is an upload into a.
  void access(std::uint64_t function, std::uint64_t a, std::uint64_t b) {
    if (follow_every && ++accesses % follow_every == 0) {  // as a library following a plan
      proto::StatusPayload st = last_status;
      ++st.guided_iterations;
      status(st);
    }
    if (function == proto::kCopyFunction) {
      proto::EventRecord c{};
      c.type = static_cast<std::uint16_t>(proto::EventType::kCopy);
      c.seq = seq;
      c.w[1] = a;
      c.w[2] = 4096;
      c.w[3] = proto::kCopyLinkToDevice;
      ASSERT_TRUE(push(c));
    }
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kLaunch);
    e.seq = seq++;
    e.count = 2;
    e.w[0] = function;
    e.w[1] = a;
    e.w[2] = b;
    ASSERT_TRUE(push(e));
    proto::EventRecord g{};
    g.type = static_cast<std::uint16_t>(proto::EventType::kGpuTiming);
    g.seq = e.seq;
    g.w[0] = device_ns;
    g.w[1] = duration_ns;
    device_ns += duration_ns;
    if (timed && function != untimed_function) timings.push_back(g);
    while (timings.size() > timing_lag) {
      ASSERT_TRUE(push(timings.front()));
      timings.pop_front();
    }
  }
  std::uint64_t device_ns = 0;
  std::uint64_t duration_ns = 100000;  // of each launch
  std::uint64_t untimed_function = 0;  // launches of this function are never timed
  // Non-zero: the status reports one more followed iteration every so many launches.
  std::uint64_t follow_every = 0, accesses = 0;
  proto::StatusPayload last_status{};
  // Timings are sent once the device is done: this many launches after their own; none while
  // `timed` is false (the library times launches only while the daemon measures).
  std::size_t timing_lag = 0;
  bool timed = true;
  std::deque<proto::EventRecord> timings;

  // Four regions, then 256 iterations of 8 accesses: access k touches regions k%4+1 and
  // (k+1)%4+1; the last is an upload, the others kernels. The server ticks every 32 iterations.
  static std::uint64_t function_at(std::uint64_t k) {
    return k == 7 ? proto::kCopyFunction : 101 + 2 * k;
  }
  void regions_and_iterations(Server& server) {
    regions(4);
    for (int it = 0; it < 256; ++it) {
      for (std::uint64_t k = 0; k < 8; ++k) {
        if (calls_before_access) {  // calls gswapd is not told of (small allocations)
          seq += k;
          calls_before[seq] = k;
        }
        access(function_at(k), k % 4 + 1, (k + 1) % 4 + 1);
      }
      if (it % 32 == 31) server.tick(0);
    }
  }
  // Whether access k follows k calls of its own; calls_before: the seq of each such access -> k.
  bool calls_before_access = false;
  std::map<std::uint64_t, std::uint64_t> calls_before;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gswap-server-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // No refinement unless a test asks for it: it would publish plans at times of its own.
    config_.merge_json(
        nlohmann::json{{"runtime_dir", dir_}, {"gpu_budget", "1GiB"}, {"plan_refine_ms", 0}}
            .dump());
    gpu_.ordinal = 0;
    std::memcpy(gpu_.uuid, kUuid, 16);
    gpu_.total_bytes = 4ull << 30;
    char text[48];
    gpu_.uuid_text = proto::format_uuid(kUuid, text);
    log_ =
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
    server_ = std::make_unique<Server>(config_, gpu_, log_);
    std::string error;
    bool already = false;
    ASSERT_TRUE(server_->open(&error, &already)) << error;
  }
  void TearDown() override {
    server_.reset();
    std::string cmd = "rm -rf " + dir_;
    (void)!std::system(cmd.c_str());
  }

  // Ticks until the library's plan area says guided (the planner thread answers within its
  // search budget), 500 ticks at most, and asserts that it does; *ph and *entries hold the plan
  // area then.
  void tick_until_guided(FakeLibrary& lib, proto::PlanHeader* ph,
                         std::vector<proto::PlanEntry>* entries) {
    for (int i = 0; i < 500 && ph->mode != static_cast<std::uint32_t>(proto::PlanMode::kGuided);
         ++i) {
      server_->tick(2);
      ASSERT_TRUE(lib.plan(ph, entries));
    }
    ASSERT_EQ(ph->mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided))
        << server_->status_json().dump();
  }

  // Connects `lib` with a budget of 128 MiB, runs its iterations and ticks until it is guided;
  // *ph and *entries hold the plan area then.
  void guided_client(FakeLibrary& lib, int* fd, int* shm, proto::PlanHeader* ph,
                     std::vector<proto::PlanEntry>* entries) {
    ASSERT_NO_FATAL_FAILURE(connect_library(128ull << 20, &lib, fd, shm));
    lib.regions_and_iterations(*server_);
    ASSERT_NO_FATAL_FAILURE(tick_until_guided(lib, ph, entries));
  }

  int connect_raw() {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, server_->socket_file().c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    server_->tick(0);  // accept
    return fd;
  }

  proto::Hello hello() {
    proto::Hello h{};
    h.magic = proto::kHelloMagic;
    h.version = proto::kProtocolVersion;
    h.kind = static_cast<std::uint32_t>(proto::PeerKind::kLibrary);
    h.pid = getpid();
    std::memcpy(h.gpu_uuid, kUuid, 16);
    std::strcpy(h.exe, "trainer");
    return h;
  }

  // Connects a library client that asks for `budget` bytes (0: none) and maps its shared memory
  // into lib; *fd and *shm are the socket and the memfd, for the test to close.
  void connect_library(std::uint64_t budget, FakeLibrary* lib, int* fd, int* shm) {
    *fd = connect_raw();
    proto::Hello h = hello();
    h.requested_budget_bytes = budget;
    proto::HelloReply r = exchange(*fd, &h, sizeof h, shm);
    ASSERT_EQ(r.status, 0);
    lib->map(*shm, r.shm_bytes);
  }

  // One iteration of the upload tests: a new input `input` (128 MiB) allocated and uploaded; an
  // upload into region 1; a kernel reading both; ten kernels on regions 2 and 3; a kernel reading
  // the input and region 1 again; the input freed. Then five ticks, and the plan area read into
  // *ph and *entries. *first_launch: the seq of its first upload.
  void upload_iteration(FakeLibrary& lib, std::uint64_t input, proto::PlanHeader* ph,
                        std::vector<proto::PlanEntry>* entries,
                        std::uint64_t* first_launch = nullptr) {
    ASSERT_NO_FATAL_FAILURE(lib.alloc(input, 128ull << 20));
    if (first_launch) *first_launch = lib.seq;
    lib.access(proto::kCopyFunction, input, input);
    lib.access(proto::kCopyFunction, 1, 1);
    lib.access(301, input, 1);
    for (int k = 0; k < 10; ++k) lib.access(303 + 2 * (k % 2), 2, 3);
    lib.access(309, input, 1);
    ASSERT_NO_FATAL_FAILURE(lib.free(input));
    for (int i = 0; i < 5; ++i) server_->tick(2);
    ASSERT_TRUE(lib.plan(ph, entries));
  }

  void layers_taken_for_the_iteration(std::uint64_t budget, bool layer_planned);

  // Runs the program's iterations (gswapd ticking after each) until the library is sent a plan
  // of `length` launches, 400 at most, and checks that it was, with entries. `length` may be set
  // by the first iteration.
  void iterate_until_guided(FakeLibrary& lib, const std::function<void()>& iteration,
                            const std::size_t& length, proto::PlanHeader* ph,
                            std::vector<proto::PlanEntry>* entries) {
    auto guided = [&] {
      return ph->mode == static_cast<std::uint32_t>(proto::PlanMode::kGuided) &&
             ph->iteration_length == length;
    };
    for (int it = 0; it < 400 && !guided(); ++it) {
      iteration();
      for (int i = 0; i < 5; ++i) server_->tick(2);
      ASSERT_TRUE(lib.plan(ph, entries));
    }
    ASSERT_EQ(ph->mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided))
        << server_->status_json().dump();
    EXPECT_EQ(ph->iteration_length, length);
    EXPECT_FALSE(entries->empty());
  }

  // The trace gswapd gives for this process (`gswapctl trace dump`).
  void trace_of_client(policy::Trace* trace) {
    nlohmann::json tr = server_->handle_request({{"cmd", "trace"}, {"pid", getpid()}});
    ASSERT_TRUE(tr["ok"].get<bool>()) << tr.dump();
    std::string error;
    ASSERT_TRUE(policy::parse_trace_json(tr["trace_json"].get<std::string>(), trace, &error))
        << error;
  }

  // The server again (with config_ as it is now), logging every line's text to *out.
  void restart_logging_to(std::ostringstream* out) {
    server_.reset();
    log_ = std::make_shared<spdlog::logger>("test",
                                            std::make_shared<spdlog::sinks::ostream_sink_mt>(*out));
    log_->set_pattern("%v");
    server_ = std::make_unique<Server>(config_, gpu_, log_);
    std::string error;
    bool already = false;
    ASSERT_TRUE(server_->open(&error, &already)) << error;
  }

  // Sends a hello and returns the reply; *shm_fd gets the passed memfd (or -1).
  proto::HelloReply exchange(int fd, const void* msg, std::size_t len, int* shm_fd) {
    EXPECT_EQ(send(fd, msg, len, 0), static_cast<ssize_t>(len));
    server_->tick(0);
    proto::HelloReply r{};
    EXPECT_EQ(proto::recv_with_fd(fd, &r, sizeof r, shm_fd, 0), static_cast<ssize_t>(sizeof r));
    return r;
  }

  std::string dir_;
  Config config_;
  GpuIdentity gpu_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, RefusesBadMagicVersionUuidAndPid) {
  struct Case {
    void (*mutate)(proto::Hello&);
    proto::HelloStatus want;
    const char* text;
  } cases[] = {
      {[](proto::Hello& h) { h.magic = 0x1234; }, proto::HelloStatus::kBadMagic, "bad magic"},
      {[](proto::Hello& h) { h.version = 99; }, proto::HelloStatus::kBadVersion, "version 99"},
      {[](proto::Hello& h) { h.gpu_uuid[3] ^= 1; }, proto::HelloStatus::kWrongGpu, "not GPU-"},
      {[](proto::Hello& h) { h.pid = h.pid + 1; }, proto::HelloStatus::kBadPid, "bad pid"},
  };
  for (const Case& c : cases) {
    int fd = connect_raw();
    proto::Hello h = hello();
    c.mutate(h);
    int shm = -1;
    proto::HelloReply r = exchange(fd, &h, sizeof h, &shm);
    EXPECT_EQ(r.status, static_cast<std::int32_t>(c.want));
    EXPECT_NE(std::strstr(r.message, c.text), nullptr) << r.message;
    EXPECT_EQ(shm, -1);
    close(fd);
  }
  EXPECT_EQ(server_->num_clients(), 0u);
}

// A message one byte short or long is refused as such, whatever its first bytes.
TEST_F(ServerTest, RefusesAHelloOfTheWrongSizeAsSuch) {
  // An empty message too: on this socket recv answers it as it answers the end, 0.
  for (std::size_t len :
       {std::size_t{0}, sizeof(proto::Hello) - 1, sizeof(proto::Hello) + 1, std::size_t{4096}}) {
    std::vector<unsigned char> junk(len, 0xa5);
    int fd = connect_raw();
    int shm = -1;
    proto::HelloReply r = exchange(fd, junk.data(), len, &shm);
    EXPECT_EQ(r.status, static_cast<std::int32_t>(proto::HelloStatus::kBadSize));
    EXPECT_NE(std::strstr(r.message, fmt::format("({} bytes; a hello is 144)", len).c_str()),
              nullptr)
        << r.message;
    close(fd);
  }
}

// A message after the handshake, an empty one included, is a protocol error (one warning, the
// client dropped), not the end of the client: recv answers an empty message as it answers the
// end, and only poll's hang-up tells them apart.
TEST_F(ServerTest, AnEmptyMessageAfterTheHandshakeIsAProtocolError) {
  std::ostringstream out;
  restart_logging_to(&out);
  int fd = connect_raw();
  proto::Hello h = hello();
  int shm = -1;
  proto::HelloReply r = exchange(fd, &h, sizeof h, &shm);
  ASSERT_EQ(r.status, 0) << r.message;
  ASSERT_EQ(send(fd, "", 0, 0), 0);
  server_->tick(0);
  EXPECT_EQ(server_->num_clients(), 0u);
  EXPECT_NE(out.str().find("sent data on the socket after the handshake (protocol error)"),
            std::string::npos)
      << out.str();
  close(shm);
  close(fd);
}

// A peer refused in a loop writes a few lines a second, not one per attempt: 40 bad hellos in a
// burst give 5 lines, then one line, once the second is over, counting the other 35 (even with
// no further connection).
TEST_F(ServerTest, RefusalsInALoopAreCountedNotLoggedOneByOne) {
  std::ostringstream out;
  restart_logging_to(&out);
  for (int k = 0; k < 40; ++k) {
    int fd = connect_raw();
    proto::Hello h = hello();
    h.magic = 0x1234;
    int shm = -1;
    proto::HelloReply r = exchange(fd, &h, sizeof h, &shm);
    EXPECT_EQ(r.status, static_cast<std::int32_t>(proto::HelloStatus::kBadMagic));
    close(fd);
  }
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    std::istringstream lines(out.str());
    for (std::string l; std::getline(lines, l);) n += l.find(what) != std::string::npos;
    return n;
  };
  EXPECT_LE(count("refused pid"), 5u) << out.str();
  EXPECT_GE(count("refused pid"), 1u) << out.str();
  const std::size_t logged = count("refused pid");
  for (int i = 0; i < 150 && !count("more handshakes in a second"); ++i) server_->tick(10);
  EXPECT_EQ(count("refused " + std::to_string(40 - logged) + " more handshakes in a second"), 1u)
      << out.str();
}

TEST_F(ServerTest, ClientsShareTheBudgetAndGarbageDropsOnlyTheOffender) {
  int fd1 = connect_raw();
  proto::Hello h = hello();
  int shm1 = -1, shm2 = -1;
  proto::HelloReply r = exchange(fd1, &h, sizeof h, &shm1);
  ASSERT_EQ(r.status, 0) << r.message;
  ASSERT_GE(shm1, 0);
  int fd2 = connect_raw();
  r = exchange(fd2, &h, sizeof h, &shm2);
  ASSERT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(server_->num_clients(), 2u);

  auto* base = static_cast<unsigned char*>(
      mmap(nullptr, r.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm1, 0));
  ASSERT_NE(base, MAP_FAILED);
  const auto& hdr = *reinterpret_cast<proto::ShmHeader*>(base);
  ASSERT_EQ(proto::validate_shm_header(hdr, r.shm_bytes), nullptr);
  // Each client's plan area carries half of the 1 GiB GPU budget.
  auto* plan = reinterpret_cast<proto::PlanBlock*>(base + hdr.plan_offset);
  std::uint64_t words[proto::kPlanHeaderWords];
  ASSERT_TRUE(proto::seqlock_read(&plan->seq,
                                  reinterpret_cast<std::atomic<std::uint64_t>*>(plan + 1), words,
                                  proto::kPlanHeaderWords));
  proto::PlanHeader ph;
  std::memcpy(&ph, words, sizeof ph);
  EXPECT_EQ(ph.budget_bytes, 512ull << 20);
  nlohmann::json st = server_->status_json();
  ASSERT_EQ(st["clients"].size(), 2u);
  EXPECT_EQ(st["clients"][1]["budget_bytes"], 512ull << 20);

  // A valid allocation event is decoded and counted.
  auto* rc = reinterpret_cast<proto::RingControl*>(base + hdr.ring_control_offset);
  proto::RingProducer ring(&rc->head, &rc->tail,
                           reinterpret_cast<proto::EventRecord*>(base + hdr.ring_offset),
                           hdr.ring_capacity);
  proto::EventRecord e{};
  e.type = static_cast<std::uint16_t>(proto::EventType::kAlloc);
  e.w[0] = 7;
  e.w[1] = 0x1000;
  e.w[2] = 4096;
  ASSERT_TRUE(ring.push(&e, 1));
  server_->tick(0);
  EXPECT_EQ(server_->status_json()["clients"][0]["events"], 1u);

  // Garbage: an unknown event type. The offender is dropped, the other client stays and holds
  // the whole budget once a rise is due (a second later: Server::rebalance).
  e.type = 999;
  ASSERT_TRUE(ring.push(&e, 1));
  server_->tick(0);
  ASSERT_EQ(server_->num_clients(), 1u);
  EXPECT_EQ(server_->status_json()["clients"][0]["budget_bytes"], 512ull << 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  server_->tick(0);
  EXPECT_EQ(server_->status_json()["clients"][0]["budget_bytes"], 1ull << 30);
  char b;
  EXPECT_EQ(recv(fd1, &b, 1, 0), 0);  // the daemon closed the offender's socket

  // A head far beyond the tail is also garbage.
  auto* base2 = static_cast<unsigned char*>(
      mmap(nullptr, r.shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shm2, 0));
  auto* rc2 = reinterpret_cast<proto::RingControl*>(base2 + hdr.ring_control_offset);
  rc2->head.store(1ull << 40);
  server_->tick(0);
  EXPECT_EQ(server_->num_clients(), 0u);
  munmap(base, r.shm_bytes);
  munmap(base2, r.shm_bytes);
  close(shm1);
  close(shm2);
  close(fd1);
  close(fd2);
}

// A process that connects and leaves in a loop moves the other client's share once, down, not at
// every turn (each move throws its plan away and plans again): a share rises only after a second.
TEST_F(ServerTest, AClientThatComesAndGoesDoesNotMoveTheOthersBudget) {
  int fd1 = connect_raw();
  proto::Hello h = hello();
  int shm1 = -1;
  proto::HelloReply r = exchange(fd1, &h, sizeof h, &shm1);
  ASSERT_EQ(r.status, 0) << r.message;
  EXPECT_EQ(server_->status_json()["clients"][0]["budget_bytes"], 1ull << 30);
  std::set<std::uint64_t> budgets;
  for (int k = 0; k < 20; ++k) {
    int fd2 = connect_raw();
    int shm2 = -1;
    r = exchange(fd2, &h, sizeof h, &shm2);
    ASSERT_EQ(r.status, 0) << r.message;
    budgets.insert(server_->status_json()["clients"][0]["budget_bytes"].get<std::uint64_t>());
    close(shm2);
    close(fd2);
    for (int t = 0; t < 5 && server_->num_clients() > 1; ++t) server_->tick(10);
    ASSERT_EQ(server_->num_clients(), 1u);
    budgets.insert(server_->status_json()["clients"][0]["budget_bytes"].get<std::uint64_t>());
  }
  EXPECT_EQ(budgets, std::set<std::uint64_t>{512ull << 20});
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  server_->tick(0);
  EXPECT_EQ(server_->status_json()["clients"][0]["budget_bytes"], 1ull << 30);
  close(shm1);
  close(fd1);
}

// Clients connecting and leaving in a burst write a line each up to ten a second, then one line,
// once the second is over, counting the others (a loop of connections wrote 71,826 lines in 25 s).
TEST_F(ServerTest, ClientsComingAndGoingInALoopAreCountedNotLoggedOneByOne) {
  std::ostringstream out;
  restart_logging_to(&out);
  proto::Hello h = hello();
  for (int k = 0; k < 20; ++k) {
    int fd = connect_raw();
    int shm = -1;
    proto::HelloReply r = exchange(fd, &h, sizeof h, &shm);
    ASSERT_EQ(r.status, 0) << r.message;
    close(shm);
    close(fd);
    for (int t = 0; t < 5 && server_->num_clients() > 0; ++t) server_->tick(10);
    ASSERT_EQ(server_->num_clients(), 0u);
  }
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    std::istringstream lines(out.str());
    for (std::string l; std::getline(lines, l);) n += l.find(what) != std::string::npos;
    return n;
  };
  const std::size_t logged = count(") connected") + count(") disconnected");
  EXPECT_EQ(logged, 10u) << out.str();
  for (int i = 0; i < 150 && !count("more clients connected or left"); ++i) server_->tick(10);
  EXPECT_EQ(count(std::to_string(40 - logged) + " more clients connected or left in a second"), 1u)
      << out.str();
}

// One process connects once (its library); more connections from it would take the slots and
// budget shares of other programs: past four, they are refused with a message; a slot freed is
// taken again.
TEST_F(ServerTest, OneProcessHoldsAtMostFourConnections) {
  proto::Hello h = hello();
  std::vector<int> fds, shms;
  for (int k = 0; k < 4; ++k) {
    int fd = connect_raw(), shm = -1;
    ASSERT_EQ(exchange(fd, &h, sizeof h, &shm).status, 0);
    fds.push_back(fd);
    shms.push_back(shm);
  }
  int fd = connect_raw(), shm = -1;
  proto::HelloReply r = exchange(fd, &h, sizeof h, &shm);
  EXPECT_EQ(r.status, static_cast<std::int32_t>(proto::HelloStatus::kFull));
  EXPECT_NE(std::string(r.message).find("already holds 4 connections"), std::string::npos)
      << r.message;
  EXPECT_EQ(server_->num_clients(), 4u);
  close(fd);
  close(fds.back());
  close(shms.back());
  fds.pop_back();
  shms.pop_back();
  server_->tick(0);
  EXPECT_EQ(server_->num_clients(), 3u);
  fd = connect_raw();
  ASSERT_EQ(exchange(fd, &h, sizeof h, &shm).status, 0);
  fds.push_back(fd);
  shms.push_back(shm);
  EXPECT_EQ(server_->num_clients(), 4u);
  for (int f : fds) close(f);
  for (int s : shms) close(s);
}

TEST_F(ServerTest, ClientExitIsReaped) {
  int fd = connect_raw();
  proto::Hello h = hello();
  int shm = -1;
  ASSERT_EQ(exchange(fd, &h, sizeof h, &shm).status, 0);
  EXPECT_EQ(server_->num_clients(), 1u);
  close(fd);
  close(shm);
  server_->tick(0);
  EXPECT_EQ(server_->num_clients(), 0u);
}

TEST_F(ServerTest, MeasuresPlansAndPublishesAGuidedPlan) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  // The budget: two of the four 64 MiB regions at a time.
  ASSERT_NO_FATAL_FAILURE(connect_library(128ull << 20, &lib, &fd, &shm));
  // On connection the daemon asks for kernel timings.
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_TRUE(lib.plan(&ph, &entries));
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kMeasure));

  // A kernel name, in two chunks.
  {
    const char name[] = "gemm_kernel_with_a_rather_long_name_for_two_chunks";
    for (int k = 0; k < 2; ++k) {
      proto::EventRecord e{};
      e.type = static_cast<std::uint16_t>(proto::EventType::kKernelName);
      e.w[0] = 101;
      e.count = static_cast<std::uint16_t>(k);
      if (k == 1) e.flags = proto::kLastChunk;
      std::size_t off = 32 * k, n = std::min<std::size_t>(32, sizeof name - 1 - off);
      std::memcpy(&e.w[1], name + off, n);
      ASSERT_TRUE(lib.push(e));
    }
  }
  lib.regions_and_iterations(*server_);
  auto function_at = FakeLibrary::function_at;
  ASSERT_NO_FATAL_FAILURE(tick_until_guided(lib, &ph, &entries));
  nlohmann::json st = server_->status_json();
  ASSERT_EQ(st["clients"].size(), 1u);
  EXPECT_EQ(st["clients"][0]["iteration_length"], 8u);
  EXPECT_EQ(st["clients"][0]["effective_budget_bytes"], 128ull << 20);
  EXPECT_EQ(ph.iteration_length, 8u);
  EXPECT_EQ(ph.seq_length, 8u);
  // Every kernel appears once per iteration: the first alone tells where an iteration starts.
  ASSERT_EQ(ph.signature_length, 1u);
  ASSERT_FALSE(entries.empty());
  for (const proto::PlanEntry& e : entries) {
    EXPECT_NE(e.region_id, 0u);  // allocated before the iteration, alive after: persistent
    EXPECT_LT(e.evict_after, ph.seq_length);
    // Launch seqs follow each other, so offset o is the o-th kernel after the signature's.
    std::uint64_t k0 = ph.signature[0] == proto::kCopyFunction ? 7 : (ph.signature[0] - 101) / 2;
    EXPECT_EQ(e.evict_function, function_at((k0 + e.evict_after) % 8));
  }

  // The trace carries the measured durations and the kernel's name.
  policy::Trace trace;
  ASSERT_NO_FATAL_FAILURE(trace_of_client(&trace));
  ASSERT_EQ(trace.launches.size(), 8u);
  EXPECT_EQ(trace.regions.size(), 4u);
  for (const policy::Launch& l : trace.launches) EXPECT_DOUBLE_EQ(l.dur_us, 100.0);
  // The upload says which way it crosses the link; kernels cross none.
  EXPECT_EQ(std::count_if(trace.launches.begin(), trace.launches.end(),
                          [](const policy::Launch& l) { return l.kernel == "memcpy"; }),
            1);
  for (const policy::Launch& l : trace.launches)
    EXPECT_EQ(l.link, l.kernel == "memcpy" ? policy::CopyLink::kToDevice : policy::CopyLink::kNone);
  bool named = false;
  for (const policy::Launch& l : trace.launches)
    named = named || l.kernel == "gemm_kernel_with_a_rather_long_name_for_two_chunks";
  EXPECT_TRUE(named);
  // With it, the plan the library follows, in that trace's positions: one entry per published
  // one, and the simulator runs it.
  {
    nlohmann::json tr = server_->handle_request({{"cmd", "trace"}, {"pid", getpid()}});
    ASSERT_TRUE(tr.contains("plan_json")) << tr.dump();
    policy::Plan followed;
    std::string error;
    ASSERT_TRUE(
        policy::parse_plan_json(tr["plan_json"].get<std::string>(), trace, &followed, &error))
        << error;
    EXPECT_EQ(followed.entries.size(), entries.size());
    policy::Analysis a = policy::analyze(trace);
    EXPECT_TRUE(policy::simulate(a, followed, 128ull << 20).feasible);
  }

  nlohmann::json pol = server_->handle_request({{"cmd", "policy"}, {"pid", getpid()}});
  ASSERT_TRUE(pol["ok"].get<bool>());
  EXPECT_EQ(pol["clients"][0]["mode"], "guided") << pol.dump();
  EXPECT_EQ(pol["clients"][0]["entries"].size(), entries.size());

  // Lateness reported for an entry is checked against the simulator (Capuchin's feedback rule,
  // where moving the trigger earlier costs nothing). Here every access touches both regions that
  // fit, so a prefetch started earlier would push out a region the next access needs: the daemon
  // keeps the trigger, says so, and republishes nothing (policy/capuchin_test.cpp covers moves).
  std::uint64_t gen = ph.generation;
  std::size_t late_entry = entries.size();
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].trigger != proto::kNoOffset) late_entry = i;
  if (late_entry < entries.size()) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kLateness);
    e.w[0] = gen & 0x3fffffff;
    e.w[1] = late_entry;
    e.w[2] = 50000;  // 50 us late
    ASSERT_TRUE(lib.push(e));
    bool kept = false;
    for (int i = 0; i < 100 && ph.generation == gen && !kept; ++i) {
      server_->tick(5);
      ASSERT_TRUE(lib.plan(&ph, &entries));
      nlohmann::json p = server_->handle_request({{"cmd", "policy"}, {"pid", getpid()}});
      kept = p["clients"][0]["entries"][late_entry]["lateness"].value("trigger_kept", false);
    }
    EXPECT_TRUE(kept) << "the lateness was never answered";
    EXPECT_EQ(ph.generation, gen);
    // Answered once: the same lateness reported again asks nothing more of the planner.
    ASSERT_TRUE(lib.push(e));
    for (int i = 0; i < 10; ++i) server_->tick(5);
    ASSERT_TRUE(lib.plan(&ph, &entries));
    EXPECT_EQ(ph.generation, gen);
  }

  // Divergences, three in a row: the daemon measures again.
  for (int k = 0; k < 3; ++k) ASSERT_NO_FATAL_FAILURE(lib.divergence(ph.generation));
  server_->tick(0);
  ASSERT_TRUE(lib.plan(&ph, &entries));
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kMeasure));
  close(shm);
  close(fd);
}

// A program that leaves its plan for a shape that never starts the way the plan's iteration does
// (training, then forward-only evaluation) diverges once, and never finishes another iteration
// of the plan: once it has run three iterations' worth of launches (at least 192) since its last
// one, the daemon measures again, as after three divergences.
// A plan with more entries than the client's plan area holds is cut to what the area holds, and
// the trace's plan (what the library follows, for `trace dump`) is that cut plan, not the whole.
TEST_F(ServerTest, APlanLargerThanThePlanAreaIsCutAndDumpedAsPublished) {
  ClientLimits limits;
  limits.plan_capacity = 1;
  server_->set_client_limits(limits);
  FakeLibrary lib;
  int fd = -1, shm = -1;
  // The budget: two of the four 64 MiB regions at a time (a plan of several entries).
  ASSERT_NO_FATAL_FAILURE(connect_library(128ull << 20, &lib, &fd, &shm));
  lib.regions_and_iterations(*server_);
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(tick_until_guided(lib, &ph, &entries));
  EXPECT_EQ(entries.size(), 1u);
  nlohmann::json pol = server_->handle_request({{"cmd", "policy"}, {"pid", getpid()}});
  ASSERT_TRUE(pol["ok"].get<bool>());
  EXPECT_EQ(pol["clients"][0]["entries"].size(), 1u);
  nlohmann::json tr = server_->handle_request({{"cmd", "trace"}, {"pid", getpid()}});
  ASSERT_TRUE(tr.contains("plan_json")) << tr.dump();
  policy::Trace trace;
  ASSERT_NO_FATAL_FAILURE(trace_of_client(&trace));
  policy::Plan followed;
  std::string error;
  ASSERT_TRUE(policy::parse_plan_json(tr["plan_json"].get<std::string>(), trace, &followed, &error))
      << error;
  EXPECT_EQ(followed.entries.size(), 1u);
  close(shm);
  close(fd);
}

TEST_F(ServerTest, AProgramThatLeftItsPlanForGoodIsMeasuredAgain) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(guided_client(lib, &fd, &shm, &ph, &entries));
  ASSERT_NO_FATAL_FAILURE(lib.divergence(ph.generation));
  // Another shape: two kernels the plan never had, over and over.
  auto other_shape = [&](int launches) {
    for (int k = 0; k < launches; ++k) lib.access(501 + 2 * (k % 2), 1, 2);
    server_->tick(0);
    ASSERT_TRUE(lib.plan(&ph, &entries));
  };
  other_shape(100);  // one divergence, not yet three iterations' worth off the plan
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided));
  other_shape(100);
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kMeasure));
  close(shm);
  close(fd);
}

// The search runs plan_search_threads walks side by side, no more than the machine's hardware
// threads, and status says so; with one walk it says nothing of walks.
TEST_F(ServerTest, TheSearchRunsPlanSearchThreadsWalks) {
  for (std::uint64_t threads : {1, 2}) {
    SCOPED_TRACE(threads);
    if (threads > 1) TearDown(), SetUp();  // a fresh gswapd for the setting
    config_.merge_json(nlohmann::json{{"plan_search_threads", threads}}.dump());
    FakeLibrary lib;
    int fd = -1, shm = -1;
    proto::PlanHeader ph{};
    std::vector<proto::PlanEntry> entries;
    ASSERT_NO_FATAL_FAILURE(guided_client(lib, &fd, &shm, &ph, &entries));
    const std::string planner = server_->status_json()["clients"][0]["planner"];
    EXPECT_NE(planner.find(" plans simulated in "), std::string::npos) << planner;
    const bool side_by_side = threads > 1 && std::thread::hardware_concurrency() > 1;
    EXPECT_EQ(planner.find(", 2 walks side by side)") != std::string::npos, side_by_side)
        << planner;
    EXPECT_EQ(planner.find("walks") == std::string::npos, !side_by_side) << planner;
    close(shm);
    close(fd);
  }
}

// A plan whose iteration start the library never meets (seen once on an H200, where GPT-2's plan
// went unfollowed for 14 s without a divergence) is never followed and never diverges: after three
// iterations' worth of launches without a followed iteration, the daemon measures again.
TEST_F(ServerTest, APlanWhoseStartIsNeverMetIsMeasuredAgain) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(guided_client(lib, &fd, &shm, &ph, &entries));
  auto unmatched = [&](int launches) {
    for (int k = 0; k < launches; ++k) lib.access(501 + 2 * (k % 2), 1, 2);
    server_->tick(0);
    ASSERT_TRUE(lib.plan(&ph, &entries));
  };
  unmatched(100);  // no divergence, not yet three iterations' worth
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided));
  unmatched(100);  // three iterations' worth, but the library's counters may lag: not yet
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided));
  std::this_thread::sleep_for(std::chrono::milliseconds(3100));
  unmatched(10);
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kMeasure));
  EXPECT_EQ(server_->status_json()["clients"][0]["planner"],
            "none: measuring again (the plan's start was never met)");
  close(shm);
  close(fd);
}

// A GPU budget too small to share still leaves every client a budget: one byte, the least there
// is, never 0, which the library reads as no budget at all.
TEST_F(ServerTest, ATinyGpuBudgetLeavesEveryClientOneByte) {
  config_.merge_json(nlohmann::json{{"gpu_budget", "1B"}}.dump());
  std::ostringstream out;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&out));
  FakeLibrary a, b;
  int fa = -1, sa = -1, fb = -1, sb = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(0, &a, &fa, &sa));
  ASSERT_NO_FATAL_FAILURE(connect_library(0, &b, &fb, &sb));
  server_->tick(0);
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_TRUE(a.plan(&ph, &entries));
  EXPECT_EQ(ph.budget_bytes, 1u);
  ASSERT_TRUE(b.plan(&ph, &entries));
  EXPECT_EQ(ph.budget_bytes, 1u);
  for (int fd : {fa, sa, fb, sb}) close(fd);
}

// measure_every beyond the plan header's 32 bits means one measured iteration in 2^32 - 1, not
// its low bits (2^40 would read as 0).
TEST_F(ServerTest, AHugeMeasureEverySaturatesInThePlan) {
  config_.merge_json(nlohmann::json{{"measure_every", 1ull << 40}}.dump());
  std::ostringstream out;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&out));
  FakeLibrary lib;
  int fd = -1, shm = -1;
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(guided_client(lib, &fd, &shm, &ph, &entries));
  EXPECT_EQ(ph.measure_every, 0xffffffffu);
  close(shm);
  close(fd);
}

// Calls between launches (allocations, frees) prepare the launch after them: each plan entry says
// how many come right before its back-access, so the library lets them take memory first.
TEST_F(ServerTest, APlanSaysWhichCallsPrepareEachBackAccess) {
  FakeLibrary lib;
  lib.calls_before_access = true;
  int fd = -1, shm = -1;
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(guided_client(lib, &fd, &shm, &ph, &entries));
  EXPECT_EQ(ph.seq_length, 8u + 28u);
  nlohmann::json pol = server_->handle_request({{"cmd", "policy"}, {"pid", getpid()}});
  const std::uint64_t first = pol["clients"][0]["iteration_first_seq"].get<std::uint64_t>();
  std::size_t with_back = 0, led = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const proto::PlanEntry& e = entries[i];
    if (e.back_access == proto::kNoOffset) continue;
    ++with_back;
    auto it = lib.calls_before.find(first + e.back_access);
    ASSERT_NE(it, lib.calls_before.end()) << "entry " << i << ": no access at its back_access";
    EXPECT_EQ(e.back_lead, it->second) << "entry " << i;
    EXPECT_EQ(pol["clients"][0]["entries"][i]["back_lead"], it->second);
    led += e.back_lead > 0;
  }
  EXPECT_GT(with_back, 0u);
  EXPECT_GT(led, 0u);
  close(shm);
  close(fd);
}

// A program uploads its initial weights before its first iteration, and each iteration starts
// with uploads too: the window gswapd first sees begins with more uploads in a row than any
// iteration has. A plan must start where the library will find its signature again.
TEST_F(ServerTest, APlanStartsWhereEveryIterationStarts) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(192ull << 20, &lib, &fd, &shm));
  lib.timing_lag = 20;
  lib.regions(4);
  for (std::uint64_t k = 0; k < 4; ++k) lib.access(proto::kCopyFunction, k + 1, k + 1);
  // An iteration, as a layered model's: two uploads, then 28 kernels, of which only one (a
  // loss) occurs once; the others repeat layer by layer.
  constexpr std::uint64_t kLength = 30;
  auto function_at = [](std::uint64_t k) {
    return k < 2 ? proto::kCopyFunction : k == 9 ? 99 : 101 + 2 * ((k - 2) % 7);
  };
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  for (int it = 0; it < 64 && ph.mode != static_cast<std::uint32_t>(proto::PlanMode::kGuided);
       ++it) {
    for (std::uint64_t k = 0; k < kLength; ++k)
      lib.access(function_at(k), k % 4 + 1, (k + 1) % 4 + 1);
    for (int i = 0; i < 50 && ph.mode != static_cast<std::uint32_t>(proto::PlanMode::kGuided);
         ++i) {
      server_->tick(2);
      ASSERT_TRUE(lib.plan(&ph, &entries));
    }
  }
  ASSERT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided))
      << server_->status_json().dump();
  EXPECT_EQ(ph.iteration_length, kLength);
  // The library finds the signature in every iteration: it occurs in the iteration (read
  // cyclically), at the position the plan counts from.
  ASSERT_GE(ph.signature_length, 1u);
  bool found = false;
  for (std::uint64_t p = 0; p < kLength && !found; ++p) {
    found = true;
    for (std::uint32_t k = 0; k < ph.signature_length && found; ++k)
      found = ph.signature[k] == function_at((p + k) % kLength);
  }
  EXPECT_TRUE(found) << "signature of " << ph.signature_length << " launches, first "
                     << ph.signature[0];
  close(shm);
  close(fd);
}

// A model of identical layers: seen before its first iteration has ended, the stream repeats
// layer by layer, and gswapd may take one layer for the iteration. With room for a layer, the plan
// for that moves nothing, but the library swaps all the same; with less, the library follows it
// layer by layer without diverging. Either way gswapd measures again and plans the whole
// iteration. `layer_planned`: the plan for one layer moves something (the second case).
void ServerTest::layers_taken_for_the_iteration(std::uint64_t budget, bool layer_planned) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(budget, &lib, &fd, &shm));
  constexpr std::uint64_t kLayers = 40, kLength = 1 + 3 * kLayers + 1;
  lib.regions(kLayers + 2);
  proto::StatusPayload st{};
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  // An upload, a block of three kernels per layer (layer i touches regions i + 1 and i + 2, then
  // the last region), a loss. The server ticks every 16 launches; the library reports its swaps
  // once an iteration.
  std::uint64_t launches = 0;
  auto iteration = [&] {
    ASSERT_TRUE(lib.plan(&ph, &entries));
    // The library times every launch only while measuring (one iteration in measure_every while
    // guided, which this one of many identical layers would be).
    lib.timed = ph.mode == static_cast<std::uint32_t>(proto::PlanMode::kMeasure);
    auto access = [&](std::uint64_t f, std::uint64_t a, std::uint64_t b) {
      lib.access(f, a, b);
      if (++launches % 16 == 0) server_->tick(0);
    };
    access(proto::kCopyFunction, 1, 1);
    for (std::uint64_t i = 0; i < kLayers; ++i) {
      access(201, i + 1, i + 2);
      access(203, i + 2, i + 2);
      access(205, i + 2, kLayers + 2);
    }
    access(207, kLayers + 1, kLayers + 2);
    st.swapped_out += 36ull * (64ull << 20);
    lib.status(st);
  };
  iteration();
  // A plan made from one layer: guided, or passive with nothing to move.
  bool layer_plan = false;
  for (int i = 0; i < 200 && !layer_plan; ++i) {
    server_->tick(2);
    ASSERT_TRUE(lib.plan(&ph, &entries));
    nlohmann::json c = server_->status_json()["clients"][0];
    layer_plan = layer_planned ? ph.mode == static_cast<std::uint32_t>(proto::PlanMode::kGuided) &&
                                     ph.iteration_length < kLength
                               : c["mode"] == "passive" &&
                                     !c["planner"].get<std::string>().starts_with("none");
  }
  ASSERT_TRUE(layer_plan) << server_->status_json().dump();
  // The program goes on, iteration after iteration.
  const std::size_t length = kLength;
  ASSERT_NO_FATAL_FAILURE(iterate_until_guided(lib, iteration, length, &ph, &entries));
  close(shm);
  close(fd);
}

TEST_F(ServerTest, APlanThatMovesNothingWhileTheLibrarySwapsIsMeasuredAgain) {
  layers_taken_for_the_iteration(256ull << 20, false);  // four of the 42 regions
}

TEST_F(ServerTest, APlanMadeFromOneLayerIsMeasuredAgain) {
  layers_taken_for_the_iteration(128ull << 20, true);  // two of the 42 regions
}

// Small allocations come and go within an iteration, so the memory the library cannot move
// changes from one status read to the next. Plans are made for the most it reported: a plan is
// never thrown away because the figure moved while it was being made.
TEST_F(ServerTest, FixedBytesThatComeAndGoDoNotKeepAPlanFromLanding) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  // The budget: two of the four regions and room to spare.
  ASSERT_NO_FATAL_FAILURE(connect_library(192ull << 20, &lib, &fd, &shm));
  proto::StatusPayload st{};
  st.fixed_bytes = 3ull << 19;  // 1.5 MiB
  lib.status(st);
  lib.regions_and_iterations(*server_);
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  for (int i = 0; i < 500 && ph.mode != static_cast<std::uint32_t>(proto::PlanMode::kGuided); ++i) {
    st.fixed_bytes = i % 2 ? (5ull << 19) - 4096 : 1ull << 19;  // 2.5 MiB less a page, 0.5 MiB
    lib.status(st);
    server_->tick(2);
    ASSERT_TRUE(lib.plan(&ph, &entries));
  }
  nlohmann::json s = server_->status_json();
  ASSERT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided)) << s.dump();
  // The most reported, rounded up to Server::kMaxFixedReserveStep (a sixteenth of this budget is
  // more).
  EXPECT_EQ(s["clients"][0]["plan_budget_bytes"], (192ull << 20) - (5ull << 19));
  close(shm);
  close(fd);
}

// The reserve for fixed bytes is rounded up to a sixteenth of the budget, between 64 KiB and
// 256 KiB: an 8-byte allocation takes 64 KiB of a 1 MiB budget, not a quarter of it, and
// 256 KiB of a large one.
TEST_F(ServerTest, TheFixedReserveIsRoundedToAStepThatFollowsTheBudget) {
  auto plan_budget_with = [&](std::uint64_t budget, std::initializer_list<std::uint64_t> fixed) {
    FakeLibrary lib;
    int fd = -1, shm = -1;
    connect_library(budget, &lib, &fd, &shm);
    for (std::uint64_t f : fixed) {
      proto::StatusPayload st{};
      st.fixed_bytes = f;
      lib.status(st);
      for (int i = 0; i < 3; ++i) server_->tick(2);
    }
    nlohmann::json s = server_->status_json();
    close(shm);
    close(fd);
    for (int i = 0; i < 20 && !server_->status_json()["clients"].empty(); ++i) server_->tick(5);
    return s["clients"][0]["plan_budget_bytes"].get<std::uint64_t>();
  };
  EXPECT_EQ(plan_budget_with(1ull << 20, {8}), (1ull << 20) - (64ull << 10));
  // Only rises count: the most reported.
  EXPECT_EQ(plan_budget_with(1ull << 20, {8, 70ull << 10, 8}), (1ull << 20) - (128ull << 10));
  EXPECT_EQ(plan_budget_with(2ull << 20, {8}), (2ull << 20) - (128ull << 10));
  EXPECT_EQ(plan_budget_with(64ull << 20, {8}), (64ull << 20) - (256ull << 10));
}

// An input allocated and uploaded in every iteration before the iteration's signature has been
// launched in full: the library cannot name it by that upload, so its plan entry binds it where a
// kernel next reads it, and the plan published is the plan simulated, entry for entry.
TEST_F(ServerTest, ARegionUploadedBeforeTheSignatureIsBoundWhereAKernelReadsIt) {
  std::ostringstream log_text;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&log_text));
  FakeLibrary lib;
  int fd = -1, shm = -1;
  // Room for three 64 MiB regions: the input (128 MiB) and B must both leave while C and D work.
  ASSERT_NO_FATAL_FAILURE(connect_library(192ull << 20, &lib, &fd, &shm));
  lib.regions(3);  // B, C, D: ids 1 to 3
  // Each iteration: a new input A (128 MiB), uploaded; an upload into B (two uploads in a row: the
  // signature is both); a kernel reading A and B; ten kernels on C and D; a kernel reading A and
  // B again; A freed.
  constexpr std::uint64_t kLength = 14;
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  std::uint64_t input = 100;
  for (int it = 0; it < 200 && ph.mode != static_cast<std::uint32_t>(proto::PlanMode::kGuided);
       ++it) {
    ASSERT_NO_FATAL_FAILURE(upload_iteration(lib, ++input, &ph, &entries));
  }
  ASSERT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided))
      << server_->status_json().dump() << log_text.str();
  EXPECT_EQ(ph.iteration_length, kLength);
  ASSERT_EQ(ph.signature_length, 2u);
  EXPECT_EQ(log_text.str().find("left out"), std::string::npos) << log_text.str();
  // The input's entry: bound at the first kernel (offset 2 from the first upload), slot 0.
  bool input_planned = false;
  for (const proto::PlanEntry& e : entries) {
    if (e.bind_offset == proto::kNoOffset) continue;
    EXPECT_GE(e.bind_offset, ph.signature_length - 1) << "bound before the signature completes";
    EXPECT_LE(e.bind_offset, e.evict_after);
    input_planned = input_planned || (e.bind_offset == 2 && e.bind_slot == 0);
  }
  EXPECT_TRUE(input_planned) << log_text.str();
  close(shm);
  close(fd);
}

// A program that marks each iteration at the top of its loop, before the iteration allocates its
// input (as a Python loop does before PyTorch allocates): the iteration starts at the first launch
// after the mark, and the input allocated between the two is the iteration's own, planned and
// bound as without marks.
TEST_F(ServerTest, AnIterationMarkedBeforeItsAllocationsStartsAtItsFirstLaunch) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(192ull << 20, &lib, &fd, &shm));
  lib.regions(3);  // B, C, D: ids 1 to 3
  // Each iteration: a mark; a new input A (128 MiB), uploaded; an upload into B; a kernel reading
  // A and B; ten kernels on C and D; a kernel reading A and B again; A freed.
  constexpr std::uint64_t kLength = 14;
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  std::uint64_t input = 100, first_launch = 0;
  for (int it = 0; it < 200 && ph.mode != static_cast<std::uint32_t>(proto::PlanMode::kGuided);
       ++it) {
    ASSERT_NO_FATAL_FAILURE(lib.mark());
    ASSERT_NO_FATAL_FAILURE(upload_iteration(lib, ++input, &ph, &entries, &first_launch));
  }
  nlohmann::json st = server_->status_json();
  ASSERT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided)) << st.dump();
  EXPECT_EQ(st["clients"][0]["iteration_source"], "marks");
  EXPECT_EQ(ph.iteration_length, kLength);
  // Offsets count from the first upload, where the library finds the signature; the iteration
  // spans the calls from it to the next iteration's first upload.
  EXPECT_EQ(ph.signature[0], proto::kCopyFunction);
  EXPECT_EQ(ph.seq_length, kLength + 2);  // with the free and the next input's allocation
  EXPECT_EQ((ph.iteration_first_seq - first_launch) % ph.seq_length, 0u);
  // The input is the iteration's own: bound at the first kernel that reads it, not by its id.
  bool input_planned = false;
  for (const proto::PlanEntry& e : entries)
    input_planned = input_planned || (e.bind_offset == 2 && e.bind_slot == 0);
  EXPECT_TRUE(input_planned) << server_->handle_request({{"cmd", "policy"}}).dump();
  // The trace dump: the iteration's launches from the first upload, with its input allocated
  // before them and freed after them.
  policy::Trace trace;
  ASSERT_NO_FATAL_FAILURE(trace_of_client(&trace));
  ASSERT_EQ(trace.launches.size(), kLength);
  EXPECT_EQ(trace.launches.front().kernel, "memcpy");
  ASSERT_EQ(trace.iterations.size(), 1u);
  EXPECT_EQ(trace.iterations[0].first_seq, trace.launches.front().seq);
  const policy::Region* a = nullptr;
  for (const policy::Region& r : trace.regions)
    if (r.bytes == 128ull << 20) a = &r;
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->alloc_seq + 1, trace.launches.front().seq);
  ASSERT_TRUE(a->free_seq.has_value());
  EXPECT_EQ(*a->free_seq, trace.launches.back().seq + 1);
  close(shm);
  close(fd);
}

// A measured iteration changes the plan only for a lasting reason: one noisy sample of kernel
// time keeps the plan (and its feedback); two in a row make a new one; so does the link's first
// measurement when the plan was made with its default figure, and a link that moved. A launch
// whose timing never comes is planned with the duration of its function's other launches.
TEST_F(ServerTest, APlanIsMadeAgainForLastingDriftOrAFirstLinkMeasurement) {
  config_.merge_json(nlohmann::json{{"plan_search_ms", 10}}.dump());
  std::ostringstream log_text;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&log_text));
  log_->set_level(spdlog::level::debug);
  FakeLibrary lib;
  lib.follow_every = 20;  // the plan, once there is one, is followed
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(128ull << 20, &lib, &fd, &shm));
  lib.regions(4);
  // 20 launches: k touches regions k%4+1 and (k+1)%4+1; launches 5 and 6 run function 199, whose
  // launches are timed only at 6.
  auto function = [](std::uint64_t k) -> std::uint64_t {
    return k == 5 || k == 6 ? 199 : 101 + 2 * k;
  };
  auto launch = [&](std::uint64_t k) {
    lib.untimed_function = k == 5 ? 199 : 0;
    lib.access(function(k), k % 4 + 1, (k + 1) % 4 + 1);
  };
  std::uint64_t launches = 0;
  auto iterations = [&](int n) {
    for (int it = 0; it < n; ++it)
      for (std::uint64_t k = 0; k < 20; ++k) {
        launch(k);
        if (++launches % 40 == 0) server_->tick(0);
      }
  };
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  auto plans = [&] {
    std::string t = log_text.str();
    std::size_t n = 0;
    for (std::size_t at = t.find("entries, "); at != std::string::npos;
         at = t.find("entries, ", at + 1))
      ++n;
    return n;
  };
  // Iterations until a plan is followed, and a few more (each tick takes a sample); then what a
  // search under way lands.
  auto settle = [&] {
    for (int i = 0; i < 200; ++i) {
      iterations(1);
      server_->tick(2);
      ASSERT_TRUE(lib.plan(&ph, &entries));
      if (ph.mode == static_cast<std::uint32_t>(proto::PlanMode::kGuided) && i >= 6) break;
    }
    for (int i = 0; i < 20; ++i) server_->tick(2);
  };
  // A plan settle() left under way may land later on a loaded machine (a search of 10 ms took
  // 109 ms there): iterations until the k-th has.
  auto until_plans = [&](std::size_t k) {
    for (int i = 0; i < 2000 && plans() < k; ++i) {
      iterations(1);
      server_->tick(2);
    }
  };
  // The first plan, made before any swap copy was timed: the link at its default figure.
  settle();
  std::size_t n = plans();
  ASSERT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided)) << log_text.str();
  ASSERT_GE(n, 1u);
  {
    policy::Trace trace;
    ASSERT_NO_FATAL_FAILURE(trace_of_client(&trace));
    ASSERT_EQ(trace.launches.size(), 20u);
    for (const policy::Launch& l : trace.launches) EXPECT_DOUBLE_EQ(l.dur_us, 100.0) << l.seq;
  }
  // Nothing changed: no new plan.
  settle();
  EXPECT_EQ(plans(), n) << log_text.str();
  // The link is measured: a new plan.
  proto::StatusPayload st{};
  st.h2d_bytes_per_s = st.d2h_bytes_per_s = 1'000'000'000;
  lib.status(st);
  settle();
  until_plans(n + 1);
  EXPECT_EQ(plans(), n + 1) << log_text.str();
  EXPECT_NE(log_text.str().find("the link was measured"), std::string::npos);
  n = plans();
  // Nine launches of one iteration slow: one sample at most is over by more than a tenth (22.5%
  // if all nine fall in it, however the periods are cut), and the plan stays. Again until such a
  // sample was taken (a tick takes the newest period complete by then).
  const std::string kept = "plan kept until a second sample agrees";
  for (int attempt = 0; attempt < 20 && log_text.str().find(kept) == std::string::npos; ++attempt) {
    for (std::uint64_t k = 0; k < 20; ++k) {
      lib.duration_ns = k >= 7 && k < 16 ? 150000 : 100000;
      launch(k);
    }
    lib.duration_ns = 100000;
    settle();
  }
  EXPECT_EQ(plans(), n) << log_text.str();
  EXPECT_NE(log_text.str().find(kept), std::string::npos) << log_text.str();
  // Slow for good: a new plan after the second sample (launch 5, never timed, counted with the
  // duration it was planned with).
  lib.duration_ns = 150000;
  settle();
  until_plans(n + 1);
  EXPECT_EQ(plans(), n + 1) << log_text.str();
  EXPECT_NE(log_text.str().find("measured iteration 2950 us against 2000 us planned"),
            std::string::npos)
      << log_text.str();
  n = plans();
  // The link at half its speed for good: a new plan.
  st.h2d_bytes_per_s = st.d2h_bytes_per_s = 500'000'000;
  lib.status(st);
  settle();
  until_plans(n + 1);
  EXPECT_EQ(plans(), n + 1) << log_text.str();
  EXPECT_NE(log_text.str().find("link 0.50/0.50 GB/s against 1.00/1.00 GB/s planned"),
            std::string::npos)
      << log_text.str();
  close(shm);
  close(fd);
}

TEST(UntrustedText, KeepsPrintableUtf8AndEscapesTheRest) {
  EXPECT_EQ(printable_text("train.py"), "train.py");
  EXPECT_EQ(printable_text("tr\xc3\xa4in \xe2\x82\xac \xf0\x9f\x9a\x80"),
            "tr\xc3\xa4in \xe2\x82\xac \xf0\x9f\x9a\x80");       // ä, €, and a 4-byte emoji
  EXPECT_EQ(printable_text("tr\xe4in"), "tr\\xe4in");            // Latin-1
  EXPECT_EQ(printable_text("ab\xc3"), "ab\\xc3");                // cut in the middle of a character
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");           // an overlong '/'
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable_text("a\nb\x1b[31m\x7f"), "a\\x0ab\\x1b[31m\\x7f");
  EXPECT_EQ(printable_text("\xc2\x85"), "\\u0085");  // C1 next line
  // Noncharacters XML does not allow (an SVG plot's title holds a trace's path).
  EXPECT_EQ(printable_text("x\xef\xbf\xbe\xef\xbf\xbf\xef\xbf\xbd"), "x\\ufffe\\uffff\xef\xbf\xbd");
  EXPECT_EQ(printable_text(std::string("a\0b", 3)), "a\\x00b");
  // Right-to-left override, first strong isolate, line separator: they would reorder or break
  // what follows on the line.
  EXPECT_EQ(printable_text("k\xe2\x80\xae"
                           "abc\xe2\x81\xa8\xe2\x80\xa8"),
            "k\\u202eabc\\u2068\\u2028");
}

// A hostile executable name and kernel names that are not UTF-8 reach neither the log nor JSON
// as they were sent: status, policy and trace requests still answer, and no log line is forged.
TEST_F(ServerTest, ClientTextIsMadePrintableWhenReceived) {
  std::ostringstream log_text;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&log_text));

  int fd = connect_raw();
  proto::Hello h = hello();
  const char exe[] = "tr\xe4in\n[2026-01-01 00:00:00.000] [gswapd 1] [error] forged";
  std::memset(h.exe, 0, sizeof h.exe);
  std::memcpy(h.exe, exe, std::min(sizeof h.exe, sizeof exe - 1));
  int shm = -1;
  proto::HelloReply r = exchange(fd, &h, sizeof h, &shm);
  ASSERT_EQ(r.status, 0) << r.message;
  FakeLibrary lib;
  lib.map(shm, r.shm_bytes);
  // Kernel 101's name has an invalid byte; region 1's has a two-byte character across the
  // boundary between its chunks, then a newline.
  auto send_name = [&](proto::EventType type, std::uint64_t id, const std::string& name) {
    std::size_t chunks = (name.size() + 31) / 32;
    for (std::size_t k = 0; k < chunks; ++k) {
      proto::EventRecord e{};
      e.type = static_cast<std::uint16_t>(type);
      e.w[0] = id;
      e.count = static_cast<std::uint16_t>(k);
      if (k + 1 == chunks) e.flags = proto::kLastChunk;
      std::memcpy(&e.w[1], name.data() + 32 * k, std::min<std::size_t>(32, name.size() - 32 * k));
      ASSERT_TRUE(lib.push(e));
    }
  };
  send_name(proto::EventType::kKernelName, 101, "gemm\xff\xfe");
  send_name(proto::EventType::kRegionName, 1, std::string(31, 'w') + "\xc3\xa4\nx");
  ASSERT_NO_FATAL_FAILURE(lib.alloc(1, 1 << 20));
  for (int it = 0; it < 256; ++it) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kLaunch);
    e.seq = lib.seq++;
    e.count = 1;
    e.w[0] = 101 + 2 * (it % 8);
    e.w[1] = 1;
    ASSERT_TRUE(lib.push(e));
    if (it % 32 == 31) server_->tick(0);
  }

  nlohmann::json st = server_->status_json();
  ASSERT_EQ(st["clients"].size(), 1u);
  std::string shown = st["clients"][0]["exe"];
  EXPECT_EQ(shown, "tr\\xe4in\\x0a[2026-01-01 00:00:00.000] [gswapd 1] [error] forged");
  EXPECT_NO_THROW(st.dump());  // nlohmann throws on invalid UTF-8
  // The same through the socket, as gswapctl asks.
  std::string body, error;
  auto answered = std::async(std::launch::async, [&] {
    return control_request(server_->socket_file(), R"({"cmd": "status"})", &body, &error);
  });
  while (answered.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready)
    server_->tick(5);
  ASSERT_TRUE(answered.get()) << error;
  EXPECT_EQ(nlohmann::json::parse(body)["clients"][0]["exe"], shown);
  EXPECT_EQ(server_->num_clients(), 1u);
  nlohmann::json trace = server_->handle_request({{"cmd", "trace"}, {"pid", getpid()}});
  ASSERT_TRUE(trace["ok"].get<bool>()) << trace.dump();
  EXPECT_NE(trace["trace_json"].get<std::string>().find("gemm\\\\xff\\\\xfe"), std::string::npos);
  EXPECT_NO_THROW(server_->handle_request({{"cmd", "policy"}}).dump());
  EXPECT_NO_THROW(server_->handle_request({{"cmd", "timeline"}, {"pid", getpid()}}).dump());

  // Every log line is one the daemon wrote: the forged one is inside the connect line.
  std::istringstream lines(log_text.str());
  std::string line;
  int connected = 0;
  while (std::getline(lines, line)) {
    EXPECT_NE(line.rfind("[2026", 0), 0u) << line;
    connected += line.find("connected") != std::string::npos;
  }
  EXPECT_EQ(connected, 1);
  EXPECT_NE(log_text.str().find("tr\\xe4in\\x0a["), std::string::npos) << log_text.str();
  close(shm);
  close(fd);
}

// Randomized garbage rings through the daemon's own client path (the decoder fuzz test covers a
// million batches; this one proves the Client reports them so the server drops the client).
TEST(ClientFuzz, GarbageRingsAreReportedNeverCrash) {
  std::mt19937_64 rng(7);
  ClientLimits limits;
  limits.ring_capacity = 64;
  limits.plan_capacity = 4;
  int dropped = 0, rounds = 2000;
  for (int round = 0; round < rounds; ++round) {
    Client c(-1, 1, 0, "fuzz", limits);
    std::string error;
    ASSERT_TRUE(c.init_shm(&error)) << error;
    unsigned char* b = c.shm().base();
    const proto::ShmHeader& h = c.shm().header();
    auto* rc = reinterpret_cast<proto::RingControl*>(b + h.ring_control_offset);
    auto* slots = reinterpret_cast<unsigned char*>(b + h.ring_offset);
    std::size_t n = 1 + rng() % 64;
    for (std::size_t i = 0; i < n * sizeof(proto::EventRecord); ++i)
      slots[i] = static_cast<unsigned char>(rng());
    for (std::size_t i = 0; i < n; ++i)  // mostly known types, so deeper checks are reached
      reinterpret_cast<proto::EventRecord*>(slots)[i].type = static_cast<std::uint16_t>(rng() % 12);
    rc->head.store(round % 10 == 0 ? rng() : n);  // sometimes an impossible head
    if (!c.poll(&error)) {
      EXPECT_FALSE(error.empty());
      ++dropped;
    }
  }
  EXPECT_GT(dropped, rounds * 9 / 10);
}

TEST_F(ServerTest, ControlRequestsAreValidated) {
  EXPECT_FALSE(server_->handle_request({{"cmd", "launch-missiles"}})["ok"].get<bool>());
  EXPECT_FALSE(server_->handle_request({{"nocmd", 1}})["ok"].get<bool>());
  EXPECT_FALSE(server_->handle_request({{"cmd", "trace"}, {"pid", "x"}})["ok"].get<bool>());
  EXPECT_FALSE(server_->handle_request({{"cmd", "trace"}, {"pid", 1}})["ok"].get<bool>());
  // Not a process id: negative, 0, or beyond pid_t (which would wrap to a negative pid).
  for (const nlohmann::json& bad : {nlohmann::json(-5), nlohmann::json(0),
                                    nlohmann::json(9223372036854775809ull), nlohmann::json(1.5)}) {
    const nlohmann::json r = server_->handle_request({{"cmd", "policy"}, {"pid", bad}});
    EXPECT_FALSE(r["ok"].get<bool>()) << bad;
    EXPECT_EQ(r["error"], "'pid' must be a process id, 1 to 2147483647") << r;
  }
  // A process id, signed or unsigned in the JSON, is taken.
  for (const nlohmann::json& good : {nlohmann::json(getpid()), nlohmann::json(1u)})
    EXPECT_NE(server_->handle_request({{"cmd", "policy"}, {"pid", good}})["error"],
              "'pid' must be a process id, 1 to 2147483647")
        << good;
  EXPECT_TRUE(server_->handle_request({{"cmd", "status"}})["ok"].get<bool>());
}

TEST_F(ServerTest, SecondServerOnTheSameGpuRefuses) {
  Server second(config_, gpu_, log_);
  std::string error;
  bool already = false;
  EXPECT_FALSE(second.open(&error, &already));
  EXPECT_TRUE(already);
  EXPECT_NE(error.find("already serves GPU"), std::string::npos) << error;
}

}  // namespace
}  // namespace gswap::daemon

namespace gswap::daemon {
namespace {

// The signature must be one the library's matcher finds where an iteration starts. minitrain's
// iteration seen from its sixth forward layer on: fwd x7 (layers 6 to 12), loss, the backward,
// two uploads, fwd x5 (layers 1 to 5). "fwd x7" occurs once in it, but in the stream the matcher
// completes it at layers 1 to 7, five launches early, and "fwd x7, loss" it never completes (it
// starts over at the eighth fwd). No prefix works there; from the loss, one launch does.
TEST(Signature, IsOneTheLibrarysMatcherFindsAtTheStart) {
  constexpr std::uint64_t kFwd = 1, kLoss = 2, kBwd = 3, kUpload = 4;
  std::vector<std::uint64_t> mid_forward(7, kFwd);
  mid_forward.push_back(kLoss);
  for (int i = 0; i < 12; ++i) mid_forward.push_back(kBwd);
  mid_forward.push_back(kUpload);
  mid_forward.push_back(kUpload);
  for (int i = 0; i < 5; ++i) mid_forward.push_back(kFwd);
  EXPECT_FALSE(signature_found_at_start(mid_forward, 7));
  EXPECT_FALSE(signature_found_at_start(mid_forward, 8));
  for (std::size_t len = 1; len <= proto::kSignatureLength; ++len)
    EXPECT_FALSE(signature_found_at_start(mid_forward, len)) << len;
  std::vector<std::uint64_t> from_loss(mid_forward.begin() + 7, mid_forward.end());
  from_loss.insert(from_loss.end(), mid_forward.begin(), mid_forward.begin() + 7);
  EXPECT_EQ(signature_length(from_loss), 1u);
  EXPECT_TRUE(signature_found_at_start(from_loss, 1));
  // From the first upload: "upload" alone recurs at the next launch; "upload, upload" is found
  // only at the start.
  std::vector<std::uint64_t> from_upload(mid_forward.begin() + 20, mid_forward.end());
  from_upload.insert(from_upload.end(), mid_forward.begin(), mid_forward.begin() + 20);
  EXPECT_EQ(signature_length(from_upload), 2u);
}

// An iteration of blocks that repeat, with no function once per period (a deep model whose
// loss and optimizer run in its layers' kernels): from the forward's start no prefix is found
// only there, so the period starts where a window is, across the backward's end and the
// forward's start. Before, the phase stayed, and the library took a later forward block for the
// start and left every plan at the same launch.
TEST(Signature, APeriodOfRepeatedBlocksStartsAtAWindowFoundOnlyThere) {
  constexpr std::uint64_t kF1 = 1, kF2 = 2, kB1 = 3, kB2 = 4;
  std::vector<std::uint64_t> period;
  for (int i = 0; i < 20; ++i) period.insert(period.end(), {kF1, kF2});
  for (int i = 0; i < 20; ++i) period.insert(period.end(), {kB1, kB2});
  std::vector<std::uint64_t> symbols;
  for (int k = 0; k < 3; ++k) symbols.insert(symbols.end(), period.begin(), period.end());
  const std::size_t n = period.size();
  for (std::size_t len = 1; len <= proto::kSignatureLength; ++len)  // none from the forward's start
    EXPECT_FALSE(signature_found_at_start(period, len)) << len;
  const std::size_t phase = recognisable_phase(symbols, 0, n);
  ASSERT_NE(phase, 0u);
  ASSERT_LE(phase + n, symbols.size());
  const std::vector<std::uint64_t> from(symbols.begin() + static_cast<std::ptrdiff_t>(phase),
                                        symbols.begin() + static_cast<std::ptrdiff_t>(phase + n));
  const std::size_t len = signature_length(from);
  ASSERT_LE(len, proto::kSignatureLength);
  EXPECT_TRUE(signature_found_at_start(from, len));
  // A function once per period is still where the period starts.
  std::vector<std::uint64_t> with_loss = symbols;
  for (std::size_t k = 0; k < 3; ++k) with_loss[k * n + 45] = 9;
  EXPECT_EQ(recognisable_phase(with_loss, 0, n), 45u);
}

// A client whose launches never come timed (its timing events run out, its records are dropped)
// is never planned; status says why, with how many of the newest period's launches were timed.
TEST_F(ServerTest, StatusSaysWhyAClientIsNotPlannedYet) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(128ull << 20, &lib, &fd, &shm));
  lib.timed = false;
  lib.regions_and_iterations(*server_);
  for (int i = 0; i < 5; ++i) server_->tick(1);
  nlohmann::json c = server_->status_json()["clients"][0];
  EXPECT_EQ(c["mode"], "passive");  // the fake library reports no mode of its own
  EXPECT_EQ(c["iteration_length"], 8u);
  const std::string why = c["measure_wait"].get<std::string>();
  EXPECT_NE(why.find("iteration of 8 launches"), std::string::npos) << why;
  EXPECT_NE(why.find("has 0 of them timed, 90% needed"), std::string::npos) << why;
  close(shm);
  close(fd);
}

// A ResNet-like run, as PyTorch's on an H200: its start-up repeats a block of 19 kernels per
// layer (weight initialisation), which gswapd may take for the iteration and plan (nothing to
// move). Then come training iterations of 409 launches, made of blocks that repeat too, while the
// library swaps: gswapd measures again and follows the whole iteration.
TEST_F(ServerTest, ResnetLikeStartupThenLongIterations) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(256ull << 20, &lib, &fd, &shm));
  lib.timing_lag = 200;
  constexpr std::uint64_t kBlocks = 16, kRegions = 60;
  lib.regions(kRegions);
  proto::StatusPayload st{};
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  std::uint64_t launches = 0;
  auto access = [&](std::uint64_t f, std::uint64_t a, std::uint64_t b) {
    lib.access(f, a, b);
    if (++launches % 64 == 0) {
      server_->tick(0);
      ASSERT_TRUE(lib.plan(&ph, &entries));
      lib.timed = ph.mode == static_cast<std::uint32_t>(proto::PlanMode::kMeasure);
    }
  };
  // Start-up: 53 layers initialised, 19 kernels each.
  for (std::uint64_t l = 0; l < 53; ++l) {
    for (std::uint64_t k = 0; k < 19; ++k) access(301 + 2 * k, l % kRegions + 1, l % kRegions + 1);
    for (int i = 0; i < 2; ++i) server_->tick(1);
  }
  std::size_t iteration_length = 0;
  auto iteration = [&] {
    std::size_t n = 0;
    auto a = [&](std::uint64_t f, std::uint64_t x, std::uint64_t y) {
      access(f, x, y);
      ++n;
    };
    a(proto::kCopyFunction, 1, 1);
    a(501, 1, 2);
    a(503, 2, 2);
    for (std::uint64_t b = 0; b < kBlocks; ++b) {
      std::uint64_t r = 3 + b * 3;
      for (int c = 0; c < 3; ++c) {
        a(601, r, r + 1);      // conv
        a(603, r + 1, r + 1);  // bn
        a(605, r + 1, r + 2);  // relu
      }
      a(607, r + 2, r);  // add
      a(605, r + 2, r + 2);
    }
    a(701, 55, 56);  // loss
    a(703, 56, 57);
    for (std::uint64_t b = kBlocks; b-- > 0;) {
      std::uint64_t r = 3 + b * 3;
      for (int c = 0; c < 3; ++c) {
        a(801, r + 2, r + 1);
        a(803, r + 1, r + 1);
        a(805, r + 1, r);
        a(807, r, r + 1);
      }
      a(809, r, r + 2);
    }
    for (int k = 0; k < 20; ++k) a(901 + 2 * k, 58, 59);
    iteration_length = n;
    st.swapped_out += 36ull * (64ull << 20);
    lib.status(st);
  };
  // The library's swapping while it follows no plan is noticed after kIdleGraceMs (500 ms) of
  // wall time: iterations here take about 4 ms.
  ASSERT_NO_FATAL_FAILURE(iterate_until_guided(lib, iteration, iteration_length, &ph, &entries));
  close(shm);
  close(fd);
}

// A client whose own budget is below its share gets its own budget, and the others share what it
// leaves; one whose budget is above its share gets the share.
TEST_F(ServerTest, WhatAClientsOwnBudgetLeavesOfItsShareGoesToTheOthers) {
  FakeLibrary a, b, c;
  int fa = -1, sa = -1, fb = -1, sb = -1, fc = -1, sc = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(100ull << 20, &a, &fa, &sa));
  ASSERT_NO_FATAL_FAILURE(connect_library(4ull << 30, &b, &fb, &sb));
  ASSERT_NO_FATAL_FAILURE(connect_library(400ull << 20, &c, &fc, &sc));
  // 1 GiB: a third each is 341.3 MiB; a keeps 100 MiB and the others share 924 MiB, 462 MiB
  // each, above c's 400 MiB: c keeps 400 MiB and b gets the 524 MiB left.
  const nlohmann::json st = server_->status_json();
  ASSERT_EQ(st["clients"].size(), 3u);
  EXPECT_EQ(st["clients"][0]["budget_bytes"], 100ull << 20);
  EXPECT_EQ(st["clients"][1]["budget_bytes"], 524ull << 20);
  EXPECT_EQ(st["clients"][2]["budget_bytes"], 400ull << 20);
  for (int fd : {fa, sa, fb, sb, fc, sc}) close(fd);
}

// A gpu_budget above the device's memory is taken as it is, with a warning.
TEST_F(ServerTest, WarnsOfAGpuBudgetAboveTheDevice) {
  std::ostringstream out;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&out));
  EXPECT_EQ(out.str().find("above the device"), std::string::npos) << out.str();
  config_.merge_json(nlohmann::json{{"gpu_budget", "8GiB"}}.dump());
  std::ostringstream above;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&above));
  EXPECT_NE(above.str().find("gpu_budget 8589934592 bytes is above the device's 4294967296"),
            std::string::npos)
      << above.str();
}

// Once a plan is followed, the planner goes on searching from it (plan_refine_ms) and publishes
// a plan whose simulated step is at least 2% shorter. Here the first plan is the greedy one
// (plan_search_ms 0) of a ResNet-like iteration (forward, backward in reverse, optimizer) of 64
// MiB regions under a budget of 5 of them, which the search improves on by far more.
TEST_F(ServerTest, APlanFollowedIsRefined) {
  config_.merge_json(nlohmann::json{{"plan_search_ms", 0}, {"plan_refine_ms", 4000}}.dump());
  std::ostringstream log_text;
  ASSERT_NO_FATAL_FAILURE(restart_logging_to(&log_text));
  FakeLibrary lib;
  lib.follow_every = 33;  // an iteration's launches: the plan, once there is one, is followed
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(5 * (64ull << 20), &lib, &fd, &shm));
  constexpr std::uint64_t kLayers = 8;  // regions 1-8 activations, 9-16 weights, 17 the input
  lib.regions(2 * kLayers + 1);
  std::size_t length = 0;
  auto iteration = [&] {
    std::size_t n = 0;
    lib.access(proto::kCopyFunction, 17, 17), ++n;
    for (std::uint64_t l = 0; l < kLayers; ++l)
      lib.access(301 + 2 * l, l ? l : 17, kLayers + 1 + l), lib.access(501 + 2 * l, l + 1, l + 1),
          n += 2;
    for (std::uint64_t l = kLayers; l-- > 0;) lib.access(701 + 2 * l, l + 1, kLayers + 1 + l), ++n;
    for (std::uint64_t l = 0; l < kLayers; ++l)
      lib.access(901 + 2 * l, kLayers + 1 + l, l + 1), ++n;
    length = n;
  };
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(iterate_until_guided(lib, iteration, length, &ph, &entries));
  const std::uint64_t first_generation = ph.generation;
  const std::string first_planner = server_->status_json()["clients"][0]["planner"];
  // With no search time, the first search made its first seeds only: the refinement (whose first
  // step, 500 ms long, is still under way) makes the others.
  EXPECT_FALSE(server_->status_json()["clients"][0]["refinement"]["seeds_left"].empty());
  // The step the simulator gives the plan followed.
  auto followed_step = [&] {
    policy::Trace trace;
    trace_of_client(&trace);
    nlohmann::json tr = server_->handle_request({{"cmd", "trace"}, {"pid", getpid()}});
    policy::Plan plan;
    std::string error;
    EXPECT_TRUE(policy::parse_plan_json(tr["plan_json"].get<std::string>(), trace, &plan, &error))
        << error;
    const policy::Analysis a = policy::analyze(trace);
    return policy::simulate(a, plan, 5 * (64ull << 20)).step_time_us;
  };
  const double first_step = followed_step();
  // The refinement runs its steps on the planner thread; the poll loop publishes what it finds.
  for (int i = 0; i < 600 && ph.generation == first_generation; ++i) {
    server_->tick(10);
    ASSERT_TRUE(lib.plan(&ph, &entries));
  }
  ASSERT_NE(ph.generation, first_generation) << log_text.str();
  EXPECT_EQ(ph.mode, static_cast<std::uint32_t>(proto::PlanMode::kGuided));
  const std::string planner = server_->status_json()["clients"][0]["planner"];
  EXPECT_EQ(planner.rfind(first_planner + ", refined (", 0), 0u) << planner;
  EXPECT_NE(planner.find("% shorter"), std::string::npos) << planner;
  EXPECT_LE(followed_step(), 0.98 * first_step) << planner;
  // status says how far the refinement went.
  const nlohmann::json f = server_->status_json()["clients"][0]["refinement"];
  EXPECT_GE(f["steps"].get<int>(), 1) << f.dump();
  EXPECT_GT(f["plans_simulated"].get<int>(), 0) << f.dump();
  EXPECT_GE(f["published_gain"].get<double>(), 0.02) << f.dump();
  EXPECT_GE(f["best_gain"].get<double>(), f["published_gain"].get<double>()) << f.dump();
  EXPECT_NEAR(f["published_gain"].get<double>(), 1 - followed_step() / first_step, 1e-6)
      << f.dump();
  EXPECT_TRUE(f["seeds_left"].empty()) << f.dump();
  close(shm);
  close(fd);
}

// A job whose planning throws (here a refinement step from a plan naming a region the trace does
// not have) answers with an infeasible plan that says why; the planner thread, and gswapd with
// it, goes on to the next job.
TEST(PlannerThreadTest, APlanningFailureIsAnAnswerNotTheEnd) {
  const policy::Trace trace = policy::make_unet(2);
  const policy::Analysis a = policy::analyze(trace);
  PlannerThread planner;
  PlannerThread::Job bad;
  bad.client = 1;
  bad.trace = trace;
  bad.budget = a.peak_bytes / 2;
  bad.time_budget_ms = 50;
  bad.kind = PlannerThread::Kind::kRefine;
  bad.plan = policy::plan_capuchin(a, bad.budget);
  ASSERT_FALSE(bad.plan.entries.empty());
  bad.plan.entries[0].region = 1'000'000'007;
  bad.plan.entries[0].kind = policy::EvictKind::kRecompute;
  bad.allow_recompute = false;
  PlannerThread::Job good = bad;
  good.client = 2;
  good.kind = PlannerThread::Kind::kPlan;
  ASSERT_TRUE(planner.submit(std::move(bad)));
  ASSERT_TRUE(planner.submit(std::move(good)));
  std::vector<PlannerThread::Result> got;
  for (int i = 0; i < 1000 && got.size() < 2; ++i) {
    for (auto& r : planner.take_results()) got.push_back(std::move(r));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(got.size(), 2u);
  for (const auto& r : got) {
    if (r.client == 1) {
      EXPECT_FALSE(r.search.plan.feasible);
      EXPECT_EQ(r.search.plan.reason.rfind("planning failed: ", 0), 0u) << r.search.plan.reason;
    } else {
      EXPECT_TRUE(r.search.plan.feasible) << r.search.plan.reason;
    }
  }
}

// The memory a large job took (its copy of the trace, the analysis, the search) goes back to the
// system once it is done: a daemon that planned a long iteration once must not hold it for weeks.
TEST(PlannerThreadTest, ALargeJobsMemoryGoesBack) {
  auto resident_mib = [] {
    std::ifstream f("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    f >> size >> resident;
    return static_cast<double>(resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE))) /
           (1 << 20);
  };
  policy::TransformerConfig c;
  c.layers = 6000;
  c.hidden = 256;
  c.heads = 4;
  c.seq = 128;
  c.batch = 4;
  c.vocab = 1000;
  const policy::Trace trace = policy::make_transformer(c);
  const std::uint64_t peak = policy::analyze(trace).peak_bytes;
  PlannerThread planner;
  const double before = resident_mib();
  PlannerThread::Job job;
  job.client = 1;
  job.trace = trace;
  job.budget = peak / 2;
  job.time_budget_ms = 50;
  ASSERT_TRUE(planner.submit(std::move(job)));
  std::vector<PlannerThread::Result> got;
  for (int i = 0; i < 6000 && (got.empty() || !planner.idle()); ++i) {
    for (auto& r : planner.take_results()) got.push_back(std::move(r));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(got.size(), 1u);
  got.clear();
  const double after = resident_mib();
  EXPECT_LT(after - before, 64) << "resident " << before << " MiB before the job, " << after
                                << " MiB after; the trace has " << trace.launches.size()
                                << " launches";
}

// Refinement steps run when no other job waits; a planning job for a client drops its steps.
TEST(PlannerThreadTest, RefinementStepsWaitForEveryOtherJob) {
  const policy::Trace trace = policy::make_unet(2);
  const policy::Analysis a = policy::analyze(trace);
  PlannerThread planner;
  auto job = [&](std::uint64_t client, bool refine) {
    PlannerThread::Job j;
    j.client = client;
    j.trace = trace;
    j.budget = a.peak_bytes / 2;
    j.time_budget_ms = refine ? 100 : 0;
    if (refine) j.kind = PlannerThread::Kind::kRefine;
    j.plan = policy::plan_capuchin(a, j.budget);
    return j;
  };
  ASSERT_TRUE(planner.submit(job(1, true)));
  ASSERT_TRUE(planner.submit(job(2, true)));
  ASSERT_TRUE(planner.submit(job(3, false)));
  ASSERT_TRUE(planner.submit(job(4, true)));
  ASSERT_TRUE(planner.submit(job(4, false)));  // drops client 4's step
  EXPECT_FALSE(planner.submit(job(4, true)));  // while client 4's plan is waiting or made
  std::vector<PlannerThread::Result> got;
  for (int i = 0; i < 1000 && !planner.idle(); ++i) {
    for (auto& r : planner.take_results()) got.push_back(std::move(r));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& r : planner.take_results()) got.push_back(std::move(r));
  std::vector<std::pair<std::uint64_t, bool>> order;
  for (const auto& r : got) order.emplace_back(r.client, r.kind == PlannerThread::Kind::kRefine);
  // Client 1's step may have started before the rest arrived; client 2's waits for the plans.
  auto at = [&](std::uint64_t client, bool refine) {
    return std::find(order.begin(), order.end(), std::make_pair(client, refine)) - order.begin();
  };
  ASSERT_EQ(order.size(), 4u);
  EXPECT_LT(at(3, false), at(2, true));
  EXPECT_LT(at(4, false), at(2, true));
  for (const auto& r : got)
    if (r.kind == PlannerThread::Kind::kRefine) {
      EXPECT_EQ(r.search.seed_policy.rfind("refined", 0), 0u) << r.search.seed_policy;
    }
}

// A refinement step makes the seeds it is given beside its plan, and says which it did not make
// (here none, with no time left after its start plan).
TEST(PlannerThreadTest, ARefinementStepMakesTheSeedsItIsGiven) {
  const policy::Trace trace = policy::make_unet(2);
  const policy::Analysis a = policy::analyze(trace);
  PlannerThread planner;
  for (double ms : {0.0, 100.0}) {
    PlannerThread::Job j;
    j.client = 1;
    j.trace = trace;
    j.budget = a.peak_bytes / 2;
    j.time_budget_ms = ms;
    j.kind = PlannerThread::Kind::kRefine;
    j.plan = policy::plan_capuchin(a, j.budget);
    j.seeds = {"delta", "belady"};
    ASSERT_TRUE(planner.submit(std::move(j)));
    std::vector<PlannerThread::Result> got;
    for (int i = 0; i < 1000 && got.empty(); ++i) {
      for (auto& r : planner.take_results()) got.push_back(std::move(r));
      if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(got.size(), 1u);
    const std::vector<std::string> left =
        ms == 0 ? std::vector<std::string>{"belady", "delta"} : std::vector<std::string>{};
    EXPECT_EQ(got[0].search.seeds_left, left);
  }
}

// A Client fed through its ring directly, without a server: what one client costs gswapd.
struct DirectClient {
  explicit DirectClient(const ClientLimits& limits) : client(-1, getpid(), 0, "direct", limits) {
    std::string error;
    EXPECT_TRUE(client.init_shm(&error)) << error;
    lib.map(client.shm().fd(), client.shm().bytes());
  }
  // Pushes a record, draining the ring into the client first when it is full.
  void push(const proto::EventRecord& e) {
    if (lib.push(e)) return;
    drain();
    ASSERT_TRUE(lib.push(e));
  }
  void drain() {
    std::string error;
    ASSERT_TRUE(client.poll(&error)) << error;
  }
  void alloc(std::uint64_t id) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kAlloc);
    e.seq = lib.seq++;
    e.w[0] = id;
    e.w[1] = id << 21;
    e.w[2] = 2 << 20;
    push(e);
  }
  void free(std::uint64_t id) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kFree);
    e.seq = lib.seq++;
    e.w[0] = id;
    push(e);
  }
  void launch(std::uint64_t function, std::uint64_t region) {
    launch_at(lib.seq++, function, region);
  }
  // A launch with a given seq (lib.seq is left alone), as a thread other than the last drained
  // would send it.
  void launch_at(std::uint64_t seq, std::uint64_t function, std::uint64_t region) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kLaunch);
    e.seq = seq;
    e.count = region ? 1 : 0;  // region 0: a launch that touches none
    e.w[0] = function;
    e.w[1] = region;
    push(e);
  }
  void timing(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t duration_ns) {
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kGpuTiming);
    e.seq = seq;
    e.w[0] = start_ns;
    e.w[1] = duration_ns;
    push(e);
  }
  void name(proto::EventType type, std::uint64_t id, const std::string& text, bool last = true) {
    const std::size_t chunks = std::max<std::size_t>(1, (text.size() + 31) / 32);
    for (std::size_t k = 0; k < chunks; ++k) {
      proto::EventRecord e{};
      e.type = static_cast<std::uint16_t>(type);
      e.w[0] = id;
      e.count = static_cast<std::uint16_t>(k);
      if (last && k + 1 == chunks) e.flags = proto::kLastChunk;
      if (text.size() > 32 * k)
        std::memcpy(&e.w[1], text.data() + 32 * k, std::min<std::size_t>(32, text.size() - 32 * k));
      push(e);
    }
  }

  Client client;
  FakeLibrary lib;
};

// A registration naming a source twice (a garbled client; the library sends each once) gives a
// trace that names it once: a trace naming a source twice is refused by its readers.
TEST(ClientTrace, ASourceNamedTwiceIsInTheTraceOnce) {
  ClientLimits limits;
  limits.trace_launches = 4096;
  DirectClient d(limits);
  d.alloc(1);
  d.alloc(2);
  proto::EventRecord e{};
  e.type = static_cast<std::uint16_t>(proto::EventType::kRecomputable);
  e.count = 3;
  e.w[0] = 2;     // region 2, recomputed from region 1, named three times
  e.w[1] = 5000;  // ns
  e.w[2] = e.w[3] = e.w[4] = 1;
  d.push(e);
  for (int i = 0; i < 400; ++i) {
    const std::uint64_t seq = d.lib.seq;
    d.launch(100 + i % 4, 1 + i % 2);
    d.timing(seq, 1'000'000 + seq * 1000, 500);
  }
  d.drain();
  const policy::Trace t = d.client.last_iteration_trace(1ull << 30);
  bool found = false;
  for (const policy::Region& r : t.regions)
    if (r.id == 2 && r.recompute) {
      found = true;
      EXPECT_EQ(r.recompute->sources, std::vector<policy::RegionId>{1});
    }
  EXPECT_TRUE(found);
  std::string error;
  policy::Trace back;
  EXPECT_TRUE(policy::parse_trace_json(policy::write_trace_json(t), &back, &error)) << error;
}

// A region recomputed from a region that is itself recomputed from another, and so on: the trace
// holds every region of the chain, so it names no source it does not hold (gswapctl simulate
// refuses a trace that does).
TEST(ClientTrace, AChainOfRecomputationsIsInTheTraceToItsEnd) {
  ClientLimits limits;
  limits.trace_launches = 4096;
  DirectClient d(limits);
  constexpr std::uint64_t kChain = 30;
  for (std::uint64_t r = 1; r <= kChain; ++r) d.alloc(r);
  d.alloc(100);
  for (std::uint64_t r = 1; r < kChain; ++r) {  // region r recomputed from region r + 1
    proto::EventRecord e{};
    e.type = static_cast<std::uint16_t>(proto::EventType::kRecomputable);
    e.count = 1;
    e.w[0] = r;
    e.w[1] = 5000;  // ns
    e.w[2] = r + 1;
    d.push(e);
  }
  for (int i = 0; i < 400; ++i) {
    const std::uint64_t seq = d.lib.seq;
    d.launch(100 + i % 4, i % 2 ? 1 : 100);
    d.timing(seq, 1'000'000 + seq * 1000, 500);
  }
  d.drain();
  const policy::Trace t = d.client.last_iteration_trace(1ull << 30);
  std::set<policy::RegionId> held;
  for (const policy::Region& r : t.regions) held.insert(r.id);
  for (std::uint64_t r = 1; r <= kChain; ++r) EXPECT_TRUE(held.count(r)) << r;
  for (const policy::Region& r : t.regions) {
    if (!r.recompute) continue;
    for (policy::RegionId s : r.recompute->sources) EXPECT_TRUE(held.count(s)) << r.id;
  }
  std::string error;
  policy::Trace back;
  EXPECT_TRUE(policy::parse_trace_json(policy::write_trace_json(t), &back, &error)) << error;
}

// Launches a garbled client sends out of the rules (a seq sent twice; a region used before its
// allocation or after its free) still give traces that gswapctl simulate reads: the repeated
// launch is left out (one warning), a region's lifetime is stretched over its uses.
TEST(ClientTrace, LaunchesOutsideTheRulesGiveATraceItsReadersTake) {
  for (const std::string mode : {"repeated", "early", "late"}) {
    SCOPED_TRACE(mode);
    ClientLimits limits;
    limits.trace_launches = 4096;
    DirectClient d(limits);
    d.alloc(1);
    d.alloc(2);
    std::uint64_t t = 1000;
    auto timed_launch = [&](std::uint64_t function, std::uint64_t region) {
      const std::uint64_t seq = d.lib.seq;
      d.launch(function, region);
      d.timing(seq, t, 100'000);
      t += 120'000;
      return seq;
    };
    for (int it = 0; it < 20; ++it) {
      proto::EventRecord mark{};
      mark.type = static_cast<std::uint16_t>(proto::EventType::kIterationMark);
      mark.seq = d.lib.seq++;
      d.push(mark);
      const std::uint64_t act = 100 + static_cast<std::uint64_t>(it);
      if (mode == "early") {  // used at seq s, allocated at s + 1
        timed_launch(11, act);
        d.alloc(act);
      } else {
        d.alloc(act);
      }
      for (int k = 0; k < 6; ++k) {
        const std::uint64_t seq = timed_launch(13 + 2 * static_cast<std::uint64_t>(k), act);
        if (mode == "repeated" && k == 2) d.launch_at(seq, 31, 2);
      }
      d.free(act);
      if (mode == "late") timed_launch(41, act);  // used after its free
    }
    d.drain();
    const policy::Trace tr = d.client.last_iteration_trace(1ull << 30);
    ASSERT_FALSE(tr.launches.empty());
    std::string error;
    policy::Trace back;
    EXPECT_TRUE(policy::parse_trace_json(policy::write_trace_json(tr), &back, &error)) << error;
    if (mode == "repeated") {
      EXPECT_EQ(d.client.warnings().size(), 1u);
      for (const std::string& w : d.client.warnings())
        EXPECT_NE(w.find("seq the window holds already"), std::string::npos) << w;
    }
  }
}

// An iteration between two marks longer than half the window: once the window has let go of its
// first launches it is not taken from the window's front (shorter at every tick as the window
// slides); the span taken whole while the window held it stays, with no warning. One longer than
// the window is never taken (no length at all, not the one the window's front gives) and is said
// once.
TEST(ClientTrace, AnIterationLongerThanTheWindowLeavesIsNotCutShort) {
  for (const std::uint64_t length : {700u, 1500u}) {
    SCOPED_TRACE(length);
    ClientLimits limits;
    limits.trace_launches = 1024;
    DirectClient d(limits);
    d.alloc(1);
    auto mark = [&] {
      proto::EventRecord e{};
      e.type = static_cast<std::uint16_t>(proto::EventType::kIterationMark);
      e.seq = d.lib.seq++;
      d.push(e);
    };
    std::set<std::uint64_t> lengths;
    for (int it = 0; it < 4; ++it) {
      mark();
      for (std::uint64_t k = 0; k < length; ++k) {
        d.launch(100 + k % 7, 1);
        if (it > 0 && k % 50 == 0) {  // from the second mark on
          d.drain();
          lengths.insert(d.client.iteration().length);
        }
      }
    }
    d.drain();
    lengths.insert(d.client.iteration().length);
    if (length < limits.trace_launches) {
      EXPECT_EQ(lengths, std::set<std::uint64_t>{length});
      EXPECT_TRUE(d.client.warnings().empty());
    } else {
      EXPECT_EQ(lengths, std::set<std::uint64_t>{0});
      ASSERT_EQ(d.client.warnings().size(), 1u);
      EXPECT_NE(d.client.warnings()[0].find("longer than the 1024 launches"), std::string::npos)
          << d.client.warnings()[0];
    }
  }
}

// A client whose iteration repeats but is never timed (no timings arrive): gswapd looks at its
// window for a measurable period once per change to it, not at every tick (a full window of
// 262,144 launches took 1.3 ms a tick, for nothing).
TEST(ClientCost, AnUnmeasurableWindowIsScannedOncePerChange) {
  ClientLimits limits;
  limits.trace_launches = 4096;
  DirectClient d(limits);
  d.alloc(1);
  for (int i = 0; i < 4000; ++i) d.launch(100 + i % 40, 1);  // a period of 40, never timed
  d.drain();
  ASSERT_GT(d.client.iteration().length, 0u);
  for (int tick = 0; tick < 100; ++tick) {
    d.drain();
    EXPECT_FALSE(d.client.take_measured(1ull << 30));
  }
  EXPECT_EQ(d.client.measure_scans(), 1u);
  EXPECT_NE(d.client.measure_wait().find("timed"), std::string::npos) << d.client.measure_wait();
  d.launch(100, 1);  // something new: one more look
  d.drain();
  EXPECT_FALSE(d.client.take_measured(1ull << 30));
  EXPECT_FALSE(d.client.take_measured(1ull << 30));
  EXPECT_EQ(d.client.measure_scans(), 2u);
}

// The library's threads stage their records apart and its channel drains them one thread after
// another, so on a real GPU a short kernel's timing (sent by gswap's own thread) can come before
// its launch (staged by the application's backward thread), and one thread's launches can come
// after another's later ones. Both still meet: seen on an H200, where ResNet-50's backward lost a
// quarter of its timings that way and the iteration was never measured.
TEST(ClientOrder, TimingsBeforeTheirLaunchAndLaunchesOutOfOrderStillMeet) {
  ClientLimits limits;
  limits.trace_launches = 4096;
  DirectClient d(limits);
  d.alloc(1);
  const std::uint64_t base = d.lib.seq;
  constexpr std::uint64_t kPeriod = 40, kIterations = 30;
  // Each iteration: the first half of its launches from one thread, in order; then the timings of
  // the second half, before the second half's launches arrive in reverse order of seq.
  for (std::uint64_t it = 0; it < kIterations; ++it) {
    const std::uint64_t first = base + it * kPeriod;
    for (std::uint64_t k = 0; k < kPeriod / 2; ++k) {
      d.launch_at(first + k, 100 + k, 1);
      d.timing(first + k, 1'000'000 + (first + k) * 1000, 500);
    }
    for (std::uint64_t k = kPeriod / 2; k < kPeriod; ++k)
      d.timing(first + k, 1'000'000 + (first + k) * 1000, 500);
    d.drain();
    for (std::uint64_t k = kPeriod; k-- > kPeriod / 2;) d.launch_at(first + k, 100 + k, 1);
    d.drain();
  }
  d.lib.seq = base + kIterations * kPeriod;
  const auto& w = d.client.launches();
  ASSERT_EQ(w.size(), kIterations * kPeriod);
  for (std::size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(w[i].seq, base + i) << "the window is in seq order";
    ASSERT_EQ(w[i].duration_ns, 500u) << "launch " << i << " kept its timing";
    ASSERT_EQ(w[i].function_id, 100 + i % kPeriod);
  }
  ASSERT_EQ(d.client.iteration().length, kPeriod);
  auto m = d.client.take_measured(1ull << 30);
  ASSERT_TRUE(m) << d.client.measure_wait();
  EXPECT_EQ(m->timed_fraction, 1.0);
}

// A client whose seqs run backwards keeps a bounded window in seq order: each of its launches is
// put back among the newest kMaxReorder at most, so none costs a window's worth of moves, and
// one that would go further back is left out (with one warning).
TEST(ClientOrder, LaunchesWhoseSeqsRunBackwardsStayBounded) {
  ClientLimits limits;
  limits.trace_launches = 8192;
  DirectClient d(limits);
  d.alloc(1);
  for (std::uint64_t k = 0; k < 30'000; ++k) d.launch_at(1'000'000 - k, 101, 1);
  d.drain();
  const auto& w = d.client.launches();
  EXPECT_EQ(w.size(), 4097u);  // the first, and the 4,096 (kMaxReorder) put back before it
  for (std::size_t i = 1; i < w.size(); ++i) ASSERT_LT(w[i - 1].seq, w[i].seq);
  EXPECT_EQ(d.client.warnings().size(), 1u);
}

// Timings of launches that never come are bounded, and one for a launch that left the window is
// dropped.
// Launches that each go thousands back in the window cost at most kMaxReorderMoves (2^20)
// moved launches per drain: past that, a drain's further ones are left out (one warning), and
// the window stays in seq order. The next drain takes them again.
TEST(ClientOrder, LaunchesPutFarBackAreBoundedPerDrain) {
  ClientLimits limits;
  limits.trace_launches = 16384;
  DirectClient d(limits);
  d.alloc(1);
  const std::uint64_t base = d.lib.seq + 1;
  for (std::uint64_t k = 0; k < 8192; ++k) d.launch_at(base + 2 * k, 101, 1);
  d.drain();
  ASSERT_EQ(d.client.launches().size(), 8192u);
  // Each between two launches about 4,000 from the window's end: about 4,000 moves each.
  for (std::uint64_t k = 0; k < 2000; ++k) d.launch_at(base + 2 * (4192 + k) + 1, 102, 1);
  d.drain();
  const auto& w = d.client.launches();
  const std::size_t taken = w.size() - 8192;
  EXPECT_GT(taken, 200u);  // 2^20 moves: about 262 of them
  EXPECT_LT(taken, 300u);
  for (std::size_t i = 1; i < w.size(); ++i) ASSERT_LT(w[i - 1].seq, w[i].seq);
  ASSERT_EQ(d.client.warnings().size(), 1u);
  EXPECT_NE(d.client.warnings()[0].find("would move more than"), std::string::npos);
  // A launch a few back, in the next drain, is put in order.
  d.launch_at(base + 2 * 8190 + 1, 103, 1);
  d.drain();
  EXPECT_EQ(d.client.launches().size(), 8192 + taken + 1);
}

TEST(ClientOrder, TimingsWithoutALaunchAreBounded) {
  ClientLimits limits;
  limits.trace_launches = 64;
  DirectClient d(limits);
  d.alloc(1);
  for (int i = 0; i < 200; ++i) d.launch(101, 1);
  const std::uint64_t next = d.lib.seq;
  for (std::uint64_t k = 0; k < 100'000; ++k) d.timing(next + 10 + k, 1'000'000, 5);
  d.timing(1, 1'000'000, 5);  // left the window long ago
  d.drain();
  EXPECT_LE(d.client.early_timings(), 16384u);
  d.launch_at(next + 10 + 99'999, 102, 1);  // the newest one still waits, and meets its launch
  d.drain();
  EXPECT_EQ(d.client.launches().back().duration_ns, 5u);
}

// Regions allocated, used by one kernel and freed, 20,000 of them, with a window of 8,192
// launches: gswapd keeps the freed regions the window's launches still use, no more than twice the
// window, and looks at each freed region a bounded number of times, however many the window
// references (the cost per record stays constant).
TEST(ClientCost, RegionChurnKeepsBoundedRegionsAtConstantCostPerRecord) {
  ClientLimits limits;
  limits.trace_launches = 8192;
  DirectClient d(limits);
  constexpr std::uint64_t kSteps = 20000;
  for (std::uint64_t id = 1; id <= kSteps; ++id) {
    ASSERT_NO_FATAL_FAILURE(d.alloc(id));
    ASSERT_NO_FATAL_FAILURE(d.launch(101 + 2 * (id % 7), id));
    ASSERT_NO_FATAL_FAILURE(d.free(id));
  }
  ASSERT_NO_FATAL_FAILURE(d.drain());
  EXPECT_EQ(d.client.live_regions(), 0u);
  // The window's launches each use a region freed after them: those stay, for traces.
  EXPECT_GE(d.client.freed_regions(), limits.trace_launches - 1);
  EXPECT_LE(d.client.freed_regions(), 2 * limits.trace_launches);
  EXPECT_LE(d.client.prune_visits(), 2 * kSteps);
}

// One launch, then regions allocated and freed with no launch between (hostile: nothing could
// have used them): none is kept. And when the window's launches may use more freed regions than
// twice as many as it holds launches, only the newest are kept, said once.
TEST(ClientCost, FreedRegionsAreBoundedWhateverTheWindowHolds) {
  ClientLimits limits;
  limits.trace_launches = 1024;
  {
    DirectClient d(limits);
    ASSERT_NO_FATAL_FAILURE(d.launch(101, 0));
    for (std::uint64_t id = 1; id <= 10000; ++id) {
      ASSERT_NO_FATAL_FAILURE(d.alloc(id));
      ASSERT_NO_FATAL_FAILURE(d.free(id));
    }
    ASSERT_NO_FATAL_FAILURE(d.drain());
    EXPECT_EQ(d.client.freed_regions(), 0u);
    EXPECT_TRUE(d.client.warnings().empty());
  }
  {
    DirectClient d(limits);
    std::uint64_t id = 0;
    for (int l = 0; l < 1000; ++l) {  // the window holds every launch; 4 frees after each
      for (int k = 0; k < 4; ++k) ASSERT_NO_FATAL_FAILURE(d.alloc(++id));
      ASSERT_NO_FATAL_FAILURE(d.launch(101, id));
      for (std::uint64_t r = id - 3; r <= id; ++r) ASSERT_NO_FATAL_FAILURE(d.free(r));
    }
    ASSERT_NO_FATAL_FAILURE(d.drain());
    EXPECT_EQ(d.client.freed_regions(), 2 * limits.trace_launches);
    ASSERT_EQ(d.client.warnings().size(), 1u);
    EXPECT_NE(d.client.warnings()[0].find("freed regions"), std::string::npos)
        << d.client.warnings()[0];
  }
}

// Names a client sends are kept up to max_name_bytes in all (one warning, then the rest are
// ignored); a region's name only while gswapd knows the region; unfinished names do not pile up.
TEST(ClientCost, NamesAreBoundedInBytes) {
  ClientLimits limits;
  limits.max_name_bytes = 1 << 20;
  DirectClient d(limits);
  auto kernel = [](std::uint64_t id) { return fmt::format("{:0>200}", id); };
  for (std::uint64_t id = 1; id <= 10000; ++id)
    ASSERT_NO_FATAL_FAILURE(d.name(proto::EventType::kKernelName, id, kernel(id)));
  // Unfinished names (their last chunk never came), as many.
  for (std::uint64_t id = 20001; id <= 30000; ++id)
    ASSERT_NO_FATAL_FAILURE(d.name(proto::EventType::kKernelName, id, kernel(id), false));
  ASSERT_NO_FATAL_FAILURE(d.drain());
  EXPECT_LE(d.client.name_bytes(), limits.max_name_bytes);
  EXPECT_GT(d.client.name_bytes(), limits.max_name_bytes / 2);
  EXPECT_EQ(d.client.name_of_kernel(1), kernel(1));
  EXPECT_EQ(d.client.name_of_kernel(10000), fmt::format("{:016x}", 10000));
  ASSERT_EQ(d.client.warnings().size(), 1u);
  EXPECT_NE(d.client.warnings()[0].find("names"), std::string::npos) << d.client.warnings()[0];

  // A region's name: ignored for a region gswapd does not know; given back when it is dropped.
  DirectClient r(limits);
  ASSERT_NO_FATAL_FAILURE(r.name(proto::EventType::kRegionName, 7, "never allocated"));
  ASSERT_NO_FATAL_FAILURE(r.alloc(8));
  ASSERT_NO_FATAL_FAILURE(r.name(proto::EventType::kRegionName, 8, "activations"));
  ASSERT_NO_FATAL_FAILURE(r.drain());
  EXPECT_EQ(r.client.name_of_region(7), "");
  EXPECT_EQ(r.client.name_of_region(8), "activations");
  const std::size_t named = r.client.name_bytes();
  EXPECT_GT(named, 0u);
  ASSERT_NO_FATAL_FAILURE(r.free(8));  // no launch used it: dropped at once
  ASSERT_NO_FATAL_FAILURE(r.drain());
  EXPECT_EQ(r.client.name_of_region(8), "");
  EXPECT_EQ(r.client.name_bytes(), 0u);
}

// A timing longer than a trace may say (kMaxTraceTimeUs), a device clock that jumps by weeks in
// an iteration and a link measured at 1 byte/s (a hostile or broken library) never reach a trace
// or a plan: what `gswapctl trace dump` writes parses, and `simulate` can read it.
TEST_F(ServerTest, AbsurdTimingsAndLinkSpeedsNeverReachATraceOrPlan) {
  FakeLibrary lib;
  int fd = -1, shm = -1;
  ASSERT_NO_FATAL_FAILURE(connect_library(128ull << 20, &lib, &fd, &shm));
  proto::StatusPayload st{};
  st.h2d_bytes_per_s = st.d2h_bytes_per_s = 1;
  lib.status(st);
  ASSERT_NO_FATAL_FAILURE(lib.regions(4));
  for (int it = 0; it < 256; ++it) {
    for (std::uint64_t k = 0; k < 8; ++k) {
      if (k == 4) lib.device_ns += 2'000'000'000'000'000ull;  // 2e15 ns: 23 days
      const bool absurd = it % 16 == 3 && k == 5;
      const std::uint64_t clock = lib.device_ns;
      lib.duration_ns = absurd ? ~0ull / 2 : 100000;  // 9.2e15 us
      ASSERT_NO_FATAL_FAILURE(lib.access(FakeLibrary::function_at(k), k % 4 + 1, (k + 1) % 4 + 1));
      if (absurd) lib.device_ns = clock + 100000;
    }
    if (it % 32 == 31) server_->tick(0);
  }
  proto::PlanHeader ph{};
  std::vector<proto::PlanEntry> entries;
  ASSERT_NO_FATAL_FAILURE(tick_until_guided(lib, &ph, &entries));
  nlohmann::json tr = server_->handle_request({{"cmd", "trace"}, {"pid", getpid()}});
  ASSERT_TRUE(tr["ok"].get<bool>()) << tr.dump();
  policy::Trace trace;
  std::string error;
  ASSERT_TRUE(policy::parse_trace_json(tr["trace_json"].get<std::string>(), &trace, &error))
      << error;
  for (const policy::Launch& l : trace.launches) EXPECT_DOUBLE_EQ(l.dur_us, 100.0);
  EXPECT_GE(trace.device.h2d_bytes_per_s, 1e6);
  EXPECT_GE(trace.device.d2h_bytes_per_s, 1e6);
  ASSERT_TRUE(tr.contains("plan_json")) << tr.dump();
  policy::Plan plan;
  EXPECT_TRUE(policy::parse_plan_json(tr["plan_json"].get<std::string>(), trace, &plan, &error))
      << error;
  // The status shows the link as unmeasured, not as 1 byte/s.
  nlohmann::json c = server_->status_json()["clients"][0];
  EXPECT_EQ(c["h2d_bytes_per_s"], 0u);
  close(shm);
  close(fd);
}

}  // namespace
}  // namespace gswap::daemon
