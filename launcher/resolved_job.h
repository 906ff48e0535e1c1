// ResolvedJob: the job as a run executes it. Every `auto` is replaced by the
// chosen plan's value — nodes, ranks per node, micro-batch, and the per-rank
// device / host / NVMe budgets in the worker's accounting (common/shard_bytes.h)
// — and written as OUT/job.resolved.yaml with a comment on every key saying
// where its value came from (the job file's line, a --set, the default, or the
// plan and why). Each key is written by its entry in common/job_keys.h.
// Workers read that file and nothing else. Pure functions.
#pragma once

#include <map>
#include <string>

#include "common/job_spec.h"
#include "launcher/resource_model.h"

namespace tencache {

struct ResolvedJob {
  JobSpec job;                             // nothing auto left
  std::map<std::string, std::string> why;  // key -> "planned: ..." for each value the plan set
};

// Resolves `job` for a run on candidate `run`, with the cache budgets the plan
// computed for it (Candidate::budgets). InvalidArgument naming the key when a
// budget the user set cannot hold what the worker must keep resident, else
// with the candidate's reason when it is infeasible. REQUIRES: `run` was
// evaluated for `job` (EvaluateCandidate).
StatusOr<ResolvedJob> ResolveJob(const JobSpec& job, const Candidate& run);

// The YAML text of `r`, which ParseJobText reads back to an equal JobSpec.
// `header` lines are written first, as comments.
std::string RenderResolvedJob(const ResolvedJob& r, const std::vector<std::string>& header);

}  // namespace tencache
