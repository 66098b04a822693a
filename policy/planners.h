// planners.h: one entry point for every policy by name, and the evaluation the CLI and the
// benchmark share: plan, time the planning with a caller-supplied clock, simulate, bound.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "policy/analysis.h"
#include "policy/lower_bound.h"
#include "policy/plan.h"
#include "policy/simulator.h"

namespace gswap::policy {

enum class PolicyKind { kCapuchin, kDelta, kLru, kVdnn, kRecompute };

inline constexpr PolicyKind kAllPolicies[] = {PolicyKind::kCapuchin, PolicyKind::kDelta,
                                              PolicyKind::kLru, PolicyKind::kVdnn,
                                              PolicyKind::kRecompute};

const char* policy_name(PolicyKind p);
std::optional<PolicyKind> parse_policy(std::string_view name);

Plan make_plan(PolicyKind p, const Analysis& a, std::uint64_t budget);

struct Evaluation {
  Plan plan;
  SimResult sim;
  LowerBound bound;
  double plan_time_ms = 0;
};

// `now_ms` is the clock used to time planning (policy/ reads no clock itself).
Evaluation evaluate(PolicyKind p, const Analysis& a, std::uint64_t budget,
                    const std::function<double()>& now_ms);

}  // namespace gswap::policy
