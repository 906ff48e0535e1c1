// DeviceTier: the top tier, where tensors are computed on. Two backends behind
// TierStore:
//   kCuda           one cudaMalloc arena per region (the size-class pools carve
//                   it), host->device copies on an H2D stream and device->host
//                   copies on a D2H stream (both non-blocking: never implicitly
//                   serialised with compute), completion by an event polled
//                   against the caller's timeout — no device-wide sync. Compute
//                   runs on the legacy default stream (libtorch's default CUDA
//                   stream): when a consumer releases a slot
//                   (TierStore::ConsumerReleased) the tier records an event there
//                   for that slot, and the next copy into or out of the slot
//                   waits for it on the copy stream. A copy is complete when
//                   Write/Read returns, so compute enqueued after an Acquire
//                   sees its bytes. Compiled whenever the CUDA toolkit is found;
//                   Unavailable when no GPU is present.
//   kSimulatedHost  host memory standing in for a GPU on machines without one.
//                   It is named, reported and described as "device(simulated-host)"
//                   so no result can be mistaken for a GPU measurement.
// Thread safety: all methods are thread-safe.
#pragma once

#include <memory>

#include "cachemgr/host_tier.h"
#include "cachemgr/tier.h"

namespace tencache {

enum class DeviceBackend : uint8_t { kSimulatedHost, kCuda };
const char* DeviceBackendName(DeviceBackend backend);  // "simulated-host", "cuda"

// Creates the device tier. kCuda: Unavailable when built without CUDA or when
// cudaGetDeviceCount fails or reports no device.
StatusOr<std::unique_ptr<TierStore>> MakeDeviceTier(DeviceBackend backend, int device_index = 0);

// Number of CUDA devices usable by this process (0 when built without CUDA, or
// when the driver is missing).
int CudaDeviceCount();

// A HostPinner that page-locks with cudaHostRegister; empty when built without CUDA.
HostPinner CudaHostPinner();
// Host tier options whose memory is page-locked for the GPU (CudaHostPinner,
// described as "cudaHostRegister", required: a refused pin fails): what the host
// tier is when the device tier is CUDA.
HostTierOptions CudaPinnedHostTierOptions();

}  // namespace tencache
