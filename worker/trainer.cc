#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include "common/clock.h"
#include "common/shard_bytes.h"
#include "worker/checkpoint.h"
#include "worker/host_malloc.h"
#include "worker/lane_timer.h"
#include "worker/process_memory.h"

namespace tencache {
namespace {

// Windows of train.data the training sampler draws from: all of them, less
// the held-out tail when validation reads train.data itself.
uint64_t TrainingWindows(const JobSpec& job, const TokenCorpus& corpus) {
  const uint64_t all = corpus.windows(job.model.seq_len);
  if (job.train.eval_every == 0 || !job.train.eval_data.empty()) return all;
  const uint64_t held = std::max<uint64_t>(1, uint64_t(double(all) * job.train.eval_split));
  return held < all ? all - held : all;
}

TraceHeader HeaderFor(const JobSpec& job, int ranks) {
  TraceHeader h;
  h.model = job.model.name;
  h.dtype = DTypeName(job.dtype);  // the parameter shards the accesses move
  h.ranks = ranks;
  h.micro_batch = job.train.micro_batch;
  h.seq_len = job.model.seq_len;
  h.deferred_updates = DeferredUpdates(job);
  return h;
}

}  // namespace

Trainer::Trainer(const JobSpec& job, Communicator* comm, std::shared_ptr<const TokenCorpus> corpus, LogSink log,
                 ComputeDevice device, FileEnv* nvme_env)
    : job_(job),
      comm_(comm),
      corpus_(std::move(corpus)),
      log_(std::move(log)),
      device_(device),
      model_(job.model),
      sampler_(corpus_, job.model.seq_len, job.train.global_batch, job.train.seed, TrainingWindows(job, *corpus_)),
      profiler_(HeaderFor(job, comm->size()), log_) {
  nvme_env_ = nvme_env;
  // The CPU computes synchronously: every step's access times are compute times.
  profiler_.set_followed_steps_timed(!device_.cuda());
}

Trainer::~Trainer() {
  if (store_ != nullptr && store_->cache() != nullptr) store_->cache()->SetNextUseOracle(nullptr);
  store_.reset();  // the NVMe tier removes its swap file
  if (!swap_folder_.empty()) {  // then this rank's folder, and the job's once every rank's is gone
    std::error_code ec;
    std::filesystem::remove(swap_folder_ + "/rank-" + std::to_string(comm_->rank()), ec);
    std::filesystem::remove(swap_folder_, ec);
    if (made_nvme_path_) std::filesystem::remove(job_.cache.nvme_path, ec);  // the last rank's succeeds
  }
}

// NVME_PATH/<job name>-<rank 0's PID>/: one folder per run of the job, private
// to its user (0700), holding one folder per rank for its swap file. Every rank
// learns rank 0's PID, so a run's ranks on one machine share the job folder and
// two runs never share a file. A symlink at cache.nvme_path is refused; a
// cache.nvme_path that no rank found is made, and removed at the end.
StatusOr<std::string> Trainer::MakeSwapFolder() {
  namespace fs = std::filesystem;
  const std::string& base = job_.cache.nvme_path;
  const std::string key = job_.Where("cache.nvme_path");
  std::error_code exists_ec;
  made_nvme_path_ = !fs::exists(base, exists_ec) && !exists_ec;  // before any rank makes it (the sum below)
  double pid = comm_->rank() == 0 ? double(::getpid()) : 0.0;
  TC_RETURN_IF_ERROR(comm_->AllReduceSum(&pid, 1));
  TC_RETURN_IF_ERROR(CheckNotSymlink(base, key));
  const std::string folder = SwapFolder(job_, int64_t(pid));
  std::error_code ec;
  fs::create_directories(base, ec);
  if (!ec) fs::create_directory(folder, ec);
  if (!ec) fs::permissions(folder, fs::perms::owner_all, ec);
  if (ec) return Status::IoError(key + ": creating '" + folder + "': " + ec.message());
  TC_RETURN_IF_ERROR(CheckNotSymlink(folder, key));
  swap_folder_ = folder;
  return folder + "/rank-" + std::to_string(comm_->rank());
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const JobSpec& job, Communicator* comm,
                                                   std::shared_ptr<const TokenCorpus> corpus, LogSink log,
                                                   ComputeDevice device, FileEnv* nvme_env) {
  TC_RETURN_IF_ERROR(CheckWorkerSupports(job.model));
  TC_RETURN_IF_ERROR(CheckCorpusFitsModel(*corpus, job, "train.data"));
  if (job.train.eval_every > 0 && job.train.eval_data.empty() && corpus->windows(job.model.seq_len) < 2) {
    return Status::InvalidArgument(job.Where("train.eval_every") + ": '" + corpus->path() + "' holds one sequence "
                                   "of " + std::to_string(job.model.seq_len + 1) + " tokens, too few to hold any out "
                                   "for validation; set train.eval_data or use more data");
  }
  if (comm->device_buffers() && !device.cuda()) {
    return Status::InvalidArgument("the communicator " + comm->Describe() + " takes GPU buffers, but the rank "
                                   "computes on the CPU");
  }
  TC_RETURN_IF_ERROR(UseDevice(device));
  KeepFreedHostMemory();  // a step's tensors are malloc'd afresh every step: keep their pages mapped
  std::unique_ptr<Trainer> t(new Trainer(job, comm, std::move(corpus), std::move(log), device, nvme_env));
  TC_RETURN_IF_ERROR(t->Init());
  return t;
}

Status Trainer::Init() {
  ranks_ = comm_->size();
  if (job_.train.micro_batch == 0) {
    return Status::InvalidArgument(job_.Where("train.micro_batch") + ": 'auto' is resolved by the planner: run the job "
                                   "with tencache-launch (workers read its OUT/job.resolved.yaml), or set a number");
  }
  if (job_.train.checkpoint_every == kCheckpointEveryAuto) {
    return Status::InvalidArgument(job_.Where("train.checkpoint_every") + ": 'auto' is resolved by the planner: run "
                                   "the job with tencache-launch (workers read its OUT/job.resolved.yaml), or set a number");
  }
  const ClusterSpec& cl = job_.cluster;
  if (cl.nodes > 0 && cl.ranks_per_node > 0 && cl.nodes * cl.ranks_per_node != ranks_) {
    return Status::InvalidArgument(job_.Where("cluster.ranks_per_node") + ": the job is planned for " +
                                   std::to_string(cl.nodes) + " node(s) x " + std::to_string(cl.ranks_per_node) +
                                   " rank(s) (cluster.nodes x cluster.ranks_per_node), but " + std::to_string(ranks_) +
                                   " rank(s) were started");
  }
  const int per_pass = job_.train.micro_batch * ranks_;
  if (job_.train.global_batch % per_pass != 0) {
    return Status::InvalidArgument(job_.Where("train.global_batch") + ": expected a multiple of ranks (" +
                                   std::to_string(ranks_) + ") x train.micro_batch (" +
                                   std::to_string(job_.train.micro_batch) + "), got " +
                                   std::to_string(job_.train.global_batch));
  }
  accum_ = job_.train.global_batch / per_pass;
  std::vector<uint64_t> block_numel;
  for (int b = 0; b < model_.num_blocks(); ++b) block_numel.push_back(uint64_t(model_.layout(b).numel));
  layout_ = MakeShardLayout(block_numel, job_.model.layers, job_.dtype, ranks_);
  param_dtype_ = ParamDtypeFor(job_.dtype);
  compute_dtype_ = ComputeDtypeFor(job_.dtype, device_);
  fp16_ = job_.dtype == DType::kFp16;
  defer_updates_ = DeferredUpdates(job_);
  // In fp32 the parameter is its own master: its held rows would have to be
  // written where the device holds it, costing a copy of the whole shard a step.
  split_embedding_ = SplitEmbeddingUpdate(job_);
  for (int b = 0; b < model_.num_blocks(); ++b) {
    for (ShardKind k : layout_.Kinds()) state_bytes_ += layout_.Bytes(b, k);
  }
  adamw_.lr = job_.train.lr;
  adamw_.beta1 = job_.train.beta1;
  adamw_.beta2 = job_.train.beta2;
  adamw_.eps = job_.train.eps;
  adamw_.weight_decay = job_.train.weight_decay;
  PlanDecayRuns();
  threads_ = device_.cores > 0 ? device_.cores : ComputeThreadsPerRank(ranks_);
  compute_ = {device_.cuda(), torch::get_num_threads(), threads_};
  contributions_.assign(model_.num_blocks(), 0);
  needed_.assign(model_.num_blocks(), accum_);
  if (job_.model.tied_embeddings) needed_[0] = 2 * accum_;  // the embedding is the head too
  checkpoints_.resize(model_.num_blocks());

  const CachePolicy policy = job_.cache.policy;
  if (policy == CachePolicy::kTenCacheWindow) {
    return Status::InvalidArgument(job_.Where("cache.policy") + ": '" + CachePolicyName(policy) +
                                   "' is modelled by tencache-sim only; the worker runs tencache, "
                                   "zero-infinity, lru and none");
  }
  if (policy == CachePolicy::kNone) {
    store_ = MakeMemoryShardStore(layout_);
  } else {
    CachedStoreOptions o;
    // auto: room for every shard, so nothing needs to leave the tier.
    o.device_budget = job_.cache.device_budget.value_or(state_bytes_);
    o.host_budget = job_.cache.host_budget.value_or(state_bytes_);
    o.nvme_budget = job_.cache.nvme_budget;  // auto: room for every shard
    TC_ASSIGN_OR_RETURN(o.nvme_dir, MakeSwapFolder());
    o.rank = comm_->rank();
    o.cuda = device_.cuda();
    o.cuda_device = device_.index();
    o.file_env = nvme_env_;
    StatusOr<std::unique_ptr<ShardStore>> store = MakeCachedShardStore(layout_, o);
    if (!store.ok() && store.status().code() == StatusCode::kInvalidArgument) {
      return store.status().WithContext(job_.source);  // a budget of the job's: name its file
    }
    TC_ASSIGN_OR_RETURN(store_, std::move(store));
  }
  MakeCollaborators();
  TC_RETURN_IF_ERROR(InitShards());
  hit_counter_ = std::make_unique<DeviceHitCounter>(store_->cache(), model_.num_blocks());
  PrefetchDriverContext context;
  context.job = &job_;
  context.store = store_.get();
  context.layout = &layout_;
  context.profiler = &profiler_;
  context.calibrator = &calibrator_;
  for (int b = 0; b < model_.num_blocks(); ++b) context.reads_stored_gradient.push_back(UpdateReadsStoredGradient(b));
  context.state_bytes = state_bytes_;
  context.log = log_;
  driver_ = MakePrefetchDriver(std::move(context));
  recorder_->set_driver(driver_.get());
  if (job_.train.eval_every > 0) {
    if (job_.train.eval_data.empty()) {
      eval_corpus_ = corpus_;
      eval_first_ = sampler_.windows();
      eval_count_ = corpus_->windows(job_.model.seq_len) - eval_first_;
    } else {
      StatusOr<std::shared_ptr<TokenCorpus>> eval = TokenCorpus::Open(job_.train.eval_data);
      if (!eval.ok()) return eval.status().WithContext(job_.Where("train.eval_data"));
      eval_corpus_ = *eval;
      eval_count_ = eval_corpus_->windows(job_.model.seq_len);
      TC_RETURN_IF_ERROR(CheckCorpusFitsModel(*eval_corpus_, job_, "train.eval_data"));
    }
    eval_count_ = std::min<uint64_t>(eval_count_, uint64_t(job_.train.eval_sequences));
  }
  recorder_->Discard();  // initialisation is not a step's
  if (store_->cache() != nullptr) allocations_at_warmup_ = store_->cache()->Snapshot().allocations_after_setup;
  store_->EndStep();  // initialisation traffic is not a training step
  // Loading's peak (model.init streamed to the tiers) apart from training's.
  setup_peak_rss_ = double(ReadResidentBytes().peak);
  ResetPeakResidentBytes();
  return Status::Ok();
}

double Trainer::Now() const {
  return MonotonicSeconds();
}

std::string Trainer::Describe() const {
  std::ostringstream out;
  out << "model " << job_.model.name << " (" << job_.model.ParamCount() << " parameters; "
      << (!layout_.mixed ? std::string("fp32 compute and AdamW")
                         : std::string("mixed precision: ") + TorchDtypeName(param_dtype_) + " weights, " +
                               TorchDtypeName(compute_dtype_) + " compute" +
                               (param_dtype_ != compute_dtype_ ? " (no fp16 kernels on this CPU)" : "") +
                               ", fp32 master weights and AdamW")
      << (fp16_ ? ", dynamic loss scaling" : "")
      << (job_.train.grad_clip > 0 ? ", gradients clipped to norm " + std::to_string(job_.train.grad_clip) : "")
      << (defer_updates_ ? " (updates after the backward)" : "")
      << ", on " << device_.Describe() << "), " << ranks_ << " rank(s) over " << comm_->Describe() << ", micro_batch "
      << job_.train.micro_batch << " x " << accum_ << " accumulation steps, policy "
      << CachePolicyName(job_.cache.policy) << "; store: " << store_->Describe() << "; updates "
      << (lane_ ? "on the optimizer lane (AdamW on " + std::to_string(optimizer_threads_) + " thread(s))"
                : std::string("on the training thread") +
                      (job_.train.optimizer_overlap == OptimizerOverlap::kAuto
                           ? " (optimizer_overlap auto: the " + std::to_string(compute_.compute_threads) +
                                 " compute thread(s) take this rank's " + std::to_string(compute_.rank_cores) +
                                 " core(s))"
                           : ""));
  return out.str();
}

// The host buffers beside the cache are allocated here, once, at the sizes
// the planner subtracts from the host's capacity (common/shard_bytes.h).
void Trainer::MakeCollaborators() {
  const WorkerHostBuffers host = WorkerHostBufferBytes(job_, ranks_, compute_);
  auto floats = [](uint64_t bytes) { return size_t(bytes / sizeof(float)); };
  recorder_ = std::make_unique<AccessRecorder>(store_.get(), &layout_, &profiler_, device_);
  gatherer_ = std::make_unique<ShardGatherer>(comm_, device_, &layout_, store_->cache() != nullptr, param_dtype_,
                                              compute_dtype_, host, recorder_.get(), &lanes_);
  deferred_ = std::make_unique<DeferredUpdater>(job_.train, fp16_, &layout_, recorder_.get(), comm_, &lanes_,
                                                floats(host.deferred_grad),
                                                [this](int b, const float* grad) { return Update(b, grad); });
  SplitEmbeddingUpdater::Hooks hooks;
  hooks.update_pieces = [this](const float* grad, int first, int last) {
    return UpdateBlock(0, grad, /*split=*/true, first, last);
  };
  hooks.adamw = [this](bool decay, size_t n, float* master, const float* grad, float* m, float* v) {
    AdamWConfig config = adamw_;
    config.lr = LearningRateAt(job_.train, step_);
    config.weight_decay = decay ? adamw_.weight_decay : 0.0;
    AdamWStep(config, optimizer_steps_ + 1, n, master, grad, m, v, threads_);
  };
  hooks.write_compute_copy = [this](const ShardRef& param, size_t begin, size_t count, const float* master) {
    WriteComputeCopy(param, begin, count, master, &lanes_);
  };
  split_ = std::make_unique<SplitEmbeddingUpdater>(&job_, &model_, &layout_, comm_->rank(), ranks_, accum_, &sampler_,
                                                   store_.get(), recorder_.get(), device_, &lanes_, decay_runs_[0],
                                                   floats(host.embed_grad), floats(host.held_rows), std::move(hooks));
  if (OptimizerLaneOn(job_.train, compute_)) {
    // At the least host budget the lane's update may pin every slot of a
    // size the training thread then needs: it waits for the update instead.
    recorder_->set_pin_release([this]() -> StatusOr<bool> {
      if (!lane_->in_flight()) return false;
      ++lane_fallbacks_;
      TC_RETURN_IF_ERROR(RetireUpdate());
      return true;
    });
    // The lane's AdamW takes the cores the compute leaves, at least one.
    optimizer_threads_ = std::max(1, LaneCores(compute_));
    lane_ = std::make_unique<OptimizerLane>(floats(host.optimizer_grad), [this](int b, const float* grad, LaneUpdate* done) {
      return RunUpdate(b, grad, /*split=*/false, {0, layout_.Pieces(b, ShardKind::kAdamM)}, UpdateRun::kLane,
                       optimizer_threads_, &done->lanes, done);
    });
  }
}

const std::vector<StepEvent>& Trainer::profiled_events() const { return recorder_->profiled_events(); }

StatusOr<Gathered> Trainer::Gather(int block, int slot, Phase phase) {
  const bool training = recorder_->recording();
  if (training) TC_RETURN_IF_ERROR(driver_->BeforeAccess(profiler_.position()));
  Gathered g;
  g.asked_s = Now();
  g.waited_s = recorder_->WaitedSinceLastAccess();
  TC_ASSIGN_OR_RETURN(ShardRef p, recorder_->Acquire(block, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kRead));
  hit_counter_->OnDeviceAccess(block, training);
  if (training) TC_RETURN_IF_ERROR(driver_->OnAccess(profiler_.position(), block));
  TC_RETURN_IF_ERROR(gatherer_->Gather(block, slot, std::move(p), &g));
  return g;
}

// Unpins a gathered block and issues the fetches planned for the next access
// now rather than at its Gather: a fetch that needed this block's slot then
// overlaps the update that follows it.
Status Trainer::Release(Gathered* g) {
  *g = Gathered();
  return recorder_->recording() ? driver_->BeforeAccess(profiler_.position()) : Status::Ok();
}

// One micro-batch: forward keeping only block inputs, then backward block by
// block with recompute; returns its mean loss. B = micro_batch, T = seq_len,
// C = hidden; a block's parameters and gradient are one flat [padded] tensor.
// The cache policy's hooks: Gather calls the driver's BeforeAccess and
// OnAccess, EndAccess its AfterAccess, Release the next access's
// BeforeAccess; a block's tensors are dropped before its Release, so its slot
// is free for the fetch the plan issues there.
StatusOr<double> Trainer::MicroStep(int micro) {
  const int mb = job_.train.micro_batch, T = job_.model.seq_len, last = job_.model.layers + 1;
  torch::Tensor seqs = torch::empty({mb, T + 1}, torch::kLong);  // [B, T + 1]
  const int first = comm_->rank() * (job_.train.global_batch / ranks_) + micro * mb;
  for (int i = 0; i < mb; ++i) sampler_.Sequence(step_, first + i, seqs[i].data_ptr<int64_t>());
  seqs = seqs.to(device_.device);
  torch::Tensor tokens = seqs.narrow(1, 0, T), targets = seqs.narrow(1, 1, T);  // [B, T] each

  // Forward, no autograd: x [B, T, C] out of the last layer; checkpoints_[b] is layer b's input.
  TC_ASSIGN_OR_RETURN(torch::Tensor x, ForwardLayers(tokens));
  // The head: the loss of x against targets, dx [B, T, C], the final block's
  // gradient (tied: and the embedding's) reduced.
  torch::Tensor loss, dx;
  TC_RETURN_IF_ERROR(HeadBackward(x, targets, &loss, &dx));
  // Each layer, last first: recompute from its input, dx [B, T, C] and the
  // layer's gradient [padded] reduced (the last micro-batch: its update).
  for (int b = last - 1; b >= 1; --b) {
    TC_RETURN_IF_ERROR(LayerBackward(b, &dx));
    TC_RETURN_IF_ERROR(split_->Stream());  // the split embedding update's next part, once begun
  }
  // The lookup: the embedding's gradient [padded] from dx, reduced.
  TC_RETURN_IF_ERROR(LookupBackward(tokens, dx));
  return loss.item<double>();
}

StatusOr<torch::Tensor> Trainer::ForwardLayers(const torch::Tensor& tokens) {
  const int last = job_.model.layers + 1;
  torch::NoGradGuard no_grad;
  torch::Tensor x;
  TC_ASSIGN_OR_RETURN(Gathered e, Gather(0, 0, Phase::kForward));
  {
    LaneTimer busy(&lanes_, StepLane::kCompute);
    x = model_.Embed(e.flat, tokens);  // [B, T, C]
  }
  TC_RETURN_IF_ERROR(EndAccess(0, Phase::kForward, e));
  TC_RETURN_IF_ERROR(Release(&e));  // its slot may be the first layer's (one size class)
  for (int b = 1; b < last; ++b) {
    checkpoints_[b] = x;
    TC_ASSIGN_OR_RETURN(Gathered g, Gather(b, b % 2, Phase::kForward));
    {
      LaneTimer busy(&lanes_, StepLane::kCompute);
      x = model_.Layer(b, g.flat, x);
    }
    TC_RETURN_IF_ERROR(EndAccess(b, Phase::kForward, g));
  }
  return x;
}

// The head computes the loss once, with autograd on, and starts the backward:
// gradients of x, of the final block and, with a tied head, of the embedding.
Status Trainer::HeadBackward(const torch::Tensor& x, const torch::Tensor& targets, torch::Tensor* loss,
                             torch::Tensor* dx) {
  const int last = job_.model.layers + 1;
  const double scale = deferred_->loss_scale() / (double(accum_) * ranks_);  // the loss scale: 1 unless fp16
  const bool tied = job_.model.tied_embeddings;
  torch::Tensor d_last, d_embed;
  {
    TC_ASSIGN_OR_RETURN(Gathered head, Gather(last, 0, Phase::kBackward));
    Gathered embed;
    if (tied) {  // the head's compute is counted in the tied embedding's access, acquired after it
      TC_RETURN_IF_ERROR(EndAccess(last, Phase::kBackward, head));
      TC_ASSIGN_OR_RETURN(embed, Gather(0, 1, Phase::kBackward));
    }
    LaneTimer busy(&lanes_, StepLane::kCompute);
    torch::Tensor x_in = x.detach().requires_grad_(true);
    // Tied, the final block is the final norm alone: its gradient is small.
    d_last = tied ? torch::zeros({int64_t(padded(last))}, head.flat.options()) : gatherer_->BlockGradient(last);
    if (tied) d_embed = gatherer_->BlockGradient(0);
    BlockWeights w_last = model_.WithGradients(head.flat, last, d_last);
    BlockWeights w0 = tied ? model_.WithGradients(embed.flat, 0, d_embed) : BlockWeights(torch::Tensor());
    *loss = model_.HeadLoss(w_last, w0, x_in, targets);
    *dx = Backward(*loss * scale, torch::Tensor(), {x_in}, {&w_last, &w0})[0];
    TC_RETURN_IF_ERROR(EndAccess(tied ? 0 : last, Phase::kBackward, tied ? embed : head));
    *loss = loss->detach();
    head = Gathered();
    w_last = w0 = BlockWeights(torch::Tensor());
    if (tied) TC_RETURN_IF_ERROR(Release(&embed));
  }
  TC_RETURN_IF_ERROR(ReduceGrad(last, d_last));
  if (tied) TC_RETURN_IF_ERROR(ReduceGrad(0, d_embed));
  return Status::Ok();
}

Status Trainer::LayerBackward(int b, torch::Tensor* dx) {
  torch::Tensor d_block;
  {
    TC_ASSIGN_OR_RETURN(Gathered g, Gather(b, b % 2, Phase::kBackward));
    {
      LaneTimer busy(&lanes_, StepLane::kCompute);
      d_block = gatherer_->BlockGradient(b);
      BlockWeights w = model_.WithGradients(g.flat, b, d_block);
      torch::Tensor in = checkpoints_[b].detach().requires_grad_(true);
      *dx = Backward(model_.Layer(b, w, in), *dx, {in}, {&w})[0];
    }
    TC_RETURN_IF_ERROR(EndAccess(b, Phase::kBackward, g));
    TC_RETURN_IF_ERROR(Release(&g));
  }
  checkpoints_[b] = torch::Tensor();
  return ReduceGrad(b, d_block);
}

Status Trainer::LookupBackward(const torch::Tensor& tokens, const torch::Tensor& dx) {
  torch::Tensor d_tokens;
  {
    TC_ASSIGN_OR_RETURN(Gathered e, Gather(0, 0, Phase::kBackward));
    {
      LaneTimer busy(&lanes_, StepLane::kCompute);
      d_tokens = gatherer_->BlockGradient(0);
      BlockWeights w = model_.WithGradients(e.flat, 0, d_tokens);
      Backward(model_.Embed(w, tokens), dx, {}, {&w});
    }
    TC_RETURN_IF_ERROR(EndAccess(0, Phase::kBackward, e));
    TC_RETURN_IF_ERROR(Release(&e));
  }
  return ReduceGrad(0, d_tokens);
}

Status Trainer::WriteTrace(const std::string& path) const {
  if (!profiler_.has_profile()) {
    return Status::FailedPrecondition("writing the trace to '" + path + "': no step has been profiled yet");
  }
  return WriteTraceFile(profiler_.timed_profile(), path);
}

std::string Trainer::SimFlags() const { return calibrator_.SimFlags(); }

StatusOr<StepMetrics> Trainer::Step() {
  if (!failed_.ok()) {
    return Status::FailedPrecondition("step " + std::to_string(step_) + " is not run: an earlier step failed (" +
                                      failed_.message() + ")");
  }
  StatusOr<StepMetrics> m = RunStep();
  if (!m.ok()) {
    failed_ = m.status();
    (void)RetireUpdate();  // the lane stops touching the shards; the step's error is the one reported
  }
  return m;
}

// One optimizer step: `accum` micro-batches, the deferred updates (if any),
// then the step's end for the store, the profiler and the cache policy.
StatusOr<StepMetrics> Trainer::RunStep() {
  recorder_->BeginStep();  // the step's clock starts; its events from none
  lanes_ = LaneBusy();     // what ran between steps (validation, sampling) is not this step's
  driver_->BeginStep();
  deferred_->BeginStep();
  optimizer_wait_s_ = 0;
  lane_fallbacks_ = 0;
  lane_yields_ = 0;
  std::fill(contributions_.begin(), contributions_.end(), 0);
  double loss_sum = 0;
  for (int micro = 0; micro < accum_; ++micro) {
    TC_ASSIGN_OR_RETURN(double loss, MicroStep(micro));
    loss_sum += loss;
  }
  TC_RETURN_IF_ERROR(RetireUpdate());  // the backward's last update
  for (int b = 0; b < model_.num_blocks(); ++b) {
    if (contributions_[b] != needed_[b]) {
      return Status::Internal("block " + std::to_string(b) + " received " + std::to_string(contributions_[b]) +
                              " gradient contributions in step " + std::to_string(step_) + ", expected " +
                              std::to_string(needed_[b]));
    }
  }
  if (defer_updates_) {
    TC_RETURN_IF_ERROR(deferred_->Apply(step_));  // every block's update, after the norm
    TC_RETURN_IF_ERROR(RetireUpdate());
  }
  if (!deferred_->step_skipped()) ++optimizer_steps_;
  const double seconds = Now() - recorder_->step_start();
  const CacheMetrics cache = store_->EndStep();
  const int version = profiler_.profile_version();
  const bool followed = profiler_.following();  // the whole step matched the profile
  TC_RETURN_IF_ERROR(profiler_.EndStep());
  // The step that became the profile (the first, or one that diverged) gives
  // the policy its trace and the eviction oracle its order.
  if (profiler_.profile_version() != version) {
    recorder_->KeepAsProfile();
    TC_RETURN_IF_ERROR(driver_->OnNewProfile({profiler_.profile(), cache, recorder_->acquire_order()}));
  } else if (followed) {  // a steady step: its link speeds, for SimFlags
    calibrator_.AddSteadyStep(cache);
  }
  if (steps_run_ == 0 && store_->cache() != nullptr) {
    allocations_at_warmup_ = cache.allocations_after_setup;
  }
  TC_ASSIGN_OR_RETURN(StepMetrics m, Collect(loss_sum, seconds, cache));
  ++step_;
  ++steps_run_;
  return m;
}

}  // namespace tencache
