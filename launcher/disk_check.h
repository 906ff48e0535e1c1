// The disk a run on this machine will fill, checked before anything starts:
// the NVMe tier's files (each rank preallocates its file whole: NvmeFileBytes,
// times the ranks here) at cache.nvme_path; the train.keep_checkpoints
// checkpoints kept in train.checkpoint_dir (less those already there) and,
// for a while, one more (a new one is complete before the oldest goes); and
// the weights the workers write after the last step (fp32) in the run folder.
// On one file system the lasting demands are added up, and of the transient
// ones (the extra checkpoint, the weights: never at the same time) the
// largest, against its free space (statvfs's blocks available to this user).
// Pure arithmetic apart from the injected file-system query; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"

namespace tencache {

struct DiskDemand {
  std::string key;   // the job key or flag that names the place, e.g. "cache.nvme_path"
  std::string path;  // where the files go
  uint64_t bytes = 0;
  std::string what;  // e.g. "the NVMe tier of 2 rank(s)"
  bool transient = false;  // held for a while only, never beside another transient demand
};

// Bytes of one checkpoint of `job` over all ranks: each rank's fp32 masters
// and both moments (worker/checkpoint.h), a manifest aside.
uint64_t CheckpointBytes(const JobSpec& job, int ranks);

// The bytes of one rank's NVMe file: its cache.nvme_budget (unset: room for
// every shard), at most every shard's extent (the tensor cache's capacity,
// which it allocates whole before the first step), 0 for no file.
// REQUIRES: job.model describes a model; ranks >= 1.
uint64_t NvmeFileBytes(const JobSpec& job, int ranks);

// `nvme_bytes_per_rank`: one rank's NVMe file (NvmeFileBytes);
// `local_ranks`: the ranks that write here; `existing_checkpoints`: complete
// ones already in train.checkpoint_dir (resuming).
std::vector<DiskDemand> RunDiskDemands(const JobSpec& job, uint64_t nvme_bytes_per_rank, int local_ranks,
                                       const std::string& run_dir, int existing_checkpoints);

struct FsSpace {
  uint64_t device = 0;      // st_dev of the nearest existing folder
  uint64_t free_bytes = 0;  // available to this user
  bool known = false;       // false when no folder on the path could be queried
};
FsSpace QueryFsSpace(const std::string& path);

// InvalidArgument naming every key whose file system lacks room, with the
// bytes each demand needs and the free bytes there; Ok when all fit. A path
// whose space cannot be queried is not checked.
Status CheckDiskSpace(const std::vector<DiskDemand>& demands,
                      const std::function<FsSpace(const std::string&)>& query = QueryFsSpace);


}  // namespace tencache
