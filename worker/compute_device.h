// ComputeDevice: where a rank's model computes — the CPU, or one CUDA GPU with
// the cache's device tier in that GPU's memory. Chosen once per rank at start.
//
// On a GPU, compute runs on libtorch's default CUDA stream (the legacy default
// stream); the device tier's copies run on their own non-blocking streams and
// are ordered against compute with events (cachemgr/device_tier.h), and the
// NCCL communicator orders its stream the same way (nccl_communicator.h).
#pragma once

#include <string>

#include <torch/torch.h>

#include "common/model_shape.h"
#include "common/status.h"

namespace tencache {

struct ComputeDevice {
  torch::Device device = torch::kCPU;
  // The rank's share of its machine's CPU cores (ComputeThreadsPerRank of the
  // ranks on that machine): the optimizer's threads and the lane's cores are
  // counted in it. 0: the machine's cores over every rank of the run, as when
  // they all run on this machine.
  int cores = 0;
  bool cuda() const { return device.is_cuda(); }
  int index() const { return device.has_index() ? device.index() : 0; }
  std::string Describe() const;  // "cpu", "cuda:0 (NVIDIA H200)"
};

// `choice`: "auto" (a GPU when this build, libtorch and the machine all have
// CUDA, else the CPU), "cuda" or "cpu". A rank takes GPU `local_rank` modulo the
// GPUs present. InvalidArgument for another word; Unavailable for "cuda" where
// it cannot run, with the reason (no CUDA in this build, a CPU-only libtorch,
// or no GPU).
StatusOr<ComputeDevice> SelectComputeDevice(const std::string& choice, int local_rank);

// The dtype a job's parameter shards are stored and moved in (bf16 and fp16:
// mixed precision, with fp32 masters; fp32), and the dtype its model computes
// in on `d`: the parameters' own, except fp16 on a CPU, where libtorch has no
// fp16 kernels (addmm, layer_norm, softmax), so an fp16 job computes in fp32 from
// its fp16-rounded weights there (its loss scaling still runs as on a GPU).
torch::Dtype ParamDtypeFor(DType dtype);
torch::Dtype ComputeDtypeFor(DType dtype, const ComputeDevice& d);
// "bf16", "fp16", "fp32".
const char* TorchDtypeName(torch::Dtype dtype);

// The torch compute threads of a rank when `local_ranks` ranks share this
// machine's cores: its share, at least one (oversubscribed BLAS threads spin
// against each other and can slow a step tenfold). Not torch's default, its
// count of physical cores, which differs between machines of the same shape
// (1 on a 2-vCPU machine whose two cores it takes for one).
int ComputeThreadsPerRank(int local_ranks);

// Makes this process compute on `n` threads: libtorch's intra-op threads and,
// where libtorch's BLAS is OpenBLAS (Debian's libtorch: every fp32 matrix
// product), OpenBLAS's own pool too, which otherwise keeps one thread per core
// whatever torch's setting, spinning against torch's threads and other ranks'.
// Returns the OpenBLAS threads now set, 0 where no OpenBLAS is loaded.
// REQUIRES: n >= 1; no compute running.
int SetComputeThreads(int n);

// Makes `d` the calling thread's current device (cudaSetDevice); no-op on CPU.
Status UseDevice(const ComputeDevice& d);

// Waits until the compute stream's work so far has run (cudaStreamSynchronize
// of that one stream, not the device); no-op on CPU. The profiled step calls it
// at the end of each access so that the profile holds GPU times, not the time
// to enqueue.
void SyncCompute(const ComputeDevice& d);

}  // namespace tencache
