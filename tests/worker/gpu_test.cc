// The GPU path: choosing the compute device, the NCCL communicator, and the
// trainer computing on a GPU with the device tier in GPU memory. The tests that
// need a GPU skip with a message without one (and with Debian's CPU-only
// libtorch); `ctest -L gpu` selects this binary on the GPU machine
// (scripts/gpu-check). The refusals and the thread setting run everywhere.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

#include "cachemgr/device_tier.h"
#include "common/job_spec.h"
#include "worker/communicator.h"
#include "worker/compute_device.h"
#include "worker/nccl_communicator.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

const char kCorpus[] = "/usr/share/common-licenses/GPL-3";

bool GpuUsable() { return CudaDeviceCount() > 0 && torch::cuda::is_available(); }
#define REQUIRE_GPU() \
  if (!GpuUsable()) GTEST_SKIP() << "needs a GPU and a CUDA libtorch (" << CudaDeviceCount() << " CUDA device(s))"

JobSpec SmallJob(const std::string& policy, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"cache.policy=" + policy,
                                   "cache.nvme_path=" + (fs::temp_directory_path() /
                                                         ("tencache_gpu_test_" + std::to_string(::getpid()))).string()};
  sets.insert(sets.end(), extra.begin(), extra.end());
  const std::string text =
      std::string("name: g\nmodel: {preset: tiny, layers: 2, hidden: 64, heads: 4, ffn_hidden: 256, seq_len: 32, "
                  "dtype: fp32}\ntrain: {data: ") + kCorpus + ", micro_batch: 2, global_batch: 8, lr: 3.0e-3, seed: 5}\n";
  StatusOr<JobSpec> job = ParseJobText(text, "gpu_test.yaml", sets);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return *job;
}

std::shared_ptr<const TokenCorpus> Corpus() {
  static std::shared_ptr<const TokenCorpus> corpus = *TokenCorpus::Open(kCorpus);
  return corpus;
}

std::vector<StepMetrics> Train(const JobSpec& job, Communicator* comm, ComputeDevice device, int steps) {
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comm, Corpus(), [](const std::string&) {}, device);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  std::vector<StepMetrics> out;
  for (int s = 0; t.ok() && s < steps; ++s) {
    StatusOr<StepMetrics> m = (*t)->Step();
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) break;
    out.push_back(*m);
  }
  return out;
}

ComputeDevice Gpu() { return *SelectComputeDevice("cuda", 0); }

TEST(ComputeDevice, CudaIsRefusedWithTheReasonWhereItCannotRun) {
  StatusOr<ComputeDevice> d = SelectComputeDevice("cuda", 0);
  StatusOr<ComputeDevice> a = SelectComputeDevice("auto", 0);
  ASSERT_TRUE(a.ok());
  if (GpuUsable()) {
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(d->cuda());
    EXPECT_TRUE(a->cuda());
    EXPECT_EQ(d->Describe().rfind("cuda:0", 0), 0u) << d->Describe();
    return;
  }
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  // The reason: no CUDA in the build, no device, or a CPU-only libtorch.
  EXPECT_NE(d.status().message().find("--device cuda: "), std::string::npos) << d.status().message();
  EXPECT_FALSE(a->cuda());
  EXPECT_EQ(a->Describe(), "cpu");
}

TEST(ComputeDevice, AnotherWordIsInvalidArgument) {
  StatusOr<ComputeDevice> d = SelectComputeDevice("gpu", 0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("expected auto, cuda or cpu, got 'gpu'"), std::string::npos);
}

// OpenBLAS (Debian's libtorch's fp32 products) keeps its own pool, one thread
// per core, unless told: the worker's thread count must reach it.
TEST(ComputeDevice, SetComputeThreadsReachesTorchAndOpenBlas) {
  const int before = torch::get_num_threads();
  const bool openblas = dlsym(RTLD_DEFAULT, "openblas_get_num_threads") != nullptr;
  EXPECT_EQ(SetComputeThreads(1), openblas ? 1 : 0);
  EXPECT_EQ(torch::get_num_threads(), 1);
  if (openblas) {
    auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    EXPECT_EQ(get(), 1);
    const int two = std::min(2, int(std::thread::hardware_concurrency()));
    EXPECT_EQ(SetComputeThreads(two), two);
    EXPECT_EQ(get(), two);
  }
  SetComputeThreads(before);
}

