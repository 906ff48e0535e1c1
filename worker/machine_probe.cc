#include "worker/machine_probe.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "worker/adamw.h"
#include "worker/gpt_model.h"

namespace tencache {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `repeats` runs of `fn` after one warm-up run.
double MedianSeconds(int repeats, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = Now();
    fn();
    t.push_back(Now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A block's flat parameters in the compute dtype, initialised as training does.
torch::Tensor BlockParams(const GptModel& model, int block, torch::Dtype dtype) {
  std::vector<float> init(size_t(model.layout(block).numel));
  model.InitBlock(block, 1, init.data());
  return torch::from_blob(init.data(), {int64_t(init.size())}, torch::kFloat32).to(dtype).clone();
}

// One micro-batch through each kind of block, as Trainer::MicroStep runs them.
Status ProbeCompute(const JobSpec& job, torch::Dtype dtype, ProbeResult* r) {
  GptModel model(job.model);
  const int64_t B = job.train.micro_batch, T = job.model.seq_len, C = job.model.hidden;
  const int last = job.model.layers + 1;
  torch::manual_seed(1);
  torch::Tensor tokens = torch::randint(0, job.model.vocab, {B, T}, torch::kLong);
  torch::Tensor targets = torch::randint(0, job.model.vocab, {B, T}, torch::kLong);
  torch::Tensor embed = BlockParams(model, 0, dtype), layer = BlockParams(model, 1, dtype);
  torch::Tensor head = BlockParams(model, last, dtype);
  torch::Tensor x = (torch::randn({B, T, C}) * 0.5).to(dtype);
  const int repeats = 5;
  r->embed_s = MedianSeconds(repeats, [&] {
    { torch::NoGradGuard g; model.Embed(embed, tokens); }
    torch::Tensor flat = embed.detach().requires_grad_(true);
    torch::Tensor out = model.Embed(flat, tokens);
    torch::autograd::grad({out}, {flat}, {torch::ones_like(out)});
  });
  r->layer_s = MedianSeconds(repeats, [&] {
    { torch::NoGradGuard g; model.Layer(1, layer, x); }
    torch::Tensor flat = layer.detach().requires_grad_(true), in = x.detach().requires_grad_(true);
    torch::Tensor out = model.Layer(1, flat, in);
    torch::autograd::grad({out}, {in, flat}, {torch::ones_like(out)});
  });
  r->head_s = MedianSeconds(repeats, [&] {
    torch::Tensor fl = head.detach().requires_grad_(true), f0 = embed.detach().requires_grad_(true);
    torch::Tensor in = x.detach().requires_grad_(true);
    torch::Tensor loss = model.HeadLoss(fl, f0, in, targets);
    torch::autograd::grad({loss}, {in, fl, f0});
  });
  torch::Tensor a = torch::randn({B * T, C}).to(dtype), w = torch::randn({C, job.model.ffn_hidden}).to(dtype);
  const double flops = 2.0 * double(B * T) * C * job.model.ffn_hidden;
  r->matmul_tflops = flops / MedianSeconds(repeats, [&] { torch::mm(a, w); }) / 1e12;
  torch::Tensor a32 = a.to(torch::kFloat32), w32 = w.to(torch::kFloat32);
  r->matmul_fp32_tflops = flops / MedianSeconds(repeats, [&] { torch::mm(a32, w32); }) / 1e12;
  return Status::Ok();
}

// AdamW and memcpy over the largest shard this rank will hold.
void ProbeMemory(const JobSpec& job, int ranks, int threads, ProbeResult* r) {
  GptModel model(job.model);
  size_t largest = 0;
  for (int b = 0; b < model.num_blocks(); ++b) largest = std::max(largest, size_t(model.layout(b).numel));
  const size_t n = std::max<size_t>((largest + ranks - 1) / ranks, 1 << 16);
  std::vector<float> p(n, 0.1f), g(n, 0.01f), m(n, 0.0f), v(n, 0.0f), dst(n);
  AdamWConfig config;
  int64_t step = 0;
  const double adam_s = MedianSeconds(5, [&] { AdamWStep(config, ++step, n, p.data(), g.data(), m.data(), v.data(), threads); });
  r->adamw_params_per_s = double(n) / adam_s;
  const double copy_s = MedianSeconds(5, [&] { std::memcpy(dst.data(), p.data(), n * sizeof(float)); });
  r->copy_gbps = double(n * sizeof(float)) / copy_s / 1e9;
}

// Bus bandwidth (bytes x (R-1)/R per second) of the run's largest gather and
// reduce-scatter, and the latency of a tiny all-gather.
Status ProbeCollectives(const JobSpec& job, Communicator* comm, ProbeResult* r, bool mixed) {
  const int R = comm->size();
  if (R == 1) return Status::Ok();
  GptModel model(job.model);
  size_t largest = 0;
  for (int b = 0; b < model.num_blocks(); ++b) largest = std::max(largest, size_t(model.layout(b).numel));
  const size_t shard = (largest + R - 1) / R, elem = mixed ? 2 : 4;
  std::vector<float> in(shard * R, 1.0f), out(shard * R);
  Status st;
  auto measure = [&](const std::function<Status()>& op, double* seconds) -> Status {
    TC_RETURN_IF_ERROR(comm->Barrier());
    *seconds = MedianSeconds(5, [&] { if (st.ok()) st = op(); });
    return st;
  };
  double ag = 0, rs = 0, tiny = 0;
  TC_RETURN_IF_ERROR(measure([&] { return comm->AllGather(in.data(), out.data(), shard * elem); }, &ag));
  TC_RETURN_IF_ERROR(measure([&] { return comm->ReduceScatterSum(in.data(), out.data(), shard); }, &rs));
  TC_RETURN_IF_ERROR(measure([&] { return comm->AllGather(in.data(), out.data(), 4); }, &tiny));
  const double share = double(R - 1) / R;
  r->allgather_gbps = double(shard * elem * R) * share / ag / 1e9;
  r->reduce_scatter_gbps = double(shard * sizeof(float) * R) * share / rs / 1e9;
  r->collective_latency_s = tiny;
  return Status::Ok();
}

}  // namespace

StatusOr<ProbeResult> ProbeMachine(const JobSpec& job, Communicator* comm, int threads) {
  if (job.train.micro_batch <= 0) {
    return Status::InvalidArgument(job.Where("train.micro_batch") + ": the probe needs a resolved micro-batch");
  }
  TC_RETURN_IF_ERROR(CheckWorkerSupports(job.model));
  const bool mixed = job.dtype == DType::kBf16;
  ProbeResult r;
  r.dtype = mixed ? "bf16" : "fp32";
  r.threads = threads;
  r.ranks = comm->size();
  try {
    TC_RETURN_IF_ERROR(ProbeCompute(job, mixed ? torch::kBFloat16 : torch::kFloat32, &r));
    ProbeMemory(job, comm->size(), threads, &r);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("probe: libtorch: ") + e.what_without_backtrace());
  }
  TC_RETURN_IF_ERROR(ProbeCollectives(job, comm, &r, mixed));
  return r;
}

}  // namespace tencache
