#include "worker/machine_probe.h"

#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "cachemgr/crc32c.h"
#include "common/clock.h"
#include "common/proc_meminfo.h"
#include "common/shard_bytes.h"
#include "common/stats.h"
#include "worker/adamw.h"
#include "worker/decoder_model.h"
#include "worker/host_malloc.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

// Median seconds of `repeats` runs of `fn` after one warm-up run.
double MedianSeconds(int repeats, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const double t0 = MonotonicSeconds();
    fn();
    t.push_back(MonotonicSeconds() - t0);
  }
  return Median(std::move(t));
}

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Median over `repeats` of the slowest rank's seconds for `fn`, every rank
// starting together: in training each collective waits for the slowest rank.
// `faults` (when given): this process's minor page faults in the median timed
// run (a one-off, such as glibc opening an arena for a thread, is not the
// steady state the probe stands for).
StatusOr<double> SlowestRankSeconds(Communicator* comm, int repeats, const std::function<void()>& fn,
                                    double* faults = nullptr) {
  fn();
  std::vector<double> t, run_faults;
  std::vector<double> all(comm->size());
  for (int i = 0; i < repeats; ++i) {
    TC_RETURN_IF_ERROR(comm->Barrier());
    const long faults_before = MinorFaults();
    const double t0 = MonotonicSeconds();
    fn();
    const double mine = MonotonicSeconds() - t0;
    run_faults.push_back(double(MinorFaults() - faults_before));
    TC_RETURN_IF_ERROR(comm->AllGather(&mine, all.data(), sizeof(double)));
    t.push_back(*std::max_element(all.begin(), all.end()));
  }
  if (faults != nullptr) *faults = Median(std::move(run_faults));
  return Median(std::move(t));
}

// A block's flat parameters in the compute dtype, initialised as training does.
torch::Tensor BlockParams(const DecoderModel& model, int block, torch::Dtype dtype) {
  std::vector<float> init(size_t(model.layout(block).numel));
  model.InitBlock(block, 1, init.data());
  return torch::from_blob(init.data(), {int64_t(init.size())}, torch::kFloat32).to(dtype).clone();
}

// One micro-batch through the model as Trainer::MicroStep runs it: the
// embedding and every layer forward without autograd, keeping each layer's
// input; the head's loss with autograd; each layer recomputed and
// differentiated in reverse; the embedding's backward. Distinct weights per
// layer (up to kProbeLayers), so that caches miss as they do in training.
constexpr int kProbeLayers = 8;

struct ProbeModel {
  DecoderModel model;
  torch::Tensor tokens, targets, embed, head;
  std::vector<torch::Tensor> layers;
  torch::Tensor grad;  // a block's gradient, the largest block's size
};

StatusOr<double> MicroBatchSeconds(const ProbeModel& p, int layers, int repeats, Communicator* comm,
                                   double* faults = nullptr) {
  return SlowestRankSeconds(comm, repeats, [&] {
    std::vector<torch::Tensor> inputs(layers);
    torch::Tensor x;
    {
      torch::NoGradGuard g;
      x = p.model.Embed(p.embed, p.tokens);
      for (int l = 0; l < layers; ++l) {
        inputs[l] = x;
        x = p.model.Layer(1, p.layers[l], x);
      }
    }
    // The trainer's backward: each block's gradient into one zeroed buffer.
    const int last = p.model.shape().layers + 1;
    const bool tied = p.model.shape().tied_embeddings;  // an untied head does not read the embedding
    auto gradient = [&](const torch::Tensor& flat) { return p.grad.narrow(0, 0, flat.numel()).zero_(); };
    torch::Tensor in = x.detach().requires_grad_(true);
    BlockWeights wl = p.model.WithGradients(p.head, last, tied ? torch::zeros_like(p.head) : gradient(p.head));
    BlockWeights w0 = tied ? p.model.WithGradients(p.embed, 0, gradient(p.embed)) : BlockWeights(p.embed);
    torch::Tensor dx = Backward(p.model.HeadLoss(wl, w0, in, p.targets), torch::Tensor(), {in}, {&wl, &w0})[0];
    for (int l = layers - 1; l >= 0; --l) {
      BlockWeights w = p.model.WithGradients(p.layers[l], 1, gradient(p.layers[l]));
      torch::Tensor li = inputs[l].detach().requires_grad_(true);
      dx = Backward(p.model.Layer(1, w, li), dx, {li}, {&w})[0];
    }
    BlockWeights we = p.model.WithGradients(p.embed, 0, gradient(p.embed));
    Backward(p.model.Embed(we, p.tokens), dx, {}, {&we});
  }, faults);
}

