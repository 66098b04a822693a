// config.cpp: layering and validation of settings for the daemon side (see config.h).
#include "daemon/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemon/gpu_probe.h"
#include "daemon/untrusted_text.h"
#include "policy/json_duplicates.h"

#include "proto/rendezvous.h"
#include "proto/wire.h"

namespace gswap::daemon {
namespace {

const settings::Declaration& must_find(std::string_view ident) {
  const settings::Declaration* d = settings::find(ident);
  if (!d) {
    fmt::print(stderr, "gswap: internal error: no setting '{}' ({}:{})\n", ident, __FILE__,
               __LINE__);
    std::abort();
  }
  return *d;
}

bool parse_weights(std::string_view text, std::map<std::string, double>* out, std::string* why) {
  std::map<std::string, double> w;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      *why = fmt::format("'{}' is not name=weight", item);
      return false;
    }
    std::string num(item.substr(eq + 1));
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || !(v > 0) || v > 1e6) {
      *why = fmt::format("weight of '{}' must be a number in (0, 1e6]", item.substr(0, eq));
      return false;
    }
    // As the file form refuses a key given twice in "weights": which one was meant is unknown.
    if (!w.emplace(std::string(item.substr(0, eq)), v).second) {
      *why = fmt::format("'{}' is given a weight twice", item.substr(0, eq));
      return false;
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  *out = std::move(w);
  return true;
}

bool parse_uint_list(std::string_view text, std::vector<std::uint32_t>* out, std::string* why) {
  std::vector<std::uint32_t> v;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::uint64_t n;
    if (!settings::parse_uint(text.substr(0, comma), &n) || n > 0xffffffffu) {
      *why =
          fmt::format("'{}' is not an id (a non-negative 32-bit integer)", text.substr(0, comma));
      return false;
    }
    v.push_back(static_cast<std::uint32_t>(n));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  *out = std::move(v);
  return true;
}

// Converts a JSON value to the environment's text form, or explains why its type is wrong.
bool json_to_text(const settings::Declaration& d, const nlohmann::json& v, std::string* text,
                  std::string* why) {
  std::string_view type = d.type;
  if (type == "Weights") {
    if (!v.is_object()) return *why = "expected an object of name: weight", false;
    std::string out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_number())
        return *why = fmt::format("weight of '{}' must be a number", it.key()), false;
      if (it.key().empty() || it.key().find_first_of(",=") != std::string::npos)
        return *why = fmt::format("bad executable name '{}'", it.key()), false;
      out += fmt::format("{}{}={}", out.empty() ? "" : ",", it.key(), it.value().get<double>());
    }
    *text = out;
    return true;
  }
  if (type == "UintList") {
    if (!v.is_array()) return *why = "expected an array of ids", false;
    std::string out;
    for (const auto& e : v) {
      if (!e.is_number_unsigned()) return *why = "ids must be non-negative integers", false;
      out += fmt::format("{}{}", out.empty() ? "" : ",", e.get<std::uint64_t>());
    }
    *text = out;
    return true;
  }
  if (type == "Bool") {
    if (!v.is_boolean()) return *why = "expected true or false", false;
    *text = v.get<bool>() ? "1" : "0";
    return true;
  }
  if (type == "Uint") {
    if (v.is_number_unsigned()) return *text = std::to_string(v.get<std::uint64_t>()), true;
    return *why = "expected a non-negative integer", false;
  }
  if (type == "Double") {
    if (!v.is_number()) return *why = "expected a number", false;
    *text = fmt::format("{}", v.get<double>());
    return true;
  }
  if (type == "Size") {
    if (v.is_number_unsigned()) return *text = std::to_string(v.get<std::uint64_t>()), true;
    if (v.is_string()) return *text = v.get<std::string>(), true;
    return *why = "expected a size: bytes as an integer, or a string like \"6GiB\" or \"75%\"",
           false;
  }
  // String and Enum
  if (!v.is_string()) return *why = "expected a string", false;
  *text = v.get<std::string>();
  return true;
}

}  // namespace

