#include "worker/compute_device.h"

#include <dlfcn.h>

#include <algorithm>
#include <thread>

#include "cachemgr/device_tier.h"

#if TENCACHE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tencache {

std::string ComputeDevice::Describe() const {
  if (!cuda()) return "cpu";
  std::string out = "cuda:" + std::to_string(index());
#if TENCACHE_HAVE_CUDA
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, index()) == cudaSuccess) out += std::string(" (") + prop.name + ")";
#endif
  return out;
}

StatusOr<ComputeDevice> SelectComputeDevice(const std::string& choice, int local_rank) {
  if (choice != "auto" && choice != "cuda" && choice != "cpu") {
    return Status::InvalidArgument("--device: expected auto, cuda or cpu, got '" + choice + "'");
  }
  ComputeDevice d;
  if (choice == "cpu") return d;
  std::string why;
  const int gpus = CudaDeviceCount();
  if (!TENCACHE_HAVE_CUDA) {
    why = "this build has no CUDA (configure with -DTENCACHE_CUDA=ON where the CUDA toolkit is installed)";
  } else if (gpus == 0) {
    why = "no CUDA device is visible (cudaGetDeviceCount)";
  } else if (!torch::cuda::is_available()) {
    why = "the libtorch this worker is linked with has no CUDA support (Debian's libtorch is CPU-only; build "
          "against a CUDA libtorch, e.g. scripts/gpu-check uses python3's torch)";
  }
  if (!why.empty()) {
    if (choice == "cuda") return Status::Unavailable("--device cuda: " + why);
    return d;  // auto: the CPU
  }
  d.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  return d;
}

int ComputeThreadsPerRank(int local_ranks) {
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_ranks));
}

int SetComputeThreads(int n) {
  torch::set_num_threads(n);
  // Looked up at run time: libtorch's BLAS is chosen by the system (Debian's
  // alternatives), and another may have no such call.
  using SetThreads = void (*)(int);
  using GetThreads = int (*)();
  auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (set == nullptr || get == nullptr) return 0;
  set(n);
  return get();
}

Status UseDevice(const ComputeDevice& d) {
  if (!d.cuda()) return Status::Ok();
#if TENCACHE_HAVE_CUDA
  const cudaError_t e = cudaSetDevice(d.index());
  if (e != cudaSuccess) {
    return Status::Unavailable("cudaSetDevice(" + std::to_string(d.index()) + "): " + cudaGetErrorString(e));
  }
#endif
  return Status::Ok();
}

void SyncCompute(const ComputeDevice& d) {
#if TENCACHE_HAVE_CUDA
  if (d.cuda()) cudaStreamSynchronize(cudaStreamLegacy);
#endif
}

torch::Dtype ParamDtypeFor(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return torch::kBFloat16;
    case DType::kFp16: return torch::kHalf;
    case DType::kFp32: return torch::kFloat32;
  }
  return torch::kFloat32;
}

torch::Dtype ComputeDtypeFor(DType dtype, const ComputeDevice& d) {
  if (dtype == DType::kFp16 && !d.cuda()) return torch::kFloat32;
  return ParamDtypeFor(dtype);
}

const char* TorchDtypeName(torch::Dtype dtype) {
  if (dtype == torch::kBFloat16) return "bf16";
  if (dtype == torch::kHalf) return "fp16";
  return "fp32";
}

}  // namespace tencache
