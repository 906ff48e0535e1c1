// The CUDA device tier (see device_tier.h). Compiled with the host compiler
// against the CUDA runtime API when the toolkit is found; without it, the
// factory reports kCuda as Unavailable.
#include <array>
#include <atomic>
#include <thread>
#include <unordered_map>

#include "cachemgr/device_tier.h"
#include "common/byte_size.h"
#include "common/thread_annotations.h"

#if TENCACHE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tencache {

std::unique_ptr<TierStore> MakeSimulatedDeviceTier();  // device_tier_simulated.cc

HostTierOptions CudaPinnedHostTierOptions() {
  HostTierOptions o;
  o.pinner = CudaHostPinner();
  o.pinner_name = "cudaHostRegister";
  o.require_pin = true;  // pageable memory would halve the copies the plan times
  return o;
}

#if TENCACHE_HAVE_CUDA
namespace {

std::string CudaError(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

class CudaDeviceTier final : public TierStore {
 public:
  static constexpr size_t kMaxRegions = 64;

  CudaDeviceTier(int device, cudaStream_t h2d, cudaStream_t d2h) : device_(device), h2d_(h2d), d2h_(d2h) {}
  ~CudaDeviceTier() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(h2d_);
    cudaStreamSynchronize(d2h_);
    for (size_t i = 0; i < count_.load(); ++i) cudaFree(regions_[i].base);
    cudaStreamDestroy(h2d_);
    cudaStreamDestroy(d2h_);
    for (auto& [address, ev] : fences_) cudaEventDestroy(ev);
  }

  Tier tier() const override { return Tier::kDevice; }
  std::string Describe() const override { return "device(cuda:" + std::to_string(device_) + ")"; }

  StatusOr<uint64_t> Reserve(uint64_t bytes) override {
    MutexLock lock(&mu_);
    const size_t n = count_.load();
    if (n == kMaxRegions) return Status::ResourceExhausted("device(cuda): all regions used");
    cudaSetDevice(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
      return Status::ResourceExhausted("device(cuda): cudaMalloc of " + FormatBytes(bytes) + ": " + CudaError(e));
    regions_[n] = Region{static_cast<uint8_t*>(p), bytes};
    count_.store(n + 1);
    reserved_ += bytes;
    return RegionBase(n);
  }
  uint64_t reserved_bytes() const override { return reserved_.load(); }
  uint64_t allocations() const override { return count_.load(); }

  Status Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
               std::chrono::milliseconds timeout) override {
    uint8_t* p = Pointer(offset, len);
    if (p == nullptr) return OutOfRange(offset, len, what);
    return Copy(p, src, len, cudaMemcpyHostToDevice, h2d_, what, timeout);
  }
  Status Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
              std::chrono::milliseconds timeout) override {
    uint8_t* p = Pointer(offset, len);
    if (p == nullptr) return OutOfRange(offset, len, what);
    return Copy(dst, p, len, cudaMemcpyDeviceToHost, d2h_, what, timeout);
  }
  void* Address(uint64_t offset) override { return Pointer(offset, 0); }

