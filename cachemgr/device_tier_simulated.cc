// The simulated device tier: host memory standing in for a GPU (see device_tier.h).
#include <cstring>

#include "cachemgr/device_tier.h"
#include "cachemgr/host_arena.h"

namespace tencache {
namespace {

class SimulatedDeviceTier final : public TierStore {
 public:
  Tier tier() const override { return Tier::kDevice; }
  std::string Describe() const override { return "device(simulated-host)"; }
  StatusOr<uint64_t> Reserve(uint64_t bytes) override { return arena_.Reserve(bytes, nullptr); }
  uint64_t reserved_bytes() const override { return arena_.reserved_bytes(); }
  uint64_t allocations() const override { return arena_.regions(); }

  Status Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
               std::chrono::milliseconds) override {
    uint8_t* p = arena_.Pointer(offset, len);
    if (p == nullptr) return OutOfRange(offset, len, what);
    std::memcpy(p, src, len);
    return Status::Ok();
  }
  Status Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
              std::chrono::milliseconds) override {
    const uint8_t* p = arena_.Pointer(offset, len);
    if (p == nullptr) return OutOfRange(offset, len, what);
    std::memcpy(dst, p, len);
    return Status::Ok();
  }
  void* Address(uint64_t offset) override { return arena_.Pointer(offset, 0); }

 private:
  static Status OutOfRange(uint64_t offset, uint64_t len, const std::string& what) {
    return Status::InvalidArgument("tensor " + what + ": device(simulated-host): range at offset " +
                                   std::to_string(offset) + " (" + std::to_string(len) +
                                   " bytes) is outside the reserved regions");
  }
  HostArena arena_;
};

}  // namespace

const char* DeviceBackendName(DeviceBackend backend) {
  return backend == DeviceBackend::kCuda ? "cuda" : "simulated-host";
}

std::unique_ptr<TierStore> MakeSimulatedDeviceTier() { return std::make_unique<SimulatedDeviceTier>(); }

}  // namespace tencache
