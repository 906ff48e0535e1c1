// TierStore: the one small interface every tier backend implements — simulated
// and CUDA device memory, pinned host memory, and the NVMe file. A store owns
// address space reserved in a few large regions (normally one, at setup) and
// copies bytes between caller-owned host memory and itself. It knows nothing of
// tensors, slots or eviction; the SizeClassPool carves its regions and the
// TensorCache decides what lives where.
//
// Offsets: Reserve() returns the base offset of a new region; valid offsets are
// [base, base + bytes) of a reserved region. Host buffers passed to the NVMe
// store must be aligned to kDirectIoAlignment (the host tier's slots are).
//
// Thread safety: all methods may be called from any thread concurrently;
// concurrent copies must not overlap in the store (the cache guarantees this).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cachemgr/types.h"
#include "common/status.h"

namespace tencache {

// Offsets carry the region index in their top bits, so growing a store never
// moves existing data.
constexpr int kRegionShift = 48;
inline uint64_t RegionBase(uint64_t region) { return region << kRegionShift; }
inline uint64_t RegionOf(uint64_t offset) { return offset >> kRegionShift; }
inline uint64_t RegionOffset(uint64_t offset) { return offset & ((uint64_t{1} << kRegionShift) - 1); }

class TierStore {
 public:
  virtual ~TierStore() = default;

  virtual Tier tier() const = 0;
  // What the store is and any fallback it took, e.g. "device(simulated-host)",
  // "host(pinned: mlock)", "host(unpinned: mlock: Cannot allocate memory)",
  // "nvme(io_uring, /scratch/rank-0.tcnvme)".
  virtual std::string Describe() const = 0;

  // Allocates a region of `bytes` and returns its base offset. Each call is one
  // allocation (allocations() counts them). ResourceExhausted when the backend
  // cannot grow.
  virtual StatusOr<uint64_t> Reserve(uint64_t bytes) = 0;
  virtual uint64_t reserved_bytes() const = 0;
  virtual uint64_t allocations() const = 0;

  // Copy `len` bytes from host memory `src` into the store at `offset` / from the
  // store into `dst`. `what` names the tensor in error messages. Blocks at most
  // `timeout`; a Timeout leaves the copy running, so the caller must not reuse the
  // memory until a later call on the same range succeeds or the store is destroyed.
  virtual Status Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
                       std::chrono::milliseconds timeout) = 0;
  virtual Status Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
                      std::chrono::milliseconds timeout) = 0;

  // Where a consumer finds the bytes at `offset`: a device pointer for the device
  // tier, a host pointer for the host tier, nullptr for NVMe (not addressable).
  virtual void* Address(uint64_t offset) = 0;

  // Called when a consumer's handle on the bytes at `address` (what Address()
  // gave for the slot) is released, before the slot can be reused.
  // GUARANTEES (CUDA device tier): every later copy into or out of that slot is
  // ordered after the compute work enqueued before this call, so a slot is never
  // overwritten or read back under a kernel still using it. Default: nothing to
  // order (host memory is used synchronously).
  virtual void ConsumerReleased(void* address) {}
};

}  // namespace tencache
