// link_test.cpp: the library's daemon link (interpose/telemetry.cpp) against an in-process gswapd
// server: events from many threads arrive, long launch region lists survive the continuation
// records, the budget share reaches the BudgetCallback (capped by the process's own budget), and
// the link survives the daemon going away and coming back, and a forked child registers anew.
#include <gtest/gtest.h>
#include <poll.h>
#include <spdlog/sinks/null_sink.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "daemon/server.h"
#include "interpose/telemetry.h"

namespace gswap::daemon {
namespace {

namespace tel = gswap::interpose::telemetry;

std::atomic<std::uint64_t> g_budget{0};
void on_budget(std::uint64_t b) {
  g_budget.store(b);
}

const std::uint8_t kUuid[16] = {0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Ticks the server until pred() holds or about five seconds pass.
template <typename Pred>
bool serve_until(Server& s, Pred pred) {
  for (int i = 0; i < 500; ++i) {
    s.tick(10);
    if (pred()) return true;
  }
  return false;
}

TEST(DaemonLink, EventsBudgetAndReconnect) {
  char tmpl[] = "/tmp/gswap-link-test-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  Config config;
  ASSERT_TRUE(config.merge_json(nlohmann::json{{"runtime_dir", dir}, {"gpu_budget", "1GiB"}}.dump())
                  .empty());
  GpuIdentity gpu;
  std::memcpy(gpu.uuid, kUuid, 16);
  gpu.total_bytes = 4ull << 30;
  char text[48];
  gpu.uuid_text = proto::format_uuid(kUuid, text);
  auto log = std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::null_sink_mt>());
  auto server = std::make_unique<Server>(config, gpu, log);
  std::string error;
  bool already = false;
  ASSERT_TRUE(server->open(&error, &already)) << error;

  tel::StartInfo info;
  info.mode = tel::DaemonMode::kConnect;
  info.runtime_dir = dir.c_str();
  info.gpu_uuid = reinterpret_cast<const char*>(kUuid);
  info.device_total_bytes = gpu.total_bytes;
  info.budget_bytes = 768ull << 20;  // below the 1 GiB share: the share must not raise it
  info.on_budget = on_budget;
  tel::start(info);
  ASSERT_TRUE(serve_until(*server, [&] { return server->num_clients() == 1 && tel::connected(); }));
  // The 1 GiB share does not change the process's 768 MiB budget: it is reported, not re-applied.
  EXPECT_TRUE(serve_until(*server, [&] {
    return server->status_json()["clients"][0]["applied_budget_bytes"] == (768ull << 20);
  }));
  EXPECT_EQ(g_budget.load(), 0u);

  // Four threads, each 100 allocations and 100 launches with 30 regions (continuation records).
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::uint64_t ids[30];
      for (int i = 0; i < 100; ++i) {
        std::uint64_t id = 1 + t * 1000 + i;
        tel::region_alloc(id, id << 21, 2 << 20, 0, 0);
        for (int k = 0; k < 30; ++k) ids[k] = 1 + t * 1000 + k;
        tel::launch(i, 0, 42, ids, 30);
        if (i % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      }
    });
  }
  for (auto& th : threads) th.join();
  tel::Counters c;
  c.resident = 12345;
  tel::publish_counters(c);
  auto events = [&] { return server->status_json()["clients"][0]["events"].get<std::uint64_t>(); };
  ASSERT_TRUE(serve_until(*server, [&] {
    auto st = server->status_json();
    return st["clients"][0]["resident_bytes"] == 12345u && events() > 0;
  }));
  // Every event either arrived or was counted as dropped: none vanish, none were malformed. The
  // daemon counts records (an allocation is one, a 30-region launch is launch_records(30)) and
  // the library counts dropped events, so the books close when some split of the 400 allocations
  // and 400 launches into arrived and dropped explains both figures exactly.
  const std::uint64_t per_launch = proto::launch_records(30);
  ASSERT_EQ(per_launch, 7u);
  auto books_close = [&](std::uint64_t records, std::uint64_t dropped) {
    if (dropped > 800 || records + dropped < 800) return false;
    std::uint64_t extra = records + dropped - 800;  // (per_launch - 1) per arrived launch
    if (extra % (per_launch - 1) != 0) return false;
    std::uint64_t launches = extra / (per_launch - 1), arrived = 800 - dropped;
    return launches <= 400 && launches <= arrived && arrived - launches <= 400;
  };
  bool closed = false;
  for (int i = 0; i < 2000 && !closed; ++i) {  // up to 20 s; a correct link needs a few ticks
    server->tick(10);
    auto k = server->status_json()["clients"][0];
    closed =
        books_close(k["events"].get<std::uint64_t>(), k["dropped_events"].get<std::uint64_t>());
  }
  auto k = server->status_json()["clients"][0];
  EXPECT_TRUE(closed) << "records " << k["events"] << ", dropped events " << k["dropped_events"];
  EXPECT_EQ(server->num_clients(), 1u);  // nothing it sent was garbage

