// planners.cpp: policy names and the plan-simulate-bound evaluation.
#include "policy/planners.h"

#include "policy/baselines.h"
#include "policy/capuchin.h"

namespace gswap::policy {

const char* policy_name(PolicyKind p) {
  switch (p) {
    case PolicyKind::kCapuchin:
      return "capuchin";
    case PolicyKind::kDelta:
      return "delta";
    case PolicyKind::kLru:
      return "lru";
    case PolicyKind::kVdnn:
      return "vdnn";
    case PolicyKind::kRecompute:
      return "recompute";
  }
  return "?";
}

std::optional<PolicyKind> parse_policy(std::string_view name) {
  for (PolicyKind p : kAllPolicies)
    if (name == policy_name(p)) return p;
  return std::nullopt;
}

Plan make_plan(PolicyKind p, const Analysis& a, std::uint64_t budget) {
  switch (p) {
    case PolicyKind::kCapuchin:
      return plan_capuchin(a, budget);
    case PolicyKind::kDelta:
      return plan_delta(a, budget);
    case PolicyKind::kLru:
      return plan_lru(a, budget);
    case PolicyKind::kVdnn:
      return plan_vdnn(a, budget);
    case PolicyKind::kRecompute:
      return plan_recompute_only(a, budget);
  }
  return {};
}

Evaluation evaluate(PolicyKind p, const Analysis& a, std::uint64_t budget,
                    const std::function<double()>& now_ms) {
  Evaluation ev;
  const double t0 = now_ms();
  ev.plan = make_plan(p, a, budget);
  ev.plan_time_ms = now_ms() - t0;
  ev.sim = simulate(a, ev.plan, budget);
  ev.bound = lower_bound(a, budget);
  return ev;
}

}  // namespace gswap::policy