TEST(Nccl, RefusesACpuRankAndTheTrainerRefusesDeviceBuffersOnTheCpu) {
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  StatusOr<std::unique_ptr<Communicator>> nccl = MakeNcclCommunicator(solo.get(), ComputeDevice{});
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), StatusCode::kUnavailable);
}

TEST(Nccl, OneRankGathersAndReducesDeviceBuffers) {
  REQUIRE_GPU();
  ASSERT_TRUE(NcclBuilt()) << "a GPU build without NCCL";
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  StatusOr<std::unique_ptr<Communicator>> nccl = MakeNcclCommunicator(solo.get(), Gpu());
  ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
  ASSERT_TRUE((*nccl)->device_buffers());
  auto on_gpu = torch::TensorOptions().device(Gpu().device);
  torch::Tensor in = torch::arange(1000, on_gpu.dtype(torch::kFloat32));
  torch::Tensor out = torch::zeros({1000}, on_gpu.dtype(torch::kFloat32));
  ASSERT_TRUE((*nccl)->AllGather(in.data_ptr(), out.data_ptr(), 1000 * sizeof(float)).ok());
  EXPECT_TRUE(torch::equal(in, out));  // compute-stream work after the call sees the result
  out.zero_();
  ASSERT_TRUE((*nccl)->ReduceScatterSum(in.data_ptr<float>(), out.data_ptr<float>(), 1000).ok());
  EXPECT_TRUE(torch::equal(in, out));
}

TEST(GpuTrainer, CachedRunOnTheGpuMatchesTheHostReference) {
  REQUIRE_GPU();
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  // The reference keeps every shard in host memory and copies it to the GPU at
  // each use; the cached run keeps 320 KiB of parameters in GPU memory, the rest
  // on the pinned host and NVMe.
  std::vector<StepMetrics> ref = Train(SmallJob("none"), solo.get(), Gpu(), 12);
  std::vector<StepMetrics> cached =
      Train(SmallJob("tencache", {"cache.device_budget=320KiB", "cache.host_budget=1MiB"}), solo.get(), Gpu(), 12);
  ASSERT_EQ(ref.size(), 12u);
  ASSERT_EQ(cached.size(), 12u);
  double h2d = 0;
  for (int s = 0; s < 12; ++s) {
    EXPECT_NEAR(cached[s].loss, ref[s].loss, 1e-5 * ref[s].loss) << "step " << s;
    EXPECT_LE(cached[s].device_used_bytes, 320.0 * 1024) << "step " << s;
    if (s >= 2) h2d += cached[s].bytes[Link::kH2D];
  }
  EXPECT_GT(h2d, 0) << "the budget forces parameter fetches to the GPU";
  EXPECT_LT(cached.back().loss, cached.front().loss);
}

TEST(GpuTrainer, GpuLossesFollowTheCpu) {
  REQUIRE_GPU();
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  const JobSpec job = SmallJob("tencache", {"cache.device_budget=320KiB"});
  std::vector<StepMetrics> cpu = Train(job, solo.get(), ComputeDevice{}, 10);
  std::vector<StepMetrics> gpu = Train(job, solo.get(), Gpu(), 10);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t s = 0; s < cpu.size(); ++s) EXPECT_NEAR(gpu[s].loss, cpu[s].loss, 1e-3 * cpu[s].loss) << "step " << s;
}

TEST(GpuTrainer, TwoRanksOnOneGpuOverHostCollectivesMatchOneRank) {
  REQUIRE_GPU();
  const JobSpec job = SmallJob("tencache", {"cache.device_budget=320KiB"});
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  std::vector<StepMetrics> one = Train(job, solo.get(), Gpu(), 8);
  auto comms = MakeThreadCommunicators(2, 120000);
  std::vector<StepMetrics> per_rank[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { per_rank[r] = Train(job, comms[r].get(), Gpu(), 8); });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(per_rank[0].size(), one.size());
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_NEAR(per_rank[0][s].loss, one[s].loss, 1e-4 * one[s].loss) << "step " << s;
  }
}

TEST(GpuTrainer, MixedPrecisionLearnsOnTheGpu) {
  REQUIRE_GPU();
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  std::vector<StepMetrics> m =
      Train(SmallJob("tencache", {"model.dtype=bf16", "cache.device_budget=160KiB"}), solo.get(), Gpu(), 30);
  ASSERT_EQ(m.size(), 30u);
  EXPECT_EQ(m[0].compute_dtype, "bf16");
  EXPECT_LT(m.back().loss, m.front().loss - 0.5);
  EXPECT_EQ(m.back().allocations_after_warmup, 0);
}

}  // namespace
}  // namespace tencache
