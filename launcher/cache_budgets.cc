#include "launcher/cache_budgets.h"

#include <algorithm>

#include "common/byte_size.h"
#include "common/shard_bytes.h"

namespace tencache {

CacheBudgets PlanCacheBudgets(const JobSpec& job, int ranks, uint64_t device_capacity, uint64_t host_capacity,
                              uint64_t nvme_capacity) {
  CacheBudgets b;
  const ShardBytes s = ShardBytesPerRank(job.model, job.dtype, std::max(1, ranks));
  const uint64_t slack = s.tensors * kSlotAlignment;  // at most one slot's rounding a tensor
  const uint64_t device_need = s.bytes[kStateParam] + uint64_t(job.model.num_blocks()) * kSlotAlignment;
  b.device = job.cache.device_budget.value_or(std::min(device_need, device_capacity));
  if (!job.cache.device_budget) {
    b.device_why = "planned: " + std::string(b.device >= device_need
        ? "every parameter shard of this rank (" + FormatBytes(s.bytes[kStateParam]) + ", with slot rounding " +
              FormatBytes(device_need) + ")"
        : "the device memory left after activations and working buffers (" + FormatBytes(device_capacity) +
              "; parameter shards are " + FormatBytes(s.bytes[kStateParam]) + ")");
  }
  const uint64_t host_need = s.total() + slack;
  b.host = job.cache.host_budget.value_or(std::min(host_need, host_capacity));
  if (!job.cache.host_budget) {
    b.host_why = "planned: " + std::string(b.host >= host_need
        ? "every shard of this rank (" + FormatBytes(s.total()) + ": parameters, masters, moments, gradients) and " +
              FormatBytes(slack) + " of slot rounding = " + FormatBytes(host_need)
        : "the host memory per rank (" + FormatBytes(host_capacity) + "; the shards are " +
              FormatBytes(s.total()) + ")");
  }
  if (job.cache.nvme_budget) {
    b.nvme = *job.cache.nvme_budget;
  } else if (b.host >= host_need) {
    b.nvme_why = "planned: 0, every shard fits the host budget (no NVMe file)";
  } else {
    // A shard keeps its NVMe extent once written, so the file holds what
    // cannot stay on the host at once and, beside it, a clean copy of every
    // parameter shard (the passes re-read parameters from the host; their
    // NVMe copies spare a write-back). The cache's eviction keeps within it.
    const uint64_t off_host = host_need - b.host;
    const uint64_t param_copies = device_need;  // one tensor a block
    b.nvme = std::min({host_need, off_host + param_copies, nvme_capacity});
    b.nvme_why = "planned: the shards that cannot stay on the host (" + FormatBytes(off_host) +
                 ") and a clean copy of every parameter shard (" + FormatBytes(param_copies) + "), within " +
                 FormatBytes(nvme_capacity) + " of NVMe per rank";
  }
  if (b.host < host_need && b.nvme == 0) {
    b.error = job.Where("cache.nvme_budget") + ": 0, but cache.host_budget " + FormatBytes(b.host) +
              " holds less than this rank's " + FormatBytes(s.total()) + " of shards; raise one of them";
  }
  return b;
}

}  // namespace tencache
