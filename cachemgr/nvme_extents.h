// NvmeExtents: where tensors' copies go in the NVMe file, under a byte budget.
// The file is reserved once, at min(budget, every tensor's extent bytes) floored
// to 4 KiB (0: no file at all). A tensor gets its extent on its first write to
// NVMe, bump-allocated, and keeps it for the life of the cache, so its later
// write-backs always fit and a tensor never written to NVMe takes no space.
// Assign is arithmetic (no allocation) unless it fails.
//
// Not thread-safe: the TensorCache's mutex guards it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace tencache {

class NvmeExtents {
 public:
  // The bytes of the file reserved for tensors whose extents (SlotBytesFor
  // each, cachemgr/size_class_pool.h ExtentBytes) sum to `all_bytes` under
  // `budget` (nullopt: room for every tensor): what capacity() is. The
  // launcher sizes a run's disks with it.
  static uint64_t FileBytes(std::optional<uint64_t> budget, uint64_t all_bytes);
  // `budget`: nullopt = room for every tensor. `all_bytes`: every tensor's
  // extent bytes summed. The keys name the budgets in messages.
  NvmeExtents(std::optional<uint64_t> budget, uint64_t all_bytes, std::string nvme_key, std::string host_key);

  uint64_t capacity() const { return capacity_; }  // the file's bytes (0: no file)
  uint64_t used() const { return used_; }          // bytes of the extents handed out
  bool Fits(uint64_t bytes) const { return used_ + bytes <= capacity_; }
  // Where the reserved file starts in the NVMe store. REQUIRES: before Assign.
  void set_base(uint64_t base) { base_ = base; }

  // The store offset of a new extent of `bytes` for `tensor`; ResourceExhausted
  // naming the tensor, the key, the budget, the bytes used and needed when it
  // does not fit.
  StatusOr<uint64_t> Assign(const std::string& tensor, uint64_t bytes);
  Status Exceeded(const std::string& tensor, uint64_t bytes) const;
  // With no file, every tensor must fit in the host slots: InvalidArgument
  // naming both keys and the numbers when `host_holds` < `all_bytes`.
  Status CheckNoFile(uint64_t host_budget, uint64_t host_holds, uint64_t all_bytes) const;
  std::string Describe() const;  // the budget and the file, for Describe()

 private:
  std::string BudgetText() const;

  const std::optional<uint64_t> budget_;
  const uint64_t capacity_;
  const std::string nvme_key_;
  const std::string host_key_;
  uint64_t base_ = 0;
  uint64_t used_ = 0;
};

}  // namespace tencache
