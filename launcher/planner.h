// Planner: evaluates a job on every candidate instance type and node count,
// keeps the best node count per instance type under the job's objective (cost
// or time), and picks the overall winner. Renders the result as a table or as
// one JSON object. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include "launcher/catalog.h"
#include "launcher/resource_model.h"

namespace tencache {

struct PlanResult {
  std::string job_name;
  ModelShape model;
  DType dtype = DType::kBf16;
  uint64_t params = 0;
  uint64_t model_state_bytes = 0;   // all five state classes, all ranks together
  uint64_t tokens_per_epoch = 0;
  Objective objective = Objective::kCost;
  // One entry per instance type: feasible ones sorted by the objective, then the
  // infeasible ones (with the reason at the node count that came closest).
  std::vector<Candidate> candidates;
  // Every instance type x node count evaluated, in catalog order (--all-nodes).
  std::vector<Candidate> evaluated;
  int chosen = -1;  // index into candidates; -1 when nothing is feasible
};

// InvalidArgument when the job names an instance type the catalog lacks.
StatusOr<PlanResult> PlanJob(const JobSpec& job, const Catalog& catalog, const ModelAssumptions& a);

// The table users read: feasible plans, then infeasible instances with reasons,
// then the assumptions behind the numbers. `all_nodes` lists every node count.
std::string RenderPlanTable(const PlanResult& plan, bool all_nodes);
nlohmann::ordered_json PlanToJson(const PlanResult& plan, bool all_nodes);

}  // namespace tencache