Status ProbeCompute(const JobSpec& job, torch::Dtype dtype, Communicator* comm, ProbeResult* r) {
  ProbeModel p{DecoderModel(job.model), {}, {}, {}, {}, {}, {}};
  const int64_t B = job.train.micro_batch, T = job.model.seq_len, C = job.model.hidden;
  torch::manual_seed(1);
  p.tokens = torch::randint(0, job.model.vocab, {B, T}, torch::kLong);
  p.targets = torch::randint(0, job.model.vocab, {B, T}, torch::kLong);
  p.embed = BlockParams(p.model, 0, dtype);
  p.head = BlockParams(p.model, job.model.layers + 1, dtype);
  // Distinct layers make caches miss as in training; a layer far larger than
  // any cache misses alone, and eight of them would hold gigabytes.
  const size_t layer_bytes = size_t(p.model.layout(1).numel) * torch::elementSize(dtype);
  const int layers = std::min({job.model.layers, kProbeLayers, std::max(2, int((size_t(1) << 30) / layer_bytes))});
  for (int l = 0; l < layers; ++l) p.layers.push_back(BlockParams(p.model, 1 + l, dtype));
  p.grad = torch::zeros({std::max({p.embed.numel(), p.head.numel(), p.model.layout(1).numel})}, p.embed.options());
  const int repeats = layer_bytes > (size_t(64) << 20) ? 3 : 9;  // a large layer's time varies little
  TC_ASSIGN_OR_RETURN(const double without_layers, MicroBatchSeconds(p, 0, repeats, comm));
  TC_ASSIGN_OR_RETURN(const double with_layers,
                      MicroBatchSeconds(p, layers, repeats, comm, &r->compute_page_faults));
  r->layer_s = std::max(0.0, with_layers - without_layers) / layers;
  r->embed_s = MedianSeconds(repeats, [&] {
    BlockWeights we = p.model.WithGradients(p.embed, 0, p.grad.narrow(0, 0, p.embed.numel()).zero_());
    torch::Tensor out = p.model.Embed(we, p.tokens);
    Backward(out, torch::ones_like(out), {}, {&we});
  });
  r->head_s = std::max(0.0, without_layers - r->embed_s);
  torch::Tensor a = torch::randn({B * T, C}).to(dtype), w = torch::randn({C, job.model.ffn_hidden}).to(dtype);
  const double flops = 2.0 * double(B * T) * C * job.model.ffn_hidden;
  r->matmul_tflops = flops / MedianSeconds(repeats, [&] { torch::mm(a, w); }) / 1e12;
  torch::Tensor a32 = a.to(torch::kFloat32), w32 = w.to(torch::kFloat32);
  r->matmul_fp32_tflops = flops / MedianSeconds(repeats, [&] { torch::mm(a32, w32); }) / 1e12;
  return Status::Ok();
}

// AdamW and memcpy over the largest shard this rank will hold.
void ProbeMemory(const JobSpec& job, int ranks, int threads, ProbeResult* r) {
  DecoderModel model(job.model);
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
  uint32_t crc = 0;
  const double checksum_s = MedianSeconds(5, [&] { crc = Crc32c(crc, p.data(), n * sizeof(float)); });
  r->checksum_gbps = double(n * sizeof(float)) / checksum_s / 1e9;
}

