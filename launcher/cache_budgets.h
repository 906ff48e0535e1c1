// CacheBudgets: the per-rank device, host and NVMe budgets that a run of a job
// gives the worker's cache, in the worker's accounting (common/shard_bytes.h:
// every shard a rank holds, each cache tensor rounded up to the cache's 4 KiB
// slot — the slack the host tier really reserves beside the shards' bytes).
// This is the one place these numbers are computed: the plan table and
// plan.json (Candidate::budgets), --dry-run's and a run's job.resolved.yaml
// (ResolveJob), the rendered Kubernetes job (from the resolved job) and the
// report (run.budgets, from the resolved job) all show them.
// The host tier is inclusive (every shard passes through it), so the host
// budget is every shard when it fits the host memory per rank, even where the
// model places the states on the GPU. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "cachemgr/size_class_pool.h"  // kSlotAlignment: each tensor's slot rounds up to it
#include "common/job_spec.h"

namespace tencache {

struct CacheBudgets {
  uint64_t device = 0, host = 0, nvme = 0;  // per rank
  // "planned: ..." for each budget the job left auto; "" where the job set it.
  std::string device_why, host_why, nvme_why;
  // Not "": this job cannot run with these budgets (a host budget the user set
  // below the shards with no NVMe budget), naming the keys.
  std::string error;
};

// The budgets for `ranks` ranks where each rank has `device_capacity`,
// `host_capacity` and `nvme_capacity` bytes for the cache (the resource
// model's Candidate::capacity). Budgets the job sets are kept as set.
CacheBudgets PlanCacheBudgets(const JobSpec& job, int ranks, uint64_t device_capacity, uint64_t host_capacity,
                              uint64_t nvme_capacity);

}  // namespace tencache
