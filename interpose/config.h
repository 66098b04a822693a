// config.h: the library's settings, read from the environment once, at cuInit.
//
// Names and defaults come from proto/settings.def (scope lib or both); parsing uses the shared
// parsers in proto/settings.h. Pure: the environment is passed in as a lookup function so tests
// drive it without touching the process environment.
#pragma once

#include <cstdint>

#include "interpose/log.h"
#include "proto/settings.h"

namespace gswap::interpose {

struct Config {
  settings::Size budget;  // resolved against the device total at init
  LogLevel log_level = LogLevel::kWarn;
  const char* log_file = "";
  settings::Size swap_threshold;  // 0 bytes: the VMM granularity
  std::uint64_t pinned_cap = 0;
  std::uint64_t staging_bytes = 0;
  bool summary = true;
  bool hook_profile = false;         // GSWAP_HOOK_PROFILE (hook_profile.h)
  bool recompute_keep_copy = false;  // recompute.h's failure rule
  // Test-only fault injection (GSWAP_DEBUG_SKIP_RESTORE=1, declared in settings.def): restores
  // claim residency without mapping memory and the residency wait is dropped, so the preload tests
  // can prove a residency bug crashes.
  bool debug_skip_restore = false;
  // The daemon (telemetry.h): off, connect to a running one, or spawn one when none runs.
  enum class Daemon { kOff, kConnect, kSpawn } daemon = Daemon::kConnect;
  char runtime_dir[256] = {};   // resolved (proto/rendezvous.h)
  char daemon_path[1024] = {};  // GSWAP_DAEMON_PATH; empty: the gswapd beside libgswap.so
  // How measured accesses are timed (cupti_timing.h), and the libcupti to load.
  enum class Timing { kEvents, kCupti } timing = Timing::kEvents;
  char cupti_path[1024] = {};
  char timeline[1024] = {};  // GSWAP_TIMELINE: a file written at exit (timeline.h); empty: off
  std::uint64_t timeline_events = 0;
};

using EnvLookup = const char* (*)(const char* name);

// Fills *out from the environment (defaults from settings.def). On a bad value returns false and
// writes a one-line reason naming the variable into err.
bool load_config(EnvLookup env, Config* out, char* err, unsigned err_size);

// A value from the environment as a log line shows it: at most its first 64 bytes (then "..."),
// a control byte or a byte above 0x7e as \xNN, so that a refusal keeps its reason on one line
// and a value cannot forge a log line of its own. Writes into out (at least 4 * 64 + 4 bytes).
const char* shown_value(const char* value, char* out, unsigned size);

}  // namespace gswap::interpose