  // The daemon goes away: the library notices, keeps going, and drops (and counts) events.
  server.reset();
  for (int i = 0; i < 200 && tel::connected(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(tel::connected());
  tel::region_alloc(99999, 1ull << 40, 2 << 20, 0, 0);  // dropped and counted, never blocks

  // A daemon with a smaller GPU budget comes back: the library reconnects by itself and applies
  // the new share (below its own budget) through the callback.
  Config smaller;
  ASSERT_TRUE(
      smaller.merge_json(nlohmann::json{{"runtime_dir", dir}, {"gpu_budget", "256MiB"}}.dump())
          .empty());
  server = std::make_unique<Server>(smaller, gpu, log);
  ASSERT_TRUE(server->open(&error, &already)) << error;
  ASSERT_TRUE(serve_until(*server, [&] { return server->num_clients() == 1 && tel::connected(); }));
  EXPECT_TRUE(serve_until(*server, [] { return g_budget.load() == (256ull << 20); }));
  EXPECT_TRUE(serve_until(*server, [&] {
    return server->status_json()["clients"][0]["dropped_events"].get<std::uint64_t>() >= 1;
  }));
  // fork: the child forgets the parent's registration and is no client until it starts telemetry
  // itself (its own cuInit), then one of its own. It stays registered until the parent has
  // looked for it; the parent says when through pipes.
  int go[2], seen[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(seen), 0);
  pid_t child = fork();
  if (child == 0) {
    close(go[1]);
    close(seen[1]);
    tel::after_fork_child();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    bool ok = !tel::connected();
    char c = 0;
    pollfd g{go[0], POLLIN, 0};
    ok = poll(&g, 1, 30'000) == 1 && read(go[0], &c, 1) == 1 && ok;
    tel::start(info);
    for (int i = 0; i < 500 && !tel::connected(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ok = tel::connected() && ok;
    pollfd p{seen[0], POLLIN, 0};
    ok = poll(&p, 1, 30'000) == 1 && read(seen[0], &c, 1) == 1 && ok;
    tel::stop();
    _exit(ok ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  close(go[0]);
  close(seen[0]);
  auto has_pid = [&](pid_t pid) {
    nlohmann::json st = server->status_json();
    for (const auto& cl : st["clients"])
      if (cl["pid"] == pid) return true;
    return false;
  };
  // A child that never starts telemetry (a data-loader worker) takes no share.
  for (int i = 0; i < 30; ++i) {
    server->tick(10);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(has_pid(child));
  EXPECT_EQ(server->num_clients(), 1u);
  EXPECT_EQ(write(go[1], "x", 1), 1);
  close(go[1]);
  EXPECT_TRUE(serve_until(*server, [&] { return has_pid(child); }));
  EXPECT_TRUE(has_pid(getpid()));  // the parent's registration is untouched
  EXPECT_EQ(write(seen[1], "x", 1), 1);
  close(seen[1]);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) server->tick(10);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(serve_until(*server, [&] { return !has_pid(child); }));
  EXPECT_TRUE(tel::connected());

  tel::stop();
  EXPECT_TRUE(serve_until(*server, [&] { return server->num_clients() == 0; }));
  server.reset();
  std::string cmd = "rm -rf " + dir;
  (void)!std::system(cmd.c_str());
}

}  // namespace
}  // namespace gswap::daemon
