// counters.cpp: call counts per entry point and the named counters of counters.def, read by
// simcudaGetCounter and written at exit to SIMCUDA_STATS_FILE.
//
// Threading: every counter is a relaxed atomic; call counts are sharded per thread (entry.h) and
// summed when read, so a reader sees each increment that happened before its call.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "internal.h"

namespace simcuda {

namespace api {

Shard g_shards[kShards];
std::atomic<bool> g_armed{false};

int assign_shard() {
  static std::atomic<int> next{0};
  t_shard = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return t_shard;
}

uint64_t calls(int slot) {
  uint64_t n = 0;
  for (const Shard& s : g_shards) n += s.calls[slot].load(std::memory_order_relaxed);
  return n;
}

}  // namespace api

namespace {

constexpr const char* kCounterNames[] = {
#define SC_COUNTER(name, doc) #name,
#include "counters.def"
#undef SC_COUNTER
};
constexpr int kNumCounters = sizeof(kCounterNames) / sizeof(kCounterNames[0]);
std::atomic<uint64_t> g_counters[kNumCounters];

constexpr std::string_view kCallsPrefix = "calls:";

// A symbol listed twice in api.def is reported once, under its first slot.
bool first_slot(int i) {
  return api::slot_of(api::kSymbols[i]) == i;
}

pid_t g_stats_pid = 0;

void write_stats() {
  // A forked child inherits the handler but must not overwrite its parent's figures.
  if (getpid() != g_stats_pid) return;
  const std::string& path = g().cfg.stats_file;
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "simcuda: SIMCUDA_STATS_FILE: cannot write %s\n", path.c_str());
    return;
  }
  const char* sep = "\n";
  std::fputc('{', f);
  for (int i = 0; i < kNumCounters; ++i)
    if (uint64_t v = g_counters[i].load(std::memory_order_relaxed)) {
      std::fprintf(f, "%s  \"%s\": %llu", sep, kCounterNames[i],
                   static_cast<unsigned long long>(v));
      sep = ",\n";
    }
  for (int i = 0; i < api::kNumSlots; ++i)
    if (uint64_t v = first_slot(i) ? api::calls(i) : 0) {
      std::fprintf(f, "%s  \"calls:%.*s\": %llu", sep, static_cast<int>(api::kSymbols[i].size()),
                   api::kSymbols[i].data(), static_cast<unsigned long long>(v));
      sep = ",\n";
    }
  std::fputs("\n}\n", f);
  std::fclose(f);
}

}  // namespace

void count(Counter c, uint64_t n) {
  g_counters[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
}

void register_stats_file() {
  if (g().cfg.stats_file.empty()) return;
  g_stats_pid = getpid();
  std::atexit(write_stats);
}

}  // namespace simcuda

using namespace simcuda;

SC_EXPORT int simcudaGetCounter(const char* name, unsigned long long* value) {
  if (!name || !value) return -1;
  std::string_view n(name);
  if (n.starts_with(kCallsPrefix)) {
    int slot = api::slot_of(n.substr(kCallsPrefix.size()));
    if (slot < 0) return -1;
    *value = api::calls(slot);
    return 0;
  }
  for (int i = 0; i < kNumCounters; ++i)
    if (n == kCounterNames[i]) {
      *value = g_counters[i].load(std::memory_order_relaxed);
      return 0;
    }
  return -1;
}
