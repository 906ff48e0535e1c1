// MemoryLimits: the host memory this process may really use, as the planner's
// "this machine" candidate takes it: the smallest of /proc/meminfo's MemTotal,
// the process's cgroup memory limit (v2 memory.max or v1
// memory.limit_in_bytes, the smallest from its own cgroup up to the root it
// sees; a Kubernetes pod's limit is one of these) and, where the host tier
// page-locks its memory for a GPU's DMA, RLIMIT_MEMLOCK. Every limit is read
// from files under a root folder, so tests hand it a fake /proc and /sys.
// Reading never fails: a file that is missing or malformed leaves that limit
// unknown, and an unknown limit bounds nothing.
// A value type; ReadMemoryLimits is thread-compatible.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tencache {

// One limit as read: unknown (nothing answered), none (read: no limit, as
// cgroup "max" or RLIM_INFINITY) or a number of bytes.
struct MemoryLimit {
  bool known = false;
  std::optional<uint64_t> bytes;  // empty while known: no limit
  std::string source;             // the file (as seen from "/") or the call that answered
  bool bounds() const { return known && bytes.has_value(); }
};

struct MemoryLimits {
  MemoryLimit mem_total;      // /proc/meminfo MemTotal
  // /proc/meminfo MemAvailable: shown, never a bound. It is what other
  // processes leave free at this moment (inside a container, on the whole
  // host: /proc/meminfo is not namespaced), so a plan bound by it would change
  // from one launch to the next and disagree with the run folder's
  // machine.json; the resource model's host_reserved_fraction is the margin
  // for other processes instead.
  MemoryLimit mem_available;
  MemoryLimit cgroup_v2;      // the smallest memory.max found
  MemoryLimit cgroup_v1;      // the smallest memory.limit_in_bytes found
  MemoryLimit memlock;        // RLIMIT_MEMLOCK's soft limit
  bool ipc_lock = false;      // CAP_IPC_LOCK in effect: mlock may pass RLIMIT_MEMLOCK
  // The host tier is page-locked for a GPU's DMA (cachemgr/host_tier.h). Without
  // one the device tier is simulated in host memory, copies are memcpy, and a
  // refused pin costs nothing, so RLIMIT_MEMLOCK bounds nothing there.
  bool pins_host_memory = false;

  // RLIMIT_MEMLOCK bounds the host memory: pinned, no CAP_IPC_LOCK, a finite limit.
  bool memlock_bounds() const;
  // The smallest limit that bounds the host memory; 0 when none was readable
  // (not even MemTotal).
  uint64_t usable_bytes() const;
  // Which limit usable_bytes() is: "MemTotal", "cgroup v2 memory.max
  // (/sys/fs/cgroup/...)", "cgroup v1 memory.limit_in_bytes (/sys/...)",
  // "RLIMIT_MEMLOCK", or "nothing readable". On a tie the first of these wins.
  std::string bound_by() const;
  // "23.5 GiB usable (bound by MemTotal; MemAvailable 23.1 GiB, cgroup none,
  // memlock 8.00 MiB: not needed, no GPU pinning)": every limit, for the plan.
  std::string Describe() const;

  // Every limit, with usable_bytes and bound_by, as machine.json holds them.
  nlohmann::ordered_json ToJson() const;
  // The limits ToJson wrote (usable_bytes and bound_by are derived again);
  // InvalidArgument naming the field that is missing or of the wrong type.
  static StatusOr<MemoryLimits> FromJson(const nlohmann::json& j);
};

struct MemoryLimitsOptions {
  std::string root = "/";         // where proc/ and sys/ are read from
  bool pins_host_memory = false;  // MemoryLimits::pins_host_memory
  // RLIMIT_MEMLOCK as getrlimit(2) gives it (0 on success); empty: getrlimit.
  std::function<int(struct rlimit*)> get_memlock;
};

// Reads /proc/meminfo, /proc/self/cgroup with the cgroup files it names,
// /proc/self/status (CAP_IPC_LOCK) and RLIMIT_MEMLOCK.
MemoryLimits ReadMemoryLimits(const MemoryLimitsOptions& options = {});

}  // namespace tencache
