#include "cachemgr/host_tier.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/byte_size.h"

namespace tencache {

Status MlockPinner(void* base, uint64_t bytes) {
  if (::mlock(base, bytes) == 0) return Status::Ok();
  const int err = errno;
  rlimit lim{};
  ::getrlimit(RLIMIT_MEMLOCK, &lim);
  std::string limit = lim.rlim_cur == RLIM_INFINITY ? "unlimited" : FormatBytes(static_cast<uint64_t>(lim.rlim_cur));
  return Status::ResourceExhausted("mlock of " + FormatBytes(bytes) + ": " + std::strerror(err) +
                                   " (RLIMIT_MEMLOCK " + limit + ")");
}

HostTier::HostTier(HostTierOptions options) : options_(std::move(options)), arena_(options_.huge_pages) {}

std::string HostTier::Describe() const {
  const std::string pages = arena_.huge_pages() ? ", huge pages advised" : "";
  MutexLock lock(&mu_);
  if (!options_.pin) return "host(unpinned: pinning disabled" + pages + ")";
  const std::string how = options_.pinner ? options_.pinner_name : "mlock";
  if (!all_pinned_) return "host(unpinned fallback: " + pin_failure_ + pages + ")";
  return "host(pinned: " + how + pages + ")";
}

StatusOr<uint64_t> HostTier::Reserve(uint64_t bytes) {
  void* base = nullptr;
  TC_ASSIGN_OR_RETURN(uint64_t offset, arena_.Reserve(bytes, &base));
  if (!options_.pin) return offset;
  const uint64_t rounded = (bytes + 4095) / 4096 * 4096;
  Status st = options_.pinner ? options_.pinner(base, rounded) : MlockPinner(base, rounded);
  if (!st.ok() && options_.require_pin) {
    return Status::ResourceExhausted(
        "host tier: cannot pin " + FormatBytes(rounded) + " (" + st.message() + "), and a GPU's host tier must be "
        "pinned: its copies to the device run at pinned speed in the plan. Raise the memlock limit of this process "
        "(ulimit -l unlimited; under systemd LimitMEMLOCK=infinity; in Kubernetes the container runtime's "
        "LimitMEMLOCK, docs/kubernetes.md) or lower cache.host_budget");
  }
  if (!st.ok()) {
    MutexLock lock(&mu_);
    if (all_pinned_) {
      std::fprintf(stderr,
                   "tencache: warning: host tier: cannot pin %s (%s); using pageable memory, "
                   "host<->device copies will be slower\n",
                   FormatBytes(rounded).c_str(), st.message().c_str());
      pin_failure_ = st.message();
    }
    all_pinned_ = false;
  }
  return offset;
}

bool HostTier::pinned() const {
  MutexLock lock(&mu_);
  return options_.pin && all_pinned_;
}

std::string HostTier::pin_failure() const {
  MutexLock lock(&mu_);
  return pin_failure_;
}

Status HostTier::Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
                       std::chrono::milliseconds) {
  uint8_t* p = arena_.Pointer(offset, len);
  if (p == nullptr)
    return Status::InvalidArgument("tensor " + what + ": host tier: range at offset " +
                                   std::to_string(offset) + " (" + std::to_string(len) +
                                   " bytes) is outside the reserved regions");
  std::memcpy(p, src, len);
  return Status::Ok();
}

Status HostTier::Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
                      std::chrono::milliseconds) {
  const uint8_t* p = arena_.Pointer(offset, len);
  if (p == nullptr)
    return Status::InvalidArgument("tensor " + what + ": host tier: range at offset " +
                                   std::to_string(offset) + " (" + std::to_string(len) +
                                   " bytes) is outside the reserved regions");
  std::memcpy(dst, p, len);
  return Status::Ok();
}

}  // namespace tencache
