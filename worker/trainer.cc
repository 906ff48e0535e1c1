#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/clock.h"
#include "common/shard_bytes.h"
#include "worker/checkpoint.h"
#include "worker/host_malloc.h"
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
  size_t largest = 0;
  std::vector<uint64_t> block_numel;
  for (int b = 0; b < model_.num_blocks(); ++b) block_numel.push_back(uint64_t(model_.layout(b).numel));
  layout_ = MakeShardLayout(block_numel, job_.model.layers, job_.dtype, ranks_);
  param_dtype_ = ParamDtypeFor(job_.dtype);
  compute_dtype_ = ComputeDtypeFor(job_.dtype, device_);
  fp16_ = job_.dtype == DType::kFp16;
  deferred_ = DeferredUpdates(job_);
  // In fp32 the parameter is its own master: its held rows would have to be
  // written where the device holds it, costing a copy of the whole shard a step.
  split_embedding_ = SplitEmbeddingUpdate(job_);
  loss_scale_ = fp16_ ? job_.train.initial_loss_scale : 1.0;
  for (int b = 0; b < model_.num_blocks(); ++b) {
    largest = std::max(largest, padded(b));
    for (ShardKind k : layout_.Kinds()) state_bytes_ += layout_.Bytes(b, k);
  }
  if (ranks_ > 1 && !comm_->device_buffers()) {  // working buffers in the compute dtype (bf16: half the floats)
    const size_t floats = (largest * layout_.ElementBytes(ShardKind::kParam) + sizeof(float) - 1) / sizeof(float);
    gathered_.assign(2, std::vector<float>(floats, 0.0f));
  }
  // The host buffers beside the cache, at the sizes the planner subtracts from
  // the host's capacity (common/shard_bytes.h): allocated once, here.
  const WorkerHostBuffers host = WorkerHostBufferBytes(job_, ranks_, device_.cuda());
  auto floats = [](uint64_t bytes) { return size_t(bytes / sizeof(float)); };
  scatter_.assign(floats(host.scatter), 0.0f);
  grad_host_.assign(floats(host.grad_staging), 0.0f);
  update_grad_.assign(floats(host.deferred_grad), 0.0f);
  embed_grad_.assign(floats(host.embed_grad), 0.0f);
  static_assert(kHeldRowArrays == 2 * 4, "held_ and merging_, four arrays each");
  for (HeldRows* h : {&held_, &merging_}) {
    for (std::vector<float>* a : {&h->grad, &h->master, &h->m, &h->v}) {
      a->reserve(floats(host.held_rows) / kHeldRowArrays);
    }
  }
  if (device_.cuda()) {
    const auto on_gpu = torch::TensorOptions().device(device_.device);
    for (torch::Tensor& w : work_) w = torch::zeros({int64_t(largest)}, on_gpu.dtype(param_dtype_));
    if (comm_->device_buffers()) scatter_dev_ = torch::zeros({int64_t(largest / ranks_ + 1)}, on_gpu.dtype(torch::kFloat32));
  }
  grad_work_ = torch::zeros({int64_t(largest)}, torch::TensorOptions().dtype(compute_dtype_).device(device_.device));
  adamw_.lr = job_.train.lr;
  adamw_.beta1 = job_.train.beta1;
  adamw_.beta2 = job_.train.beta2;
  adamw_.eps = job_.train.eps;
  adamw_.weight_decay = job_.train.weight_decay;
  PlanDecayRuns();
  threads_ = std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, ranks_));
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
  step_acquires_.clear();  // initialisation is not a step's order
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
      << (deferred_ ? " (updates after the backward)" : "")
      << ", on " << device_.Describe() << "), " << ranks_ << " rank(s) over " << comm_->Describe() << ", micro_batch "
      << job_.train.micro_batch << " x " << accum_ << " accumulation steps, policy "
      << CachePolicyName(job_.cache.policy) << "; store: " << store_->Describe();
  return out.str();
}

