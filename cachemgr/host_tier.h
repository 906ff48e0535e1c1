// HostTier: the middle tier — page-aligned host memory, pinned so that copies to
// the device run at full PCIe speed and the NVMe tier can DMA straight into it.
// Pinning uses mlock by default, or a pinner supplied by the CUDA backend
// (cudaHostRegister). When pinning is refused (RLIMIT_MEMLOCK in containers) the
// tier keeps working with pageable memory, prints one warning, and says so in
// Describe() and pinned() — unless pinning is required (a real GPU's host tier,
// whose copies the plan times at pinned speed): then Reserve fails, naming the
// limit and how to raise it.
//
// Thread safety: all methods are thread-safe; copies to disjoint ranges may run
// concurrently.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "cachemgr/host_arena.h"
#include "cachemgr/tier.h"
#include "common/thread_annotations.h"

namespace tencache {

// Pins [base, base+bytes); returns a non-OK Status naming why it could not.
using HostPinner = std::function<Status(void* base, uint64_t bytes)>;

struct HostTierOptions {
  bool pin = true;
  HostPinner pinner;          // empty: mlock
  std::string pinner_name;    // how Describe() names the pinner, e.g. "cudaHostRegister"
  bool huge_pages = true;     // regions of 2 MiB or more advised MADV_HUGEPAGE (host_arena.h)
  bool require_pin = false;   // a refused pin fails Reserve instead of falling back to pageable memory
};

// The default pinner: mlock, with RLIMIT_MEMLOCK named in its error.
Status MlockPinner(void* base, uint64_t bytes);

class HostTier final : public TierStore {
 public:
  explicit HostTier(HostTierOptions options = {});

  Tier tier() const override { return Tier::kHost; }
  std::string Describe() const override;
  StatusOr<uint64_t> Reserve(uint64_t bytes) override;
  uint64_t reserved_bytes() const override { return arena_.reserved_bytes(); }
  uint64_t allocations() const override { return arena_.regions(); }
  Status Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
               std::chrono::milliseconds timeout) override;
  Status Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
              std::chrono::milliseconds timeout) override;
  void* Address(uint64_t offset) override { return arena_.Pointer(offset, 0); }

  // True when every region reserved so far is pinned.
  bool pinned() const EXCLUDES(mu_);
  // True when the regions were given the huge-page advice (HostArena::huge_pages).
  bool huge_pages() const { return arena_.huge_pages(); }
  // Why pinning fell back (empty when it did not).
  std::string pin_failure() const EXCLUDES(mu_);

 private:
  const HostTierOptions options_;
  HostArena arena_;
  mutable Mutex mu_;
  bool all_pinned_ GUARDED_BY(mu_) = true;
  std::string pin_failure_ GUARDED_BY(mu_);
};

}  // namespace tencache
