#include "scheduler/access_sequence.h"

#include <algorithm>

namespace tencache {

StatusOr<AccessSequence> AccessSequence::FromTrace(const Trace& trace) {
  TC_RETURN_IF_ERROR(ValidateTrace(trace, "trace"));
  AccessSequence s;
  s.bytes_ = trace.TensorBytes();
  s.uses_.resize(s.bytes_.size());
  s.prefix_.push_back(0);
  for (const TraceEvent& e : trace.events) {
    if (!e.is_device_access()) continue;
    s.uses_[e.id].push_back(uint32_t(s.tensor_.size()));
    s.tensor_.push_back(e.id);
    s.compute_.push_back(e.duration_s());
    s.prefix_.push_back(s.prefix_.back() + e.bytes);
  }
  return s;
}

AccessIndex AccessSequence::NextUse(TensorId id, AccessIndex g) const {
  const std::vector<uint32_t>& u = uses_[id];
  if (u.empty()) return kNeverUsed;
  const AccessIndex n = size();
  const AccessIndex step = g / n;
  const uint32_t k = uint32_t(g % n);
  auto it = std::upper_bound(u.begin(), u.end(), k);
  if (it != u.end()) return step * n + *it;
  return (step + 1) * n + u.front();
}

AccessIndex AccessSequence::PrevUse(TensorId id, AccessIndex g) const {
  const std::vector<uint32_t>& u = uses_[id];
  if (u.empty()) return kNeverUsed;
  const AccessIndex n = size();
  const AccessIndex step = g / n;
  const uint32_t k = uint32_t(g % n);
  auto it = std::lower_bound(u.begin(), u.end(), k);
  if (it != u.begin()) return step * n + *(it - 1);
  if (step == 0) return kNeverUsed;
  return (step - 1) * n + u.back();
}

uint64_t AccessSequence::BytesBetween(AccessIndex a, AccessIndex b) const {
  if (b <= a + 1) return 0;
  const AccessIndex n = size();
  auto upto = [&](AccessIndex g) {  // bytes of global accesses 0..g-1
    return (g / n) * prefix_[n] + prefix_[g % n];
  };
  return upto(b) - upto(a + 1);
}

}  // namespace tencache