StatusOr<Trainer::Gathered> Trainer::Gather(int block, int slot, Phase phase) {
  if (!sampling_) TC_RETURN_IF_ERROR(driver_->BeforeAccess(profiler_.position()));
  Gathered g;
  g.asked_s = Now();
  g.waited_s = WaitedSinceLastAccess();
  TC_ASSIGN_OR_RETURN(ShardRef p, Acquire(block, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kRead));
  hit_counter_->OnDeviceAccess(block, !sampling_);
  if (!sampling_) TC_RETURN_IF_ERROR(driver_->OnAccess(profiler_.position(), block));
  const bool in_device_memory = store_->cache() != nullptr || !device_.cuda();
  if (ranks_ == 1 && in_device_memory) {  // the shard is the block: compute on it in place
    auto pin = std::make_shared<ShardRef>(std::move(p));  // released with the tensor's storage
    g.flat = torch::from_blob(pin->data(), {int64_t(padded(block))}, [pin](void*) {},
                              torch::TensorOptions().dtype(param_dtype_).device(device_.device));
  } else {
    TC_RETURN_IF_ERROR(GatherInto(block, slot, std::move(p), &g));
  }
  g.start_s = Now();
  if (param_dtype_ != compute_dtype_) g.flat = g.flat.to(compute_dtype_);  // fp16 on a CPU
  return g;
}

// Where the shard `p` is: the device tier's memory (a cached store on a GPU,
// or any store on the CPU) or host memory (the reference store on a GPU).
Status Trainer::GatherInto(int block, int slot, ShardRef p, Gathered* g) {
  const int64_t n = int64_t(padded(block)), count = int64_t(layout_.counts[block]);
  const size_t elem = layout_.ElementBytes(ShardKind::kParam);
  const bool on_gpu = device_.cuda() && store_->cache() != nullptr;
  const auto host = torch::TensorOptions().dtype(param_dtype_);
  torch::Tensor shard = torch::from_blob(p.data(), {count}, on_gpu ? host.device(device_.device) : host);
  const double t0 = Now();
  if (comm_->device_buffers()) {  // NCCL: all-gather on the GPU, in place from this rank's part
    torch::Tensor mine = work_[slot].narrow(0, comm_->rank() * count, count);
    if (shard.data_ptr() != mine.data_ptr()) mine.copy_(shard);
    LaneTimer busy(this, StepLane::kCollectives);
    TC_RETURN_IF_ERROR(comm_->AllGather(mine.data_ptr(), work_[slot].data_ptr(), size_t(count) * elem));
    g->flat = work_[slot].narrow(0, 0, n);
  } else {
    torch::Tensor whole;
    if (ranks_ > 1) {  // over host memory
      whole = torch::from_blob(gathered_[slot].data(), {n}, host);
      torch::Tensor mine = whole.narrow(0, comm_->rank() * count, count);
      mine.copy_(shard);  // a copy from the GPU waits for it
      LaneTimer busy(this, StepLane::kCollectives);
      TC_RETURN_IF_ERROR(comm_->AllGather(mine.data_ptr(), whole.data_ptr(), size_t(count) * elem));
    } else {
      whole = shard;  // one rank, host shard, GPU compute
    }
    g->flat = device_.cuda() ? work_[slot].narrow(0, 0, n).copy_(whole) : whole;
  }
  if (ranks_ > 1 && !sampling_) {
    profiler_.RecordCollective({CollectiveKind::kAllGather, block, uint64_t(n) * elem * (ranks_ - 1) / ranks_,
                                t0 - step_start_, Now() - step_start_});
  }
  return Status::Ok();  // `p` is released here: the tier fences the compute enqueued so far
}

StatusOr<ShardRef> Trainer::Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode) {
  if (!sampling_) {
    step_acquires_.push_back(layout_.Id(block, kind, piece));
    step_events_.push_back(StepEvent::Acquire(block, ShardKindClass(kind), piece, tier, mode));
  }
  const double t0 = Now();
  StatusOr<ShardRef> ref = store_->Acquire(block, kind, piece, tier, mode);
  acquire_s_ += Now() - t0;
  return ref;
}

Status Trainer::EndAccess(int block, Phase phase, double start_s, double asked_s, double waited_s, int pieces_begin,
                          int pieces_end) {
  if (sampling_) return Status::Ok();
  step_events_.push_back(StepEvent::AccessEnd(block, phase, pieces_begin, pieces_end));
  if (!profiler_.following()) SyncCompute(device_);  // profiling: the access's GPU time, not its enqueue time
  AccessRecord a;
  a.id = TensorId(block);
  a.name = "block" + std::to_string(block) + ".param";
  a.phase = phase;
  a.block = block;
  a.bytes = layout_.Bytes(block, ShardKind::kParam);
  a.start_s = start_s - step_start_;
  a.end_s = Now() - step_start_;
  a.asked_s = asked_s - step_start_;
  a.waited_s = waited_s;
  a.pieces_begin = pieces_begin;
  a.pieces_end = pieces_end;
  profiler_.RecordAccess(a);
  acquire_mark_ = acquire_s_;
  if (phase != Phase::kOptimizer) return driver_->AfterAccess(profiler_.position() - 1, block);
  return Status::Ok();
}

