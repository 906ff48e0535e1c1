#include "worker/nccl_communicator.h"

#include <string>
#include <vector>

#if TENCACHE_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace tencache {

#if TENCACHE_HAVE_NCCL
namespace {

Status NcclCheck(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return Status::Ok();
  return Status::Internal(std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}
Status CudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Internal(std::string("NCCL communicator: ") + what + ": " + cudaGetErrorString(e));
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Communicator* host, int device, ncclComm_t comm, cudaStream_t stream, cudaEvent_t before,
                   cudaEvent_t after)
      : host_(host), device_(device), comm_(comm), stream_(stream), before_(before), after_(after) {}
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(before_);
    cudaEventDestroy(after_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string Describe() const override {
    return "nccl (" + std::to_string(size()) + " ranks, GPU " + std::to_string(device_) + "; host collectives over " +
           host_->Describe() + ")";
  }
  bool device_buffers() const override { return true; }

  Status AllGather(const void* in, void* out, size_t bytes) override {
    TC_RETURN_IF_ERROR(Begin());
    TC_RETURN_IF_ERROR(NcclCheck(ncclAllGather(in, out, bytes, ncclUint8, comm_, stream_), "all-gather"));
    return End();
  }
  Status ReduceScatterSum(const float* in, float* out, size_t count) override {
    TC_RETURN_IF_ERROR(Begin());
    TC_RETURN_IF_ERROR(
        NcclCheck(ncclReduceScatter(in, out, count, ncclFloat, ncclSum, comm_, stream_), "reduce-scatter"));
    return End();
  }
  Status AllReduceSum(double* data, size_t count) override { return host_->AllReduceSum(data, count); }
  Status Barrier() override { return host_->Barrier(); }

 private:
  // The collective's stream waits for the compute enqueued so far.
  Status Begin() {
    TC_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(device_), "cudaSetDevice"));
    TC_RETURN_IF_ERROR(CudaCheck(cudaEventRecord(before_, cudaStreamLegacy), "cudaEventRecord"));
    return CudaCheck(cudaStreamWaitEvent(stream_, before_, 0), "cudaStreamWaitEvent");
  }
  // Compute enqueued from now on waits for the collective.
  Status End() {
    TC_RETURN_IF_ERROR(CudaCheck(cudaEventRecord(after_, stream_), "cudaEventRecord"));
    return CudaCheck(cudaStreamWaitEvent(cudaStreamLegacy, after_, 0), "cudaStreamWaitEvent");
  }

  Communicator* const host_;
  const int device_;
  const ncclComm_t comm_;
  const cudaStream_t stream_;
  const cudaEvent_t before_, after_;
};

}  // namespace

bool NcclBuilt() { return true; }

StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(Communicator* host, const ComputeDevice& device) {
  if (!device.cuda()) return Status::Unavailable("NCCL communicator: the rank computes on the CPU");
  ncclUniqueId id;
  if (host->rank() == 0) TC_RETURN_IF_ERROR(NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  std::vector<ncclUniqueId> all(host->size());
  TC_RETURN_IF_ERROR(host->AllGather(&id, all.data(), sizeof id));
  id = all[0];
  TC_RETURN_IF_ERROR(CudaCheck(cudaSetDevice(device.index()), "cudaSetDevice"));
  ncclComm_t comm;
  TC_RETURN_IF_ERROR(NcclCheck(ncclCommInitRank(&comm, host->size(), id, host->rank()), "ncclCommInitRank"));
  cudaStream_t stream = nullptr;
  cudaEvent_t before = nullptr, after = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&before, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&after, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    ncclCommDestroy(comm);
    return CudaCheck(e, "creating the collective stream");
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(host, device.index(), comm, stream, before, after));
}

#else  // !TENCACHE_HAVE_NCCL

bool NcclBuilt() { return false; }

StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(Communicator*, const ComputeDevice&) {
  return Status::Unavailable("NCCL communicator: this build has no NCCL (configure with the CUDA toolkit's NCCL, or "
                             "-DNCCL_ROOT=DIR)");
}

#endif

}  // namespace tencache
