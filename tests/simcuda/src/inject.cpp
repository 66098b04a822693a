// inject.cpp: driver error injection. A list of rules "SYMBOL:N[+][=CODE]" (from SIMCUDA_FAIL at
// the first cuInit, or from simcudaInjectFailure) makes the Nth call of an ABI symbol (or the Nth
// and every later one) return CODE instead of running. SC_ENTRY (entry.h) asks armed_result() on
// every call while any rule is armed.
//
// Threading: each slot's rules are published as one immutable object through an atomic pointer,
// with its own call counter. Replacing the list swaps the pointers; the old objects are kept (never
// freed) because a concurrent caller may still be reading them. Replacements are serialised by
// g_replace_mu.
#include <charconv>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"

namespace simcuda {
namespace {

struct Rule {
  uint64_t n = 0;     // the 1-based call number
  bool plus = false;  // and every later call
  CUresult code = CUDA_ERROR_UNKNOWN;
};
struct SlotRules {
  std::vector<Rule> rules;
  std::atomic<uint64_t> calls{0};  // calls of this symbol since the rules were armed
};

std::atomic<SlotRules*> g_rules[api::kNumSlots];
std::mutex g_replace_mu;
std::vector<std::unique_ptr<SlotRules>> g_retired;  // guarded by g_replace_mu

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <class T>
bool parse_number(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// One item: SYMBOL:N, SYMBOL:N+, either followed by =CODE (a number or a CUDA_ERROR_* name).
bool parse_item(std::string_view item, int* slot, Rule* rule) {
  item = trim(item);
  size_t colon = item.find(':');
  if (colon == std::string_view::npos) return false;
  *slot = api::slot_of(trim(item.substr(0, colon)));
  if (*slot < 0) return false;
  std::string_view rest = item.substr(colon + 1);
  size_t eq = rest.find('=');
  std::string_view count = trim(rest.substr(0, eq));
  if (!count.empty() && count.back() == '+') {
    rule->plus = true;
    count = trim(count.substr(0, count.size() - 1));
  }
  if (!parse_number(count, &rule->n) || rule->n == 0) return false;
  if (eq == std::string_view::npos) return true;
  std::string_view code = trim(rest.substr(eq + 1));
  int value = 0;
  if (parse_number(code, &value)) {
    rule->code = static_cast<CUresult>(value);
  } else if (!error_by_name(code, &rule->code)) {
    return false;
  }
  return rule->code != CUDA_SUCCESS && value >= 0;
}

// Parses a whole list into per-slot rules; false (with the bad item) on the first malformed one.
bool parse_spec(std::string_view spec, std::vector<std::unique_ptr<SlotRules>>* out,
                std::string* bad) {
  out->clear();
  out->resize(api::kNumSlots);
  if (trim(spec).empty()) return true;
  for (;;) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    int slot = -1;
    Rule rule;
    if (!parse_item(item, &slot, &rule)) {
      *bad = std::string(trim(item));
      return false;
    }
    auto& r = (*out)[slot];
    if (!r) r = std::make_unique<SlotRules>();
    r->rules.push_back(rule);
    if (comma == std::string_view::npos) return true;
    spec.remove_prefix(comma + 1);
  }
}

void install(std::vector<std::unique_ptr<SlotRules>>& parsed) {
  std::lock_guard lk(g_replace_mu);
  bool any = false;
  for (int i = 0; i < api::kNumSlots; ++i) {
    any |= parsed[i] != nullptr;
    SlotRules* old = g_rules[i].exchange(parsed[i].release(), std::memory_order_acq_rel);
    if (old) g_retired.emplace_back(old);
  }
  api::g_armed.store(any, std::memory_order_release);
}

}  // namespace

CUresult api::armed_result(int slot) {
  SlotRules* r = g_rules[slot].load(std::memory_order_acquire);
  if (!r) return CUDA_SUCCESS;
  uint64_t n = r->calls.fetch_add(1, std::memory_order_relaxed) + 1;
  for (const Rule& rule : r->rules)
    if (n == rule.n || (rule.plus && n > rule.n)) {
      count(Counter::failures_injected);
      return rule.code;
    }
  return CUDA_SUCCESS;
}

bool arm_failures_from_env(const std::string& spec) {
  std::vector<std::unique_ptr<SlotRules>> parsed;
  std::string bad;
  if (!parse_spec(spec, &parsed, &bad)) {
    std::fprintf(stderr,
                 "simcuda: SIMCUDA_FAIL: cannot parse '%s' (want SYMBOL:N[+][=CODE], comma "
                 "separated, SYMBOL an ABI symbol such as cuMemcpyDtoHAsync_v2)\n",
                 bad.c_str());
    return false;
  }
  install(parsed);
  return true;
}

}  // namespace simcuda

using namespace simcuda;

SC_EXPORT int simcudaInjectFailure(const char* spec) {
  std::vector<std::unique_ptr<SlotRules>> parsed;
  std::string bad;
  if (!parse_spec(spec ? spec : "", &parsed, &bad)) return -1;
  install(parsed);
  return 0;
}