  // The consumer computes on the legacy default stream (libtorch's default
  // CUDA stream): the slot's fence marks the work enqueued there so far, and
  // the next copy into or out of the slot waits for it on its own stream — no
  // host or device-wide sync. One event per slot, made at its first release.
  void ConsumerReleased(void* address) override {
    cudaSetDevice(device_);
    MutexLock lock(&fence_mu_);
    cudaEvent_t& ev = fences_[address];
    cudaError_t e = ev == nullptr ? cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) : cudaSuccess;
    if (e == cudaSuccess) e = cudaEventRecord(ev, cudaStreamLegacy);
    if (e != cudaSuccess) {
      cudaGetLastError();
      fence_failed_.store(true);  // copies then synchronise the compute stream instead
    }
  }

 private:
  struct Region {
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
  };

  uint8_t* Pointer(uint64_t offset, uint64_t len) const {
    const uint64_t r = RegionOf(offset);
    if (r >= count_.load()) return nullptr;
    const uint64_t off = RegionOffset(offset);
    if (off > regions_[r].bytes || len > regions_[r].bytes - off) return nullptr;
    return regions_[r].base + off;
  }

  Status OutOfRange(uint64_t offset, uint64_t len, const std::string& what) const {
    return Status::InvalidArgument("tensor " + what + ": " + Describe() + ": range at offset " +
                                   std::to_string(offset) + " (" + std::to_string(len) +
                                   " bytes) is outside the reserved regions");
  }

  // Enqueues the copy on `stream`, records an event and polls it until the deadline.
  Status Copy(void* dst, const void* src, uint64_t len, cudaMemcpyKind kind, cudaStream_t stream,
              const std::string& what, std::chrono::milliseconds timeout) {
    cudaSetDevice(device_);
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) return Status::Internal("tensor " + what + ": cudaEventCreate: " + CudaError(e));
    // Ordered after the compute that used the slot before it was released.
    const void* slot = kind == cudaMemcpyHostToDevice ? dst : src;
    if (fence_failed_.load()) {
      e = cudaStreamSynchronize(cudaStreamLegacy);
    } else {
      MutexLock lock(&fence_mu_);
      auto it = fences_.find(const_cast<void*>(slot));
      if (it != fences_.end()) e = cudaStreamWaitEvent(stream, it->second, 0);
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, len, kind, stream);
    if (e == cudaSuccess) e = cudaEventRecord(ev, stream);
    if (e != cudaSuccess) {
      cudaEventDestroy(ev);
      return Status::IoError("tensor " + what + ": " + Describe() + ": cudaMemcpyAsync: " + CudaError(e));
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      e = cudaEventQuery(ev);
      if (e != cudaErrorNotReady) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        cudaEventDestroy(ev);  // destroying a pending event is allowed; the copy keeps running
        return Status::Timeout("tensor " + what + ": " + Describe() + ": copy did not finish within " +
                               std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::yield();
    }
    cudaEventDestroy(ev);
    if (e != cudaSuccess)
      return Status::IoError("tensor " + what + ": " + Describe() + ": copy failed: " + CudaError(e));
    return Status::Ok();
  }

  const int device_;
  const cudaStream_t h2d_;
  const cudaStream_t d2h_;
  Mutex fence_mu_;
  std::unordered_map<void*, cudaEvent_t> fences_ GUARDED_BY(fence_mu_);  // per slot address
  std::atomic<bool> fence_failed_{false};
  Mutex mu_;  // serialises Reserve
  std::array<Region, kMaxRegions> regions_{};
  std::atomic<size_t> count_{0};
  std::atomic<uint64_t> reserved_{0};
};

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

HostPinner CudaHostPinner() {
  return [](void* base, uint64_t bytes) -> Status {
    cudaError_t e = cudaHostRegister(base, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess) return Status::Ok();
    cudaGetLastError();
    return Status::ResourceExhausted("cudaHostRegister of " + FormatBytes(bytes) + ": " + CudaError(e));
  };
}

StatusOr<std::unique_ptr<TierStore>> MakeDeviceTier(DeviceBackend backend, int device_index) {
  if (backend == DeviceBackend::kSimulatedHost) return MakeSimulatedDeviceTier();
  const int n = CudaDeviceCount();
  if (n == 0) return Status::Unavailable("device(cuda): no CUDA device found (cudaGetDeviceCount)");
  if (device_index < 0 || device_index >= n)
    return Status::InvalidArgument("device(cuda): device index " + std::to_string(device_index) +
                                   " out of range; " + std::to_string(n) + " device(s) present");
  cudaError_t e = cudaSetDevice(device_index);
  cudaStream_t h2d = nullptr, d2h = nullptr;
  // Non-blocking: the copy streams never serialise with the compute stream
  // implicitly; the fence orders them where needed.
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&h2d, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d2h, cudaStreamNonBlocking);
  if (e != cudaSuccess) return Status::Unavailable("device(cuda): creating copy streams: " + CudaError(e));
  return std::unique_ptr<TierStore>(new CudaDeviceTier(device_index, h2d, d2h));
}

#else  // !TENCACHE_HAVE_CUDA

int CudaDeviceCount() { return 0; }
HostPinner CudaHostPinner() { return {}; }

StatusOr<std::unique_ptr<TierStore>> MakeDeviceTier(DeviceBackend backend, int device_index) {
  if (backend == DeviceBackend::kSimulatedHost) return MakeSimulatedDeviceTier();
  return Status::Unavailable("device(cuda): tencache was built without the CUDA toolkit");
}

#endif

}  // namespace tencache