Config::Config() {
  for (const settings::Declaration& d : settings::kDeclarations) {
    std::string why = set_text(d, d.default_value, "default");
    if (!why.empty()) {
      fmt::print(stderr, "gswap: internal error: default of {} invalid: {} ({}:{})\n", d.ident, why,
                 __FILE__, __LINE__);
      std::abort();
    }
  }
}

std::string Config::set_text(const settings::Declaration& d, std::string_view value,
                             const std::string& origin) {
  std::string_view type = d.type;
  std::string why;
  if (type == "Size") {
    settings::Size s;
    if (!settings::parse_size(value, &s))
      return fmt::format("'{}' is not a size (bytes with a unit such as 6GiB, or 1-100%)", value);
    // A budget of 0 bytes would mean no budget to the library (its share protocol says 0 for
    // "none yet"), the opposite of what was asked: refused, as the library refuses GSWAP_BUDGET=0.
    const std::string_view ident = d.ident;
    if ((ident == "budget" || ident == "gpu_budget") && !s.is_percent && s.bytes == 0)
      return fmt::format("'{}' is not a budget: it must be above 0 bytes", value);
  } else if (type == "Bool") {
    bool b;
    if (!settings::parse_bool(value, &b)) return fmt::format("'{}' is not a boolean", value);
  } else if (type == "Uint") {
    std::uint64_t u;
    if (!settings::parse_uint(value, &u))
      return fmt::format("'{}' is not a non-negative integer", value);
    // A daemon that may serve no client, or a launch window too short to hold an iteration, is
    // not what anybody asks for: refused rather than run as something else.
    const std::string_view ident = d.ident;
    if (ident == "max_clients" && u == 0)
      return fmt::format("'{}' serves no client: it must be at least 1", value);
    if (ident == "max_clients" && u > kMaxClients)
      return fmt::format("'{}' is too many clients: it must be at most {}", value, kMaxClients);
    if (ident == "plan_search_ms" && u > kMaxPlanSearchMs)
      return fmt::format(
          "'{}' would hold the planning thread, which every client shares: it must be at most {} "
          "ms",
          value, kMaxPlanSearchMs);
    if (ident == "plan_refine_ms" && u > kMaxPlanRefineMs)
      return fmt::format("'{}' is too long a refinement: it must be at most {} ms", value,
                         kMaxPlanRefineMs);
    if (ident == "trace_launches" && u > kMaxTraceLaunches)
      return fmt::format(
          "'{}' would not bound a client's launch window: it must be at most {} (the longest "
          "iteration the library follows)",
          value, kMaxTraceLaunches);
    if (ident == "plan_search_threads" && (u == 0 || u > kMaxPlanSearchThreads))
      return fmt::format("'{}' is not a number of search threads: it must be 1 to {}", value,
                         kMaxPlanSearchThreads);
    if (ident == "trace_launches" && u < kMinTraceLaunches)
      return fmt::format("'{}' is too few launches to find an iteration in: it must be at least {}",
                         value, kMinTraceLaunches);
  } else if (type == "Double") {
    std::string s(value);
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') return fmt::format("'{}' is not a number", value);
  } else if (type.starts_with("Enum:")) {
    if (!settings::enum_allows(type, value))
      return fmt::format("'{}' is not one of {}", value, type.substr(5));
  } else if (type == "Weights") {
    std::map<std::string, double> w;
    if (!parse_weights(value, &w, &why)) return why;
    weights_ = std::move(w);
  } else if (type == "UintList") {
    std::vector<std::uint32_t> v;
    if (!parse_uint_list(value, &v, &why)) return why;
    (std::string_view(d.ident) == "allow_uids" ? allow_uids_ : allow_gids_) = std::move(v);
  } else if (type != "String") {
    return fmt::format("unknown declared type '{}'", type);
  } else if (std::string_view(d.ident) == "gpu") {
    // gswapd names its log file after it: a path must not come of it.
    if (std::string bad = gpu_selector_error(value); !bad.empty()) return bad;
  } else if (value.find('\0') != std::string_view::npos) {
    // A path or a name handed on as an environment variable or a C string would end there.
    return fmt::format("'{}' holds a NUL character (\\u0000), where it would be cut short", value);
  }
  values_[d.ident] = std::string(value);
  origins_[d.ident] = origin;
  return "";
}

