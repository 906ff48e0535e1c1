#include "scheduler/access_sequence.h"

namespace tencache {

StatusOr<AccessSequence> AccessSequence::FromTrace(const Trace& trace) {
  TC_RETURN_IF_ERROR(ValidateTrace(trace, "trace"));
  AccessSequence s;
  s.bytes_ = trace.TensorBytes();
  std::vector<TensorId> order;
  s.prefix_.push_back(0);
  for (const TraceEvent& e : trace.events) {
    if (!e.is_device_access()) continue;
    order.push_back(e.id);
    s.compute_.push_back(e.duration_s());
    s.prefix_.push_back(s.prefix_.back() + e.bytes);
  }
  s.order_ = StepOrder<DeviceAccessIndex>(std::move(order), s.bytes_.size());
  return s;
}

uint64_t AccessSequence::BytesBetween(DeviceAccessIndex a, DeviceAccessIndex b) const {
  if (b <= a + 1) return 0;
  const uint64_t n = size();
  auto upto = [&](DeviceAccessIndex g) {  // bytes of global accesses 0..g-1
    return g.step(n) * prefix_[n] + prefix_[g.in_step(n)];
  };
  return upto(b) - upto(a + 1);
}

}  // namespace tencache
