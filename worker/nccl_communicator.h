// NcclCommunicator: the Communicator on GPUs. AllGather and ReduceScatterSum
// take device memory (device_buffers() is true) and run as NCCL collectives on
// the communicator's own CUDA stream: the stream first waits for the compute
// stream's work so far (an event), and the compute stream then waits for the
// collective (another event), so the call returns as soon as the work is
// enqueued and compute that follows sees the result, with no host wait.
// AllReduceSum and Barrier (host memory: the loss, the metrics) go to the host
// communicator the NCCL group was bootstrapped over (MPI in the worker).
// Counts are size_t, as NCCL's are. One thread per rank.
#pragma once

#include <memory>

#include "common/status.h"
#include "worker/communicator.h"
#include "worker/compute_device.h"

namespace tencache {

// True when this build has NCCL (TENCACHE_HAVE_NCCL).
bool NcclBuilt();

// Creates the NCCL group of `host`'s ranks, this rank on `device`: rank 0
// makes the unique id and every rank takes it through host->AllGather.
// Collective over `host`. Unavailable without NCCL in the build or for a CPU
// device; Internal with NCCL's message when ncclCommInitRank fails.
// REQUIRES: `host` outlives the result; device.cuda().
StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(Communicator* host, const ComputeDevice& device);

}  // namespace tencache