bool read_config_file(const std::string& path, std::string* text, std::string* error) {
  // A device is refused before it is opened (/dev/zero never ends, and opening some devices does
  // something); a directory opens, and reading it fails with EISDIR, which is the reason to give.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    const int e = S_ISDIR(st.st_mode) ? EISDIR : 0;
    *error = e ? fmt::format("cannot read the file: {}", std::strerror(e))
               : std::string("cannot read the file: it is not a regular file or a pipe");
    return false;
  }
  // O_NONBLOCK: a FIFO that nobody writes to opens at once (and then reads as empty) rather than
  // waiting for a writer forever. It is cleared before reading.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return *error = fmt::format("cannot read the file: {}", std::strerror(errno)), false;
  // The path may have changed between stat and open: what was opened is checked again.
  if (::fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) ||
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    ::close(fd);
    return *error = "cannot read the file: it is not a regular file or a pipe", false;
  }
  text->clear();
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return *error = fmt::format("cannot read the file: {}", std::strerror(e)), false;
    }
    if (text->size() + static_cast<std::size_t>(n) > kMaxConfigBytes) {
      ::close(fd);
      text->clear();
      return *error = fmt::format(
                 "cannot read the file: it is larger than {} MiB, the most a config file may hold",
                 kMaxConfigBytes >> 20),
             false;
    }
    text->append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return true;
}

std::vector<std::string> Config::merge_json(std::string_view text) {
  std::vector<std::string> errors;
  // The JSON reader takes a NUL byte for the end of its input: the settings after it would be
  // dropped without a word.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    errors.push_back(fmt::format("not valid JSON: a NUL byte at offset {}", nul));
    return errors;
  }
  nlohmann::json doc;
  policy::JsonRead read;
  try {
    // nlohmann throws on invalid JSON, including a number that overflows a double (1e400).
    read = policy::read_json(text, &doc);
  } catch (const nlohmann::json::exception& e) {
    errors.push_back(fmt::format("not valid JSON: {}", e.what()));
    return errors;
  }
  if (!read.too_deep.empty()) {
    errors.push_back(
        fmt::format("{}: nested more than {} deep", read.too_deep, policy::kMaxJsonDepth));
    return errors;
  }
  if (!doc.is_object()) {
    errors.push_back("the config must be a JSON object of settings");
    return errors;
  }
  std::set<std::string> skip;
  for (const std::string& path : read.repeated) {
    errors.push_back(fmt::format("{}: duplicate key (given more than once)", path));
    skip.insert(path.substr(0, path.find('.')));  // which of the values was meant is unknown
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (skip.count(it.key())) continue;
    const settings::Declaration* decl = nullptr;
    for (const settings::Declaration& d : settings::kDeclarations)
      if (*d.json_key && it.key() == d.json_key) decl = &d;
    if (!decl) {
      errors.push_back(fmt::format("{}: unknown key", it.key()));
      continue;
    }
    std::string value, why;
    if (!json_to_text(*decl, it.value(), &value, &why)) {
      errors.push_back(fmt::format("{}: wrong type: {}", it.key(), why));
      continue;
    }
    why = set_text(*decl, value, "file");
    if (!why.empty()) errors.push_back(fmt::format("{}: out of range: {}", it.key(), why));
  }
  // The messages quote the file's own keys and values, which may hold any bytes.
  for (std::string& e : errors) e = printable_text(e);
  return errors;
}

