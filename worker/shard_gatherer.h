// ShardGatherer: the collectives that turn this rank's shards into whole
// blocks and whole-block gradients back into this rank's shard, with the
// working buffers they use (allocated once, at construction).
//  - all-gather side (Gather): a block's parameters, whole, on the compute
//    device from this rank's acquired parameter shard. One rank on the
//    device tier's memory: the shard itself, computed on in place.
//  - reduce-scatter side (BlockGradient, ScatterGrad): the block's gradient
//    buffer on the compute device, and its sum over ranks reduced to this
//    rank's fp32 shard in host memory.
// Each collective of a training step is recorded (AccessRecorder) and its time
// counted on the collectives lane.
// Training thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "common/shard_bytes.h"
#include "common/step_lanes.h"
#include "common/status.h"
#include "worker/access_recorder.h"
#include "worker/communicator.h"
#include "worker/compute_device.h"
#include "worker/shard_store.h"

#include <torch/torch.h>

namespace tencache {

// A block's parameters for one access. When `flat` aliases the cache's slot
// itself (one rank) its storage's deleter holds the pin, so the slot cannot be
// reused while any tensor still views it.
struct Gathered {
  torch::Tensor flat;   // the whole block, padded, in the compute dtype
  double start_s = 0;   // when it was there (acquired and gathered): its compute starts
  double asked_s = 0;   // when the training thread asked for it (the wait lies between)
  double waited_s = 0;  // time in Acquire since the step's previous access, at asked_s
};

class ShardGatherer {
 public:
  // `cached_store`: the shards are a cache's (on a GPU: in device memory);
  // otherwise host memory. `host`: the host buffers' sizes
  // (WorkerHostBufferBytes). REQUIRES: comm, layout, recorder and lanes
  // outlive the gatherer.
  ShardGatherer(Communicator* comm, ComputeDevice device, const ShardLayout* layout, bool cached_store,
                torch::Dtype param_dtype, torch::Dtype compute_dtype, const WorkerHostBuffers& host,
                AccessRecorder* recorder, LaneBusy* lanes);

  // Elements of a whole block, padded to a multiple of the ranks.
  size_t padded(int block) const { return layout_->Padded(block, ranks_); }

  // The whole block into g->flat [padded(block)] from this rank's acquired
  // parameter shard `p`, in working buffer `slot` (0 or 1) where it is
  // copied; g->start_s is set once it is there. Consumes `p` (held by
  // g->flat's storage when computed on in place).
  Status Gather(int block, int slot, ShardRef p, Gathered* g);

  // The gradient buffer's first padded(block) elements, zeroed: the block's
  // gradient [padded(block)] on the compute device until the next call.
  torch::Tensor BlockGradient(int block);
  // This rank's fp32 gradient shard of the block, in host memory (summed over
  // ranks > 1), from the block gradient `d` (fp32, contiguous, on the compute
  // device). Valid until the next call. With ranks > 1 the shard lands in
  // `into` where given (counts[block] floats, apart from `d`: the optimizer
  // lane's buffer, so that the update need not copy it there), else in the
  // gatherer's own buffer; on one rank `into` is not used: the shard is `d`'s
  // own memory (on a GPU, its host staging).
  StatusOr<float*> ScatterGrad(int block, const torch::Tensor& d, float* into = nullptr);

  // Bytes of the host buffers it holds (WorkerHostBuffers' scatter, grad_staging).
  uint64_t scatter_bytes() const { return uint64_t(scatter_.capacity()) * sizeof(float); }
  uint64_t staging_bytes() const { return uint64_t(grad_host_.capacity()) * sizeof(float); }

 private:
  Status GatherInto(int block, int slot, ShardRef p, Gathered* g);

  Communicator* const comm_;
  const ComputeDevice device_;
  const ShardLayout* const layout_;
  const bool cached_store_;
  const torch::Dtype param_dtype_, compute_dtype_;
  AccessRecorder* const recorder_;
  LaneBusy* const lanes_;
  const int ranks_;
  std::vector<std::vector<float>> gathered_;  // two host working buffers (ranks > 1)
  std::vector<float> scatter_;               // reduce-scatter output, host
  std::vector<float> grad_host_;             // host staging for a GPU gradient on its way to AdamW
  // On a GPU: two working buffers in the parameter dtype and the
  // reduce-scatter output (NCCL).
  torch::Tensor work_[2];
  torch::Tensor scatter_dev_;
  // A whole block's gradient in the compute dtype on the compute device, the
  // largest block's size (the resource model's working set counts it).
  torch::Tensor grad_work_;
};

}  // namespace tencache