// The latency of a tiny all-gather, and the bus bandwidth (bytes x (R-1)/R
// per second, beyond that latency) of the run's largest gather and reduce-scatter.
Status ProbeCollectives(const JobSpec& job, Communicator* comm, ProbeResult* r) {
  const int R = comm->size();
  if (R == 1) return Status::Ok();
  DecoderModel model(job.model);
  size_t largest = 0;
  for (int b = 0; b < model.num_blocks(); ++b) largest = std::max(largest, size_t(model.layout(b).numel));
  // The worker's shards: the all-gather moves parameters, the reduce-scatter
  // fp32 gradients (common/shard_bytes.h's table).
  const size_t shard = (largest + R - 1) / R;
  const size_t elem = size_t(StateElementBytes(job.dtype, kStateParam));
  const size_t grad_elem = size_t(StateElementBytes(job.dtype, kStateGrad));
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
  // t(n) = latency + n / bandwidth: the tiny all-gather is the latency, and
  // the large ones' bandwidth is what they took beyond it (the resource model
  // charges the latency once per collective beside the bytes; a bandwidth read
  // from the whole time would charge it twice).
  const double share = double(R - 1) / R;
  const auto beyond = [&](double t) { return std::max(t - tiny, t / 2); };  // noise never leaves less than half
  r->allgather_gbps = double(shard * elem * R) * share / beyond(ag) / 1e9;
  r->reduce_scatter_gbps = double(shard * grad_elem * R) * share / beyond(rs) / 1e9;
  r->collective_latency_s = tiny;
  return Status::Ok();
}

// Layers of the in-memory reference: the job's, unless every rank's states
// together would take more than half of this machine's available memory (the
// point of an offloaded job); then kReferenceCutLayers of them (0: all). The
// step's overhead beyond its blocks (data, loss, framework) does not depend
// on the layer count; few layers keep the probe short at scale.
constexpr int kReferenceCutLayers = 2;
int ReferenceLayers(const JobSpec& job, int ranks) {
  const uint64_t states = ShardBytesPerRank(job.model, job.dtype, ranks).total() * uint64_t(ranks);
  const std::optional<uint64_t> available = MeminfoBytes("MemAvailable");
  if (!available || states <= *available / 2 || job.model.layers <= kReferenceCutLayers) return 0;
  return kReferenceCutLayers;
}

// The median step of the in-memory reference after two warm-up steps.
StatusOr<double> ReferenceStepSeconds(const JobSpec& job, int layers, Communicator* comm,
                                      std::shared_ptr<const TokenCorpus> corpus) {
  JobSpec ref = job;
  ref.cache.policy = CachePolicy::kNone;
  if (layers > 0) {
    ref.model.layers = layers;
    ref.init.clear();  // the whole model's checkpoint does not fit the cut one; values do not change the time
  }
  TC_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> t, Trainer::Create(ref, comm, std::move(corpus), [](const std::string&) {}));
  std::vector<double> times;
  const int steps = layers > 0 ? 6 : 12;  // a cut model's steps are a large model's: fewer of them
  for (int s = 0; s < steps; ++s) {
    TC_ASSIGN_OR_RETURN(StepMetrics m, t->Step());
    if (s >= 2) times.push_back(m.step_time_s);
  }
  return Median(std::move(times));
}

}  // namespace

StatusOr<ProbeResult> ProbeMachine(const JobSpec& job, Communicator* comm, int threads,
                                   std::shared_ptr<const TokenCorpus> corpus) {
  if (job.train.micro_batch <= 0) {
    return Status::InvalidArgument(job.Where("train.micro_batch") + ": the probe needs a resolved micro-batch");
  }
  TC_RETURN_IF_ERROR(CheckWorkerSupports(job.model));
  const torch::Dtype compute = ComputeDtypeFor(job.dtype, ComputeDevice{});  // the probe computes on the CPU
  KeepFreedHostMemory();  // the steps it predicts keep their freed pages mapped: so does the probe
  ProbeResult r;
  r.dtype = TorchDtypeName(compute);
  r.threads = threads;
  r.ranks = comm->size();
  try {
    TC_RETURN_IF_ERROR(ProbeCompute(job, compute, comm, &r));
    ProbeMemory(job, comm->size(), threads, &r);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("probe: libtorch: ") + e.what_without_backtrace());
  }
  TC_RETURN_IF_ERROR(ProbeCollectives(job, comm, &r));
  r.reference_layers = ReferenceLayers(job, comm->size());
  TC_ASSIGN_OR_RETURN(r.reference_step_s, ReferenceStepSeconds(job, r.reference_layers, comm, std::move(corpus)));
  return r;
}

}  // namespace tencache