std::vector<std::string> Config::merge_file(const std::string& path) {
  std::string text, why;
  if (!read_config_file(path, &text, &why)) return {fmt::format("{}: {}", path, why)};
  std::vector<std::string> errors = merge_json(text);
  for (auto& [ident, origin] : origins_)
    if (origin == "file") origin = path;
  return errors;
}

std::vector<std::string> Config::merge_env(const std::function<const char*(const char*)>& lookup) {
  std::vector<std::string> errors;
  for (const settings::Declaration& d : settings::kDeclarations) {
    if (!*d.env) continue;
    const char* v = lookup(d.env);
    if (!v) continue;
    std::string why = set_text(d, v, d.env);
    if (!why.empty()) errors.push_back(fmt::format("{}: {}", d.env, why));
  }
  return errors;
}

std::string Config::merge_value(std::string_view ident, std::string_view value,
                                const std::string& origin) {
  return printable_text(set_text(must_find(ident), value, origin));
}

const std::string& Config::text(std::string_view ident) const {
  auto it = values_.find(ident);
  if (it == values_.end()) must_find(ident);  // aborts on an undeclared identifier
  return it->second;
}

const std::string& Config::origin(std::string_view ident) const {
  auto it = origins_.find(ident);
  if (it == origins_.end()) must_find(ident);
  return it->second;
}

settings::Size Config::size(std::string_view ident) const {
  settings::Size s;
  settings::parse_size(text(ident), &s);  // validated on the way in
  return s;
}

std::uint64_t Config::uint(std::string_view ident) const {
  std::uint64_t u = 0;
  settings::parse_uint(text(ident), &u);
  return u;
}

bool Config::boolean(std::string_view ident) const {
  bool b = false;
  settings::parse_bool(text(ident), &b);
  return b;
}

double Config::weight_for(const std::string& exe) const {
  if (text("share") != "weighted") return 1.0;
  auto it = weights_.find(exe);
  if (it != weights_.end()) return it->second;
  // The library sends its executable's name in sizeof(proto::Hello::exe) bytes: a longer name
  // arrives cut there, and is matched by the names it begins (the first, in byte order).
  constexpr std::size_t kSent = sizeof(proto::Hello::exe);
  if (exe.size() == kSent)
    for (it = weights_.lower_bound(exe); it != weights_.end() && it->first.starts_with(exe); ++it)
      if (it->first.size() > kSent) return it->second;
  return 1.0;
}

bool make_runtime_dir(const Config& config, bool* existed, std::string* error) {
  const std::string dir = runtime_dir(config);
  const bool shared = !config.allow_uids().empty() || !config.allow_gids().empty();
  // 0700 unless other users are allow-listed; then they need to find and reach the socket (their
  // gswapctl lists the directory), and SO_PEERCRED is what keeps everyone else out.
  const mode_t mode = shared ? 0755 : 0700;
  struct stat st {};
  *existed = stat(dir.c_str(), &st) == 0;
  if (*existed) {
    if (!S_ISDIR(st.st_mode)) return *error = fmt::format("{} is not a directory", dir), false;
    return true;
  }
  // Missing parents are made as mkdir -p makes them; the directory itself gets its mode exactly
  // (mkdir's is masked by the umask).
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string cur = dir.substr(0, i);
    if (mkdir(cur.c_str(), i == dir.size() ? mode : 0755) != 0 && errno != EEXIST)
      return *error = fmt::format("cannot create {}: {}", cur, strerror(errno)), false;
  }
  chmod(dir.c_str(), mode);
  return true;
}

std::string runtime_dir(const Config& config) {
  char buf[4096];
  if (proto::runtime_dir(config.text("runtime_dir").c_str(), std::getenv("XDG_RUNTIME_DIR"), buf,
                         sizeof buf))
    return buf;
  return config.text("runtime_dir");
}

}  // namespace gswap::daemon
