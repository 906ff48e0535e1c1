#include "worker/shard_gatherer.h"

#include <algorithm>
#include <memory>

#include "common/clock.h"
#include "worker/lane_timer.h"

namespace tencache {

ShardGatherer::ShardGatherer(Communicator* comm, ComputeDevice device, const ShardLayout* layout, bool cached_store,
                             torch::Dtype param_dtype, torch::Dtype compute_dtype, const WorkerHostBuffers& host,
                             AccessRecorder* recorder, LaneBusy* lanes)
    : comm_(comm),
      device_(device),
      layout_(layout),
      cached_store_(cached_store),
      param_dtype_(param_dtype),
      compute_dtype_(compute_dtype),
      recorder_(recorder),
      lanes_(lanes),
      ranks_(comm->size()) {
  size_t largest = 0;
  for (int b = 0; b < int(layout_->num_blocks()); ++b) largest = std::max(largest, padded(b));
  if (ranks_ > 1 && !comm_->device_buffers()) {  // working buffers in the parameter dtype (bf16: half the floats)
    const size_t floats = (largest * layout_->ElementBytes(ShardKind::kParam) + sizeof(float) - 1) / sizeof(float);
    gathered_.assign(2, std::vector<float>(floats, 0.0f));
  }
  auto floats = [](uint64_t bytes) { return size_t(bytes / sizeof(float)); };
  scatter_.assign(floats(host.scatter), 0.0f);
  grad_host_.assign(floats(host.grad_staging), 0.0f);
  if (device_.cuda()) {
    const auto on_gpu = torch::TensorOptions().device(device_.device);
    for (torch::Tensor& w : work_) w = torch::zeros({int64_t(largest)}, on_gpu.dtype(param_dtype_));
    if (comm_->device_buffers()) {
      scatter_dev_ = torch::zeros({int64_t(largest / ranks_ + 1)}, on_gpu.dtype(torch::kFloat32));
    }
  }
  grad_work_ = torch::zeros({int64_t(largest)}, torch::TensorOptions().dtype(compute_dtype_).device(device_.device));
}

Status ShardGatherer::Gather(int block, int slot, ShardRef p, Gathered* g) {
  const bool in_device_memory = cached_store_ || !device_.cuda();
  if (ranks_ == 1 && in_device_memory) {  // the shard is the block: compute on it in place
    auto pin = std::make_shared<ShardRef>(std::move(p));  // released with the tensor's storage
    g->flat = torch::from_blob(pin->data(), {int64_t(padded(block))}, [pin](void*) {},
                               torch::TensorOptions().dtype(param_dtype_).device(device_.device));
  } else {
    TC_RETURN_IF_ERROR(GatherInto(block, slot, std::move(p), g));
  }
  g->start_s = MonotonicSeconds();
  if (param_dtype_ != compute_dtype_) g->flat = g->flat.to(compute_dtype_);  // fp16 on a CPU
  return Status::Ok();
}

// Where the shard `p` is: the device tier's memory (a cached store on a GPU,
// or any store on the CPU) or host memory (the reference store on a GPU).
Status ShardGatherer::GatherInto(int block, int slot, ShardRef p, Gathered* g) {
  const int64_t n = int64_t(padded(block)), count = int64_t(layout_->counts[block]);
  const size_t elem = layout_->ElementBytes(ShardKind::kParam);
  const bool on_gpu = device_.cuda() && cached_store_;
  const auto host = torch::TensorOptions().dtype(param_dtype_);
  torch::Tensor shard = torch::from_blob(p.data(), {count}, on_gpu ? host.device(device_.device) : host);
  const double t0 = MonotonicSeconds();
  if (comm_->device_buffers()) {  // NCCL: all-gather on the GPU, in place from this rank's part
    torch::Tensor mine = work_[slot].narrow(0, comm_->rank() * count, count);
    if (shard.data_ptr() != mine.data_ptr()) mine.copy_(shard);
    LaneTimer busy(lanes_, StepLane::kCollectives);
    TC_RETURN_IF_ERROR(comm_->AllGather(mine.data_ptr(), work_[slot].data_ptr(), size_t(count) * elem));
    g->flat = work_[slot].narrow(0, 0, n);
  } else {
    torch::Tensor whole;
    if (ranks_ > 1) {  // over host memory
      whole = torch::from_blob(gathered_[slot].data(), {n}, host);
      torch::Tensor mine = whole.narrow(0, comm_->rank() * count, count);
      mine.copy_(shard);  // a copy from the GPU waits for it
      LaneTimer busy(lanes_, StepLane::kCollectives);
      TC_RETURN_IF_ERROR(comm_->AllGather(mine.data_ptr(), whole.data_ptr(), size_t(count) * elem));
    } else {
      whole = shard;  // one rank, host shard, GPU compute
    }
    g->flat = device_.cuda() ? work_[slot].narrow(0, 0, n).copy_(whole) : whole;
  }
  if (ranks_ > 1) {
    recorder_->RecordCollective(CollectiveKind::kAllGather, block, uint64_t(n) * elem * (ranks_ - 1) / ranks_, t0);
  }
  return Status::Ok();  // `p` is released here: the tier fences the compute enqueued so far
}

torch::Tensor ShardGatherer::BlockGradient(int block) {
  return grad_work_.narrow(0, 0, int64_t(padded(block))).zero_();
}

StatusOr<float*> ShardGatherer::ScatterGrad(int block, const torch::Tensor& d, float* into) {
  const size_t n = layout_->counts[block];
  float* src = d.data_ptr<float>();
  if (device_.cuda() && !comm_->device_buffers()) {  // to host memory first: MPI and AdamW take it there
    torch::from_blob(grad_host_.data(), {d.numel()}, torch::kFloat32).copy_(d);
    src = grad_host_.data();
  }
  if (ranks_ > 1) {
    const double t0 = MonotonicSeconds();
    float* const host = into != nullptr ? into : scatter_.data();
    float* out = comm_->device_buffers() ? scatter_dev_.data_ptr<float>() : host;
    {
      LaneTimer busy(lanes_, StepLane::kCollectives);
      TC_RETURN_IF_ERROR(comm_->ReduceScatterSum(src, out, n));
    }
    recorder_->RecordCollective(CollectiveKind::kReduceScatter, block, n * sizeof(float) * (ranks_ - 1), t0);
    if (comm_->device_buffers()) {
      torch::from_blob(host, {int64_t(n)}, torch::kFloat32).copy_(scatter_dev_.narrow(0, 0, int64_t(n)));
    }
    src = host;
  }
  return src;
}

}  // namespace tencache
