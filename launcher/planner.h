// Planner: evaluates a job on every candidate instance type and node count,
// keeps the best node count per instance type under the job's objective (cost
// or time), and picks the overall winner. Renders the result as a table or as
// one JSON object. Pure functions; thread-safe.
#pragma once

#include <optional>
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
  // cluster.target local: this machine's candidate (also listed in candidates
  // and evaluated), the one the run uses; `local_notes` say what was measured.
  std::optional<Candidate> local;
  std::vector<std::string> local_notes;
  // The cache budgets the job sets (not auto), each as written and, when that
  // reads differently, as parsed: "cache.host_budget 8GB = 7.45 GiB".
  std::vector<std::string> budgets;
  // Where the run's checkpoints go (the local candidate's where there is one,
  // else the chosen one's), how big one is and how long it takes to write:
  // CheckpointPlan. "" when nothing is feasible.
  std::string checkpoints;
  // cluster.spot_restart_s, and whether the job left it at its default (an
  // assumption the plan prints).
  double spot_restart_s = 0;
  bool spot_restart_assumed = true;
};

// One line on the checkpoints of `job` run as `c`: how often
// (train.checkpoint_every, train.checkpoint_on_stop), where
// (train.checkpoint_dir, cluster.checkpoint_claim, or the default), the bytes
// per rank and per node, and the seconds one takes to write at the checkpoint
// disk's write bandwidth (TimeCheckpoint: cluster.checkpoint_write_gbps on Kubernetes, else the
// instance's NVMe per disk), or that the bandwidth is unknown.
std::string CheckpointPlan(const JobSpec& job, const Candidate& c);

// InvalidArgument when the job names an instance type the catalog lacks.
// `local` (this machine, for cluster.target local) is evaluated beside the
// catalog with its own measured assumptions; it must outlive the result.
// cluster.nodes, when set, is the only node count tried; train.micro_batch
// auto tries the divisors of global_batch / ranks, largest first, and keeps
// the first feasible one. The local candidate is never `chosen` (that is the
// cheapest cloud plan); it is `local`.
StatusOr<PlanResult> PlanJob(const JobSpec& job, const Catalog& catalog, const ModelAssumptions& a,
                             const struct LocalCandidate* local = nullptr);

// One instance type x node count, with train.micro_batch auto resolved as
// PlanJob does. `job.cluster.ranks_per_node`, when set, must equal the
// instance's GPUs (one rank per GPU) or the candidate is infeasible.
Candidate EvaluateWithMicroBatch(const JobSpec& job, const InstanceSpec& instance, const GpuSpec& gpu, int nodes,
                                 const ModelAssumptions& a);

// The table users read: feasible plans, then infeasible instances with reasons,
// then the assumptions behind the numbers. `all_nodes` lists every node count.
std::string RenderPlanTable(const PlanResult& plan, bool all_nodes);
nlohmann::ordered_json PlanToJson(const PlanResult& plan, bool all_nodes);

}  // namespace tencache
