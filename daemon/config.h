// config.h: gswapd's and gswapctl's view of the settings: defaults from proto/settings.def, then
// the JSON config file, then environment variables (which win). Every key is validated against its
// declaration; every problem is reported naming the key (or the environment variable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "proto/settings.h"

namespace gswap::daemon {

// The fewest launches trace_launches may keep per client.
inline constexpr std::uint64_t kMinTraceLaunches = 16;
// The most walks plan_search_threads may ask for (policy::SearchOptions::threads' limit).
inline constexpr std::uint64_t kMaxPlanSearchThreads = 64;
// Upper ends of settings that would otherwise hold the one planning thread, or memory, without
// bound: a minute's search per plan, ten minutes' refinement, the library's longest iteration
// (2^22 launches) per client's window, 1,024 clients.
inline constexpr std::uint64_t kMaxPlanSearchMs = 60'000;
inline constexpr std::uint64_t kMaxPlanRefineMs = 600'000;
inline constexpr std::uint64_t kMaxTraceLaunches = 1ull << 22;
inline constexpr std::uint64_t kMaxClients = 1024;

class Config {
 public:
  // All declarations at their defaults.
  Config();

  // Merges a JSON document. Returns one message per problem ("key: what is wrong"); keys with
  // problems keep their previous value. A key given twice is a problem ("key: duplicate key").
  std::vector<std::string> merge_json(std::string_view text);
  // Reads and merges a file (read_config_file); a file that cannot be read (missing, a
  // directory, a device, too long) is one error naming the path and the reason.
  std::vector<std::string> merge_file(const std::string& path);
  // Merges environment variables; lookup returns nullptr when a variable is unset.
  std::vector<std::string> merge_env(const std::function<const char*(const char*)>& lookup);
  // Sets one setting from a value in the environment's text form (a command-line option, such as
  // gswapctl run --budget), checked as the environment's is; `origin` names where it came from.
  // Returns "" when it was set, else why not (its bytes made printable), the setting unchanged.
  std::string merge_value(std::string_view ident, std::string_view value,
                          const std::string& origin);

  // Typed access by declaration identifier (a unknown identifier is a programming error: aborts).
  const std::string& text(std::string_view ident) const;
  settings::Size size(std::string_view ident) const;
  std::uint64_t uint(std::string_view ident) const;
  bool boolean(std::string_view ident) const;
  const std::map<std::string, double>& weights() const { return weights_; }
  const std::vector<std::uint32_t>& allow_uids() const { return allow_uids_; }
  const std::vector<std::uint32_t>& allow_gids() const { return allow_gids_; }
  // Where each value came from: "default", the file path, or the environment variable.
  const std::string& origin(std::string_view ident) const;

  // The weight of an executable under the configured share mode (1 when not listed or "equal").
  double weight_for(const std::string& exe) const;

 private:
  // Validates a value given as text (environment form). Returns "" when valid, else the reason.
  std::string set_text(const settings::Declaration& d, std::string_view value,
                       const std::string& origin);
  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, std::string, std::less<>> origins_;
  std::map<std::string, double> weights_;
  std::vector<std::uint32_t> allow_uids_, allow_gids_;
};

// The most a config file may hold. Config files are a few hundred bytes; the bound stops a wrong
// path (a log, a pipe that never ends) from filling memory.
inline constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;

// Reads a whole config file: a regular file or a pipe of at most kMaxConfigBytes (a device, a
// socket or anything longer is refused without reading it through). On failure *error says why,
// with the OS reason ("cannot read the file: Is a directory"), without the path.
bool read_config_file(const std::string& path, std::string* text, std::string* error);

// The runtime directory: GSWAP_RUNTIME_DIR (from config/environment), else $XDG_RUNTIME_DIR/gswap,
// else /run/gswap.
std::string runtime_dir(const Config& config);
// Makes the runtime directory when it is missing (its parents too): mode 0700, 0755 with an
// allow-list. One that exists is left as it is (*existed), unless it is not a directory.
bool make_runtime_dir(const Config& config, bool* existed, std::string* error);

}  // namespace gswap::daemon
