#include "cachemgr/nvme_extents.h"

#include <algorithm>

#include "cachemgr/size_class_pool.h"
#include "common/byte_size.h"

namespace tencache {

uint64_t NvmeExtents::FileBytes(std::optional<uint64_t> budget, uint64_t all_bytes) {
  return std::min(budget.value_or(all_bytes), all_bytes) / kSlotAlignment * kSlotAlignment;
}

NvmeExtents::NvmeExtents(std::optional<uint64_t> budget, uint64_t all_bytes, std::string nvme_key,
                         std::string host_key)
    : budget_(budget),
      capacity_(FileBytes(budget, all_bytes)),
      nvme_key_(std::move(nvme_key)),
      host_key_(std::move(host_key)) {}

StatusOr<uint64_t> NvmeExtents::Assign(const std::string& tensor, uint64_t bytes) {
  if (!Fits(bytes)) return Exceeded(tensor, bytes);
  const uint64_t offset = base_ + used_;
  used_ += bytes;
  return offset;
}

Status NvmeExtents::Exceeded(const std::string& tensor, uint64_t bytes) const {
  return Status::ResourceExhausted("tensor '" + tensor + "': " + nvme_key_ + " " + BudgetText() +
                                   " is exceeded: " + FormatBytes(used_) + " already on NVMe, " +
                                   FormatBytes(bytes) + " more needed; raise " + nvme_key_ + " or " + host_key_);
}

Status NvmeExtents::CheckNoFile(uint64_t host_budget, uint64_t host_holds, uint64_t all_bytes) const {
  if (capacity_ > 0 || host_holds >= all_bytes) return Status::Ok();
  const std::string nvme = budget_ && *budget_ == 0
                               ? nvme_key_ + " is 0"
                               : nvme_key_ + " " + BudgetText() + " holds not one 4 KiB extent";
  return Status::InvalidArgument("tensor cache: the tensors need " + FormatBytes(all_bytes) +
                                 " of host slots to stay off NVMe, " + host_key_ + " " +
                                 FormatBytes(host_budget) + " holds " + FormatBytes(host_holds) + " of them, and " +
                                 nvme + " (no NVMe file): raise " + host_key_ + " to at least " +
                                 FormatBytes(all_bytes) + " or give " + nvme_key_ + " room");
}

std::string NvmeExtents::BudgetText() const {
  return budget_ ? FormatBytes(*budget_) : std::string("(unset)");
}

std::string NvmeExtents::Describe() const {
  const std::string budget = budget_ ? nvme_key_ + " " + BudgetText() : nvme_key_ + " unset: room for every tensor";
  if (capacity_ == 0) return "nvme(no file: " + budget + ")";
  return budget + ", file " + FormatBytes(capacity_);
}

}  // namespace tencache