// One micro-batch: forward keeping only block inputs, then backward block by
// block with recompute. Returns the micro-batch's mean loss. Shapes: tokens and
// targets [B, T] (B = micro_batch), activations x [B, T, hidden], a block's
// parameters one flat [padded] tensor. Each block's tensors are dropped before
// its Release, so its slot is free for the fetch the plan issues there.
StatusOr<double> Trainer::MicroStep(int micro) {
  const int mb = job_.train.micro_batch, T = job_.model.seq_len, last = job_.model.layers + 1;
  torch::Tensor seqs = torch::empty({mb, T + 1}, torch::kLong);
  const int first = comm_->rank() * (job_.train.global_batch / ranks_) + micro * mb;
  for (int i = 0; i < mb; ++i) sampler_.Sequence(step_, first + i, seqs[i].data_ptr<int64_t>());
  seqs = seqs.to(device_.device);
  torch::Tensor tokens = seqs.narrow(1, 0, T), targets = seqs.narrow(1, 1, T);

  // Forward, no autograd: x [B, T, hidden] through every layer; checkpoints_[b] is layer b's input.
  torch::Tensor x;
  {
    torch::NoGradGuard no_grad;
    TC_ASSIGN_OR_RETURN(Gathered e, Gather(0, 0, Phase::kForward));
    {
      LaneTimer busy(this, StepLane::kCompute);
      x = model_.Embed(e.flat, tokens);
    }
    TC_RETURN_IF_ERROR(EndAccess(0, Phase::kForward, e));
    TC_RETURN_IF_ERROR(Release(&e));  // its slot may be the first layer's (one size class)
    for (int b = 1; b < last; ++b) {
      checkpoints_[b] = x;
      TC_ASSIGN_OR_RETURN(Gathered g, Gather(b, b % 2, Phase::kForward));
      {
        LaneTimer busy(this, StepLane::kCompute);
        x = model_.Layer(b, g.flat, x);
      }
      TC_RETURN_IF_ERROR(EndAccess(b, Phase::kForward, g));
    }
  }
  // The head computes the loss once, with autograd on, and starts the backward:
  // gradients of x, of the final block and, with a tied head, of the embedding.
  const double scale = loss_scale_ / (double(accum_) * ranks_);  // loss_scale_: 1 unless fp16
  const bool tied = job_.model.tied_embeddings;
  torch::Tensor loss, dx, d_last, d_embed;
  {
    TC_ASSIGN_OR_RETURN(Gathered head, Gather(last, 0, Phase::kBackward));
    Gathered embed;
    if (tied) {  // the head's compute is counted in the tied embedding's access, acquired after it
      TC_RETURN_IF_ERROR(EndAccess(last, Phase::kBackward, head));
      TC_ASSIGN_OR_RETURN(embed, Gather(0, 1, Phase::kBackward));
    }
    LaneTimer busy(this, StepLane::kCompute);
    torch::Tensor x_in = x.detach().requires_grad_(true);
    // Tied, the final block is the final norm alone: its gradient is small.
    d_last = tied ? torch::zeros({int64_t(padded(last))}, head.flat.options()) : BlockGradient(last);
    if (tied) d_embed = BlockGradient(0);
    BlockWeights w_last = model_.WithGradients(head.flat, last, d_last);
    BlockWeights w0 = tied ? model_.WithGradients(embed.flat, 0, d_embed) : BlockWeights(torch::Tensor());
    loss = model_.HeadLoss(w_last, w0, x_in, targets);
    dx = Backward(loss * scale, torch::Tensor(), {x_in}, {&w_last, &w0})[0];
    TC_RETURN_IF_ERROR(EndAccess(tied ? 0 : last, Phase::kBackward, tied ? embed : head));
    loss = loss.detach();
    head = Gathered();
    w_last = w0 = BlockWeights(torch::Tensor());
    if (tied) TC_RETURN_IF_ERROR(Release(&embed));
  }
  TC_RETURN_IF_ERROR(ReduceGrad(last, d_last));
  if (tied) TC_RETURN_IF_ERROR(ReduceGrad(0, d_embed));

  // Each layer, last first: recompute from its input with autograd on, then
  // d(input) [B, T, hidden] and d(block) [padded].
  for (int b = last - 1; b >= 1; --b) {
    torch::Tensor d_block;
    {
      TC_ASSIGN_OR_RETURN(Gathered g, Gather(b, b % 2, Phase::kBackward));
      {
        LaneTimer busy(this, StepLane::kCompute);
        d_block = BlockGradient(b);
        BlockWeights w = model_.WithGradients(g.flat, b, d_block);
        torch::Tensor in = checkpoints_[b].detach().requires_grad_(true);
        dx = Backward(model_.Layer(b, w, in), dx, {in}, {&w})[0];
      }
      TC_RETURN_IF_ERROR(EndAccess(b, Phase::kBackward, g));
      TC_RETURN_IF_ERROR(Release(&g));
    }
    checkpoints_[b] = torch::Tensor();
    TC_RETURN_IF_ERROR(ReduceGrad(b, d_block));
    TC_RETURN_IF_ERROR(StreamEmbeddingUpdate());  // its next part, once the split update has begun
  }
  torch::Tensor d_tokens;
  {
    TC_ASSIGN_OR_RETURN(Gathered e, Gather(0, 0, Phase::kBackward));
    {
      LaneTimer busy(this, StepLane::kCompute);
      d_tokens = BlockGradient(0);
      BlockWeights w = model_.WithGradients(e.flat, 0, d_tokens);
      Backward(model_.Embed(w, tokens), dx, {}, {&w});
    }
    TC_RETURN_IF_ERROR(EndAccess(0, Phase::kBackward, e));
    TC_RETURN_IF_ERROR(Release(&e));
  }
  TC_RETURN_IF_ERROR(ReduceGrad(0, d_tokens));
  return loss.item<double>();
}

