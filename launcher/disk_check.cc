#include "launcher/disk_check.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "cachemgr/nvme_extents.h"
#include "cachemgr/size_class_pool.h"
#include "common/byte_size.h"
#include "common/shard_bytes.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

}  // namespace

uint64_t CheckpointBytes(const JobSpec& job, int ranks) {
  const ShardBytes s = ShardBytesPerRank(job.model, job.dtype, ranks);
  return s.checkpoint(job.dtype) * uint64_t(ranks);
}

uint64_t NvmeFileBytes(const JobSpec& job, int ranks) {
  return NvmeExtents::FileBytes(job.cache.nvme_budget, ExtentBytes(ShardTensorBytes(job.model, job.dtype, ranks).all));
}

std::vector<DiskDemand> RunDiskDemands(const JobSpec& job, uint64_t nvme_bytes_per_rank, int local_ranks,
                                       const std::string& run_dir, int existing_checkpoints) {
  std::vector<DiskDemand> d;
  if (nvme_bytes_per_rank > 0) {
    d.push_back({"cache.nvme_path", job.cache.nvme_path, nvme_bytes_per_rank * uint64_t(local_ranks),
                 "the NVMe tier of " + std::to_string(local_ranks) + " rank(s)"});
  }
  if (job.train.checkpoint_every > 0 || job.train.checkpoint_on_stop) {
    const uint64_t one = CheckpointBytes(job, std::max(1, job.ranks()));
    const int keep = std::max(1, job.train.keep_checkpoints);
    const int more = std::max(0, keep - existing_checkpoints);
    if (more > 0) {
      d.push_back({"train.checkpoint_dir", job.train.checkpoint_dir, one * uint64_t(more),
                   std::to_string(more) + " checkpoint(s) of " + FormatBytes(one) + " kept (train.keep_checkpoints " +
                       std::to_string(keep) + ")"});
    }
    d.push_back({"train.checkpoint_dir", job.train.checkpoint_dir, one,
                 "one more checkpoint while a new one is written", true});
  }
  d.push_back({"--out", run_dir, job.model.ParamCount() * sizeof(float), "the final weights (fp32)", true});
  return d;
}

FsSpace QueryFsSpace(const std::string& path) {
  FsSpace s;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  while (!p.empty() && !fs::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  struct statvfs v;
  struct stat st;
  if (p.empty() || ::statvfs(p.c_str(), &v) != 0 || ::stat(p.c_str(), &st) != 0) return s;
  s.device = uint64_t(st.st_dev);
  s.free_bytes = uint64_t(v.f_bavail) * uint64_t(v.f_frsize);
  s.known = true;
  return s;
}

Status CheckDiskSpace(const std::vector<DiskDemand>& demands, const std::function<FsSpace(const std::string&)>& query) {
  struct Fs {
    uint64_t free = 0, lasting = 0;
    const DiskDemand* peak = nullptr;  // the largest transient demand
    std::vector<const DiskDemand*> on;
    uint64_t needed() const { return lasting + (peak ? peak->bytes : 0); }
  };
  std::map<uint64_t, Fs> by_device;
  for (const DiskDemand& d : demands) {
    const FsSpace s = query(d.path);
    if (!s.known) continue;
    Fs& f = by_device[s.device];
    f.free = s.free_bytes;
    if (!d.transient) {
      f.lasting += d.bytes;
      f.on.push_back(&d);
    } else if (f.peak == nullptr || d.bytes > f.peak->bytes) {
      f.peak = &d;
    }
  }
  std::string msg;
  for (auto& [device, f] : by_device) {
    if (f.needed() <= f.free) continue;
    if (f.peak != nullptr) f.on.push_back(f.peak);
    std::string parts;
    for (const DiskDemand* d : f.on) {
      parts += (parts.empty() ? "" : " + ") + d->key + " " + d->path + ": " + FormatBytes(d->bytes) + " for " + d->what;
    }
    msg += (msg.empty() ? "" : "; ") + std::string("not enough disk: ") + parts + " = " + FormatBytes(f.needed()) +
           ", but that file system has " + FormatBytes(f.free) + " free";
  }
  if (msg.empty()) return Status::Ok();
  return Status::InvalidArgument(msg + ": free space, point the key at a larger disk, or lower train.keep_checkpoints");
}

}  // namespace tencache
