// config.cpp: environment -> Config (see config.h).
#include "interpose/config.h"

#include <cstdio>
#include <cstring>

#include "proto/rendezvous.h"

namespace gswap::interpose {
namespace {

const char* value_of(EnvLookup env, const char* ident) {
  const settings::Declaration* d = settings::find(ident);
  if (!d) return nullptr;
  const char* v = (d->env[0] != '\0') ? env(d->env) : nullptr;
  return (v && v[0] != '\0') ? v : d->default_value;
}

const char* env_name(const char* ident) {
  const settings::Declaration* d = settings::find(ident);
  return d ? d->env : ident;
}

bool bad(char* err, unsigned size, const char* ident, const char* value, const char* why) {
  char shown[4 * 64 + 4];
  std::snprintf(err, size, "%s=\"%s\" is not valid: %s", env_name(ident),
                shown_value(value, shown, sizeof shown), why);
  return false;
}

// Why a budget or size is refused: the range, where the value parses but lies outside it.
const char* size_why(const char* v, bool parsed, const settings::Size& s, const char* what) {
  if (parsed && !s.is_percent && s.bytes == 0) return "it must be above 0 bytes";
  const char* end = v + std::strlen(v);
  while (end > v && end[-1] == ' ') --end;
  if (end > v && end[-1] == '%') return "a percentage must be above 0% and at most 100%";
  return what;
}

constexpr const char* kBoolWhy = "expected 1 or 0 (or true/false, yes/no, on/off)";

}  // namespace

const char* shown_value(const char* value, char* out, unsigned size) {
  constexpr unsigned kShownBytes = 64;
  unsigned o = 0, i = 0;
  if (size == 0) return out;
  for (; value && value[i] && i < kShownBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    const bool plain = c >= 0x20 && c <= 0x7e;
    if (o + (plain ? 1 : 4) + 4 > size) break;
    if (plain) {
      out[o++] = static_cast<char>(c);
    } else {
      std::snprintf(out + o, size - o, "\\x%02x", c);
      o += 4;
    }
  }
  if (value && value[i] && o + 4 <= size) {
    std::memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
  return out;
}

bool load_config(EnvLookup env, Config* out, char* err, unsigned err_size) {
  const char* v = value_of(env, "budget");
  const bool parsed = settings::parse_size(v, &out->budget);
  if (!parsed || (!out->budget.is_percent && out->budget.bytes == 0))
    return bad(err, err_size, "budget", v,
               size_why(v, parsed, out->budget,
                        "expected bytes, with a unit or without (6GiB, 512MiB, 1048576), or a "
                        "percentage of the device (75%)"));

  v = value_of(env, "log_level");
  static const char* const kLevels[] = {"off", "error", "warn", "info", "debug", "trace"};
  bool found = false;
  for (int i = 0; i < 6; ++i) {
    if (std::strcmp(v, kLevels[i]) == 0) {
      out->log_level = static_cast<LogLevel>(i);
      found = true;
    }
  }
  if (!found) return bad(err, err_size, "log_level", v, "expected off|error|warn|info|debug|trace");
  out->log_file = value_of(env, "log_file");

  v = value_of(env, "swap_threshold");
  if (!settings::parse_size(v, &out->swap_threshold) || out->swap_threshold.is_percent)
    return bad(err, err_size, "swap_threshold", v, "expected bytes with a unit");

  settings::Size s;
  v = value_of(env, "pinned_cap");
  if (!settings::parse_size(v, &s) || s.is_percent)
    return bad(err, err_size, "pinned_cap", v, "expected bytes with a unit");
  out->pinned_cap = s.bytes;

  v = value_of(env, "staging_bytes");
  if (!settings::parse_size(v, &s) || s.is_percent || s.bytes < (64u << 10))
    return bad(err, err_size, "staging_bytes", v, "expected bytes with a unit, at least 64KiB");
  out->staging_bytes = s.bytes;

  v = value_of(env, "summary");
  if (!settings::parse_bool(v, &out->summary)) return bad(err, err_size, "summary", v, kBoolWhy);

  v = value_of(env, "hook_profile");
  if (!settings::parse_bool(v, &out->hook_profile))
    return bad(err, err_size, "hook_profile", v, kBoolWhy);

  v = value_of(env, "recompute_keep_copy");
  if (!settings::parse_bool(v, &out->recompute_keep_copy))
    return bad(err, err_size, "recompute_keep_copy", v, kBoolWhy);

  v = value_of(env, "debug_skip_restore");
  if (!settings::parse_bool(v, &out->debug_skip_restore))
    return bad(err, err_size, "debug_skip_restore", v, kBoolWhy);

  v = value_of(env, "daemon");
  if (std::strcmp(v, "off") == 0)
    out->daemon = Config::Daemon::kOff;
  else if (std::strcmp(v, "connect") == 0)
    out->daemon = Config::Daemon::kConnect;
  else if (std::strcmp(v, "spawn") == 0)
    out->daemon = Config::Daemon::kSpawn;
  else
    return bad(err, err_size, "daemon", v, "expected off|connect|spawn");

  v = value_of(env, "runtime_dir");
  if (!proto::runtime_dir(v, env("XDG_RUNTIME_DIR"), out->runtime_dir, sizeof out->runtime_dir))
    return bad(err, err_size, "runtime_dir", v, "too long for a socket directory");
  // With a daemon to talk to, its socket there (named by the GPU's UUID, always this long) must
  // fit a socket address: refused here, not found out at the first connection.
  char socket[proto::kMaxSocketPath];
  if (out->daemon != Config::Daemon::kOff &&
      !proto::socket_path(out->runtime_dir, "GPU-00000000-0000-0000-0000-000000000000", socket,
                          sizeof socket))
    return bad(err, err_size, "runtime_dir", out->runtime_dir,
               "too long for a socket directory (a socket path holds 107 bytes)");

  v = value_of(env, "daemon_path");
  if (std::strlen(v) >= sizeof out->daemon_path)
    return bad(err, err_size, "daemon_path", v, "too long");
  std::snprintf(out->daemon_path, sizeof out->daemon_path, "%s", v);

  v = value_of(env, "timing");
  if (std::strcmp(v, "events") == 0)
    out->timing = Config::Timing::kEvents;
  else if (std::strcmp(v, "cupti") == 0)
    out->timing = Config::Timing::kCupti;
  else
    return bad(err, err_size, "timing", v, "expected events|cupti");
  v = value_of(env, "cupti_path");
  if (std::strlen(v) >= sizeof out->cupti_path)
    return bad(err, err_size, "cupti_path", v, "too long");
  std::snprintf(out->cupti_path, sizeof out->cupti_path, "%s", v);

  v = value_of(env, "timeline");
  if (std::strlen(v) >= sizeof out->timeline) return bad(err, err_size, "timeline", v, "too long");
  std::snprintf(out->timeline, sizeof out->timeline, "%s", v);
  v = value_of(env, "timeline_events");
  if (!settings::parse_uint(v, &out->timeline_events) || out->timeline_events == 0 ||
      out->timeline_events > (1ull << 26))
    return bad(err, err_size, "timeline_events", v, "expected a count from 1 to 67108864");
  return true;
}

}  // namespace gswap::interpose