// Unpins a gathered block and issues the fetches planned for the next access
// now rather than at its Gather: a fetch that needed this block's slot then
// overlaps the update that follows it.
Status Trainer::Release(Gathered* g) {
  *g = Gathered();
  return sampling_ ? Status::Ok() : driver_->BeforeAccess(profiler_.position());
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
  if (!m.ok()) failed_ = m.status();
  return m;
}

StatusOr<StepMetrics> Trainer::RunStep() {
  step_start_ = Now();
  acquire_mark_ = acquire_s_;
  lanes_ = LaneBusy();  // what ran between steps (validation, sampling) is not this step's
  driver_->BeginStep();
  std::fill(contributions_.begin(), contributions_.end(), 0);
  step_acquires_.clear();  // capacity kept: no allocation once a step has run
  step_events_.clear();
  step_loss_scale_ = loss_scale_;
  step_grad_norm_ = -1;
  step_skipped_ = false;
  double loss_sum = 0;
  for (int micro = 0; micro < accum_; ++micro) {
    TC_ASSIGN_OR_RETURN(double loss, MicroStep(micro));
    loss_sum += loss;
  }
  for (int b = 0; b < model_.num_blocks(); ++b) {
    if (contributions_[b] != needed_[b]) {
      return Status::Internal("block " + std::to_string(b) + " received " + std::to_string(contributions_[b]) +
                              " gradient contributions in step " + std::to_string(step_) + ", expected " +
                              std::to_string(needed_[b]));
    }
  }
  if (deferred_) TC_RETURN_IF_ERROR(ApplyDeferredUpdates());
  if (!step_skipped_) ++optimizer_steps_;
  const double seconds = Now() - step_start_;
  const CacheMetrics cache = store_->EndStep();
  const int version = profiler_.profile_version();
  const bool followed = profiler_.following();  // the whole step matched the profile
  TC_RETURN_IF_ERROR(profiler_.EndStep());
  // The step that became the profile (the first, or one that diverged) gives
  // the eviction oracle its order.
  if (profiler_.profile_version() != version) {
    acquire_order_ = step_acquires_;
    profiled_events_ = step_events_;
    TC_RETURN_IF_ERROR(driver_->OnNewProfile({profiler_.profile(), cache, acquire_order_}));
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

