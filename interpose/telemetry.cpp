// telemetry.cpp: the library's side of the gswapd channel.
// Until the daemon link is built, every event is dropped: the library runs in passive mode.
#include "interpose/telemetry.h"

namespace gswap::interpose::telemetry {

void start(const StartInfo&) {}
void stop() {}
void after_fork_child() {}
bool connected() { return false; }
void region_alloc(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint32_t) {}
void region_free(std::uint64_t, std::uint64_t) {}
void launch(std::uint64_t, std::uint32_t, std::uint64_t, const std::uint64_t*, std::uint32_t) {}
void copy(std::uint64_t, std::uint32_t, std::uint64_t, std::uint64_t, std::uint64_t) {}
void eviction(std::uint64_t, std::uint64_t) {}
void restore(std::uint64_t, std::uint64_t, bool) {}
void stall(std::uint64_t, std::uint64_t) {}
void gpu_timing(std::uint64_t, std::uint64_t, std::uint64_t) {}
void iteration_mark(std::uint64_t) {}
void publish_counters(const Counters&) {}

}  // namespace gswap::interpose::telemetry
