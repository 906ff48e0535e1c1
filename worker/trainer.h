// Trainer: one rank of ZeRO-3 training of a DecoderModel, every shard served by a
// ShardStore (the tiered tensor cache, or ordinary memory for the reference).
//
// A step runs `accum` micro-batches. For each block the forward all-gathers
// the parameter shards into a working buffer (one rank: computes on the shard
// in place, no copy) and keeps only the block's input; the backward gathers the
// block again, recomputes its forward with autograd on, and reduce-scatters the
// block's gradient to this rank. In the last micro-batch a block's AdamW update
// runs as soon as its gradient is complete (after its backward), so the step
// has no separate optimizer phase and a gradient that completes in one piece
// is never stored. The embedding tied to the head (mixed precision) is updated
// right after the head's backward but for the rows the lookup touches, which
// are held apart and updated after the lookup's backward
// (trainer_embedding.cc). No block
// keeps parameters between its forward and backward, and the order of shard
// accesses is the same every step: step 0 is profiled (scheduler Profiler), and
// the cache policy's PrefetchDriver (worker/prefetch_driver.h) fetches ahead of
// use from then on — tencache's from the PrefetchPlan built from the profile.
// Deferred updates: with train.grad_clip or fp16 loss scaling an update needs
// the whole step's gradient norm (or its overflow check) first, so each complete
// gradient shard is stored in the cache (kGrad) and every block is updated
// after the backward, block 0 first.
// Single-threaded: the training thread owns the Trainer.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/safetensors_shards.h"
#include "common/shard_bytes.h"
#include "scheduler/plan.h"
#include "scheduler/profiler.h"
#include "scheduler/step_events.h"
#include "worker/adamw.h"
#include "worker/communicator.h"
#include "worker/compute_device.h"
#include "worker/decoder_model.h"
#include "worker/device_hit_counter.h"
#include "worker/link_calibrator.h"
#include "worker/prefetch_driver.h"
#include "worker/shard_store.h"
#include "worker/step_metrics.h"
#include "common/token_corpus.h"

namespace tencache {

struct RankFileInfo;  // worker/checkpoint.h

class Trainer {
 public:
  using LogSink = std::function<void(const std::string&)>;
  // Validates that the job can run here (model supported, batch divisible by
  // ranks x micro_batch, policy available), initialises every shard from the
  // seed, or from the Hugging Face checkpoint model.init names (worker/hf_checkpoint.h).
  // On a CUDA `device` the model computes on that GPU and the cache's device
  // tier is its memory (pinned host tier); with cache.policy none (the
  // reference) every shard stays in host memory and is copied to the GPU at
  // each use. `comm` may take device buffers (NCCL) only on a CUDA device.
  // `nvme_env`: the files of the NVMe tier (tests inject faults); nullptr: POSIX.
  static StatusOr<std::unique_ptr<Trainer>> Create(const JobSpec& job, Communicator* comm,
                                                   std::shared_ptr<const TokenCorpus> corpus, LogSink log,
                                                   ComputeDevice device = {}, FileEnv* nvme_env = nullptr);
  ~Trainer();

  // Runs the next optimizer step. Collective: every rank calls it. After a
  // step failed (its shards may be half updated) every later Step and
  // SaveCheckpoint is refused with FailedPrecondition naming that failure.
  StatusOr<StepMetrics> Step();
  // The mean loss over the validation windows (train.eval_data, or the
  // held-out tail of train.data): up to train.eval_sequences windows, the same
  // ones each time, forward only, not profiled. Collective: every rank calls it.
  // FailedPrecondition when train.eval_every is 0.
  StatusOr<double> Evaluate();
  // The logits [T, vocab] (fp32, on the CPU) of the model as it stands for
  // `tokens` (1..seq_len ids), every position. Collective: every rank calls it.
  StatusOr<torch::Tensor> Logits(const std::vector<int64_t>& tokens);
  // Continues `prompt` by `tokens` bytes (byte-level vocabulary), sampling at
  // temperature 0.8 from the seed. Collective: every rank calls it.
  StatusOr<std::string> Sample(const std::string& prompt, int tokens);
  // Writes a checkpoint of the state after the steps run so far into
  // train.checkpoint_dir (worker/checkpoint.h), committed only when every rank
  // wrote its file; the previous checkpoint stays intact otherwise. Collective.
  Status SaveCheckpoint();
  // Loads the newest complete checkpoint of train.checkpoint_dir: the next
  // Step() continues the run it came from (bitwise on the same ranks). NotFound
  // when there is none; InvalidArgument when it is of another job or world
  // size; Corruption naming the file and offset on a checksum mismatch.
  // REQUIRES: no step has run. Collective.
  Status Resume();
  int64_t step() const { return step_; }  // steps done: the next step's number
  // Writes the weights (the fp32 masters) to DIR in transformers' layout
  // (HfCheckpointWriter: shards of at most `max_shard_bytes`), with
  // DIR/config.json; rank 0 writes, block by block as the ranks gather them.
  // Collective: every rank calls it.
  Status SaveWeights(const std::string& dir, uint64_t max_shard_bytes = kDefaultMaxShardBytes);

  std::string Describe() const;
  int accum_steps() const { return accum_; }
  const Profiler& profiler() const { return profiler_; }
  // The events (scheduler/step_events.h) of the step that became the current
  // profile, in order: its acquires, consumed gradient pieces and access ends.
  const std::vector<StepEvent>& profiled_events() const { return profiled_events_; }
  // The shards' store (tests and tools inspect the cache through it).
  ShardStore* store() const { return store_.get(); }

  // Writes the current profile (the profiled step's trace, docs/trace-format.md)
  // with the compute times of the steps after it where the device computes
  // synchronously (the CPU: Profiler::timed_profile, profiler().timed_steps()
  // of them), the profiled step's own on a GPU. FailedPrecondition before the
  // first step ends.
  Status WriteTrace(const std::string& path) const;
  // What tencache-sim must be given to replay the trace as this rank's cache
  // runs it: the device budget whose capacity (budget minus the gradient reserve
  // the simulator assumes, which this worker keeps off the device) equals the
  // device pool's slots, and the host budget. Valid once a step is profiled.
  const TierBudgets& sim_budgets() const { return calibrator_.budgets(); }
  // Link speeds the plan was built with: each one measured from the cache's
  // copies in the profiled step, the scheduler's default where a link was idle.
  const LinkSpeeds& link_speeds() const { return calibrator_.links(); }
  // The tencache-sim flags that replay this rank's trace: budgets, and link
  // speeds — each the median over the latest steps that followed the profile
  // (at most Profiler::kTimedSteps, a step that did not use the link left
  // out), the profiled step's where none has run yet, as the trace carries
  // steady compute times.
  std::string SimFlags() const;
  // The host buffers this rank allocated beside its cache, by what they hold
  // (their capacities): what common/shard_bytes.h's WorkerHostBufferBytes
  // says for the job, which the launcher's resource model counts.
  WorkerHostBuffers HostBuffers() const;

 public:
  // Elements [begin, end) of this rank's block-0 shard held apart from the
  // split update, at `at` in the held arrays.
  struct HeldRange {
    size_t begin = 0, end = 0, at = 0;
  };

 private:
  // A block's parameters for one access. When `flat` aliases the cache's slot
  // itself (one rank) its storage's deleter holds the pin, so the slot cannot be
  // reused while any tensor still views it.
  struct Gathered {
    torch::Tensor flat;  // the whole block, padded
    double start_s = 0;  // when it was there (acquired and gathered): its compute starts
    double asked_s = 0;   // when the training thread asked for it (the wait lies between)
    double waited_s = 0;  // time in Acquire since the step's previous access, at asked_s
  };
  Trainer(const JobSpec& job, Communicator* comm, std::shared_ptr<const TokenCorpus> corpus, LogSink log,
          ComputeDevice device, FileEnv* nvme_env);
  Status Init();
  // This rank's NVMe folder for the swap file; collective (every rank learns rank 0's PID).
  StatusOr<std::string> MakeSwapFolder();
  Status InitShards();  // trainer_weights.cc: InitShards, PlanDecayRuns, UpdateBlock, SaveWeights
  void PlanDecayRuns();
  // Rounds `count` fp32 master elements into the 16-bit parameter shard
  // `param` (mixed precision), from its element `begin` on.
  void WriteComputeCopy(const ShardRef& param, size_t begin, size_t count, const float* master);
  StatusOr<Gathered> Gather(int block, int slot, Phase phase);
  // The whole block in working buffer `slot` from this rank's shard `p`
  // (ranks > 1, or a host shard to compute on the GPU).
  Status GatherInto(int block, int slot, ShardRef p, Gathered* g);
  // This rank's fp32 gradient shard of the block, in host memory (reduce-scattered
  // over ranks > 1), from the block gradient `d` on the compute device.
  StatusOr<float*> ScatterGrad(int block, const torch::Tensor& d);
  // Every training acquire goes through here; the profiled step records its order.
  StatusOr<ShardRef> Acquire(int block, ShardKind kind, int piece, Tier tier, AccessMode mode);
  // Records the access that acquired `block` for `phase`: its compute ran from
  // `start_s` (after the acquire and any gather, which the trace and the
  // simulator count apart) until now.
  // Records the access for the profiler: its compute began at start_s; the
  // training thread asked for it at asked_s, having spent waited_s of the time
  // since the previous access inside Acquire (waits, not its own work).
  // An update that streams a part of its pieces gives them ([begin, end); 0, 0: all).
  // An error is the prefetch driver's (AfterAccess) and fails the step.
  Status EndAccess(int block, Phase phase, double start_s, double asked_s, double waited_s, int pieces_begin = 0,
                   int pieces_end = 0);
  // The access of a gathered block: its times as Gather took them.
  Status EndAccess(int block, Phase phase, const Gathered& g) {
    return EndAccess(block, phase, g.start_s, g.asked_s, g.waited_s);
  }
  // Time inside Acquire since the step's previous access ended.
  double WaitedSinceLastAccess() const { return acquire_s_ - acquire_mark_; }
  // Reduces one contribution to the block's gradient to this rank; the last
  // one of the step updates the block.
  Status ReduceGrad(int block, const torch::Tensor& dflat);
  // AdamW on the block's shards with its complete gradient (this rank's shard).
  // `split` (block 0, the split update): the held rows are left out, their
  // states swapped with the held arrays (SwapHeldRows). `last` >= 0: only
  // pieces [first, last), a part of a streamed update (the parts in order).
  Status UpdateBlock(int block, const float* grad, bool split = false, int first = 0, int last = -1);
  // The tied embedding's split update (trainer_embedding.cc).
  void PlanHeldRows();  // held_'s ranges for this step
  Status EarlyEmbeddingUpdate(const float* grad);
  // The split update's next part, after each layer's backward: its pieces
  // spread over the layers, done before the lookup. Nothing when none is under way.
  Status StreamEmbeddingUpdate();
  Status ContinueEmbeddingUpdate(int pieces);  // up to piece `pieces` (exclusive)
  void SwapHeldRows(size_t begin, size_t end, float* master, float* m, float* v);
  void ForEachUnheld(size_t begin, size_t end, const std::function<void(size_t, size_t)>& f) const;
  Status LateEmbeddingUpdate(const float* lookup);
  Status FlushHeldRows();
  // Whether the update of `block` reads a stored gradient (contributions
  // before it were stored).
  bool UpdateReadsStoredGradient(int block) const;
  StatusOr<double> MicroStep(int micro);
  // trainer_checkpoint.cc: the kinds a checkpoint holds per block, and one rank's file.
  std::vector<ShardKind> CheckpointKinds() const;
  Status WriteRankFile(const std::string& path, RankFileInfo* info);
  Status LoadRankFile(const std::string& path, const RankFileInfo& info);
  // Deferred updates (trainer_grads.cc): stores a complete gradient shard and
  // adds its squares to grad_sumsq_; then, after the backward, the norm over
  // all ranks, the fp16 overflow check and loss scale, clipping, and every
  // block's update (or, on an fp16 overflow, none).
  Status StoreGradient(int block, const float* grad, bool add_stored);
  Status ApplyDeferredUpdates();
  // The forward of `tokens` [B, T] through every block, then `head` on the
  // final block's and (tied) the embedding's parameters and the activations
  // [B, T, C] (Evaluate, Sample, Logits). Unprofiled callers only.
  using HeadFn = std::function<torch::Tensor(const torch::Tensor& flat_last, const torch::Tensor& flat0,
                                             const torch::Tensor& x)>;
  StatusOr<torch::Tensor> Forward(const torch::Tensor& tokens, const HeadFn& head);
  // Unpins `g`; the driver's fetches for the next access start.
  Status Release(Gathered* g);
  StatusOr<StepMetrics> Collect(double loss_sum, double seconds, const CacheMetrics& cache);
  double Now() const;
  // Adds the training thread's seconds on one lane, from construction to
  // destruction, to lanes_ (compute, collectives and the optimizer run there).
  struct LaneTimer {
    LaneTimer(Trainer* t, StepLane lane) : trainer(t), lane(lane), start(t->Now()) {}
    ~LaneTimer() { trainer->lanes_[lane] += trainer->Now() - start; }
    LaneTimer(const LaneTimer&) = delete;
    LaneTimer& operator=(const LaneTimer&) = delete;
    Trainer* trainer;
    StepLane lane;
    double start;
  };
  // Elements of a whole block, padded to a multiple of the ranks.
  size_t padded(int block) const { return layout_.counts[block] * size_t(ranks_); }
  // grad_work_'s first padded(block) elements, zeroed: the block's gradient
  // until the next call.
  torch::Tensor BlockGradient(int block);

  // Constant after Create.
  const JobSpec job_;
  Communicator* const comm_;
  const std::shared_ptr<const TokenCorpus> corpus_;
  const LogSink log_;
  const ComputeDevice device_;
  DecoderModel model_;
  int ranks_ = 1;
  int accum_ = 1;
  ShardLayout layout_;          // elements per shard of each block, the shards' kinds and element types
  torch::Dtype param_dtype_ = torch::kFloat32;    // of the kParam shards (ParamDtypeFor)
  torch::Dtype compute_dtype_ = torch::kFloat32;  // what the model computes in (ComputeDtypeFor)
  bool deferred_ = false;       // updates after the backward (train.grad_clip or fp16)
  bool split_embedding_ = false;  // a tied embedding, mixed precision, not deferred: split update
  bool fp16_ = false;           // dynamic loss scaling
  double loss_scale_ = 1.0;     // the loss is multiplied by it before the backward (fp16)
  int good_steps_ = 0;          // fp16: steps since the scale last changed without overflow
  int64_t skipped_steps_ = 0;
  int64_t optimizer_steps_ = 0; // updates applied (AdamW's bias correction counts these)
  double grad_sumsq_ = 0;       // this rank's share of the step's squared gradient norm
  double step_loss_scale_ = 1.0, step_grad_norm_ = -1;  // this step's, for its metrics
  bool step_skipped_ = false;
  std::vector<float> update_grad_;  // a stored gradient, scaled, on its way to AdamW (deferred)
  // The split update's held rows: fp32 gradient (head part, then whole),
  // master and moments, concatenated in range order. `updated`: the late
  // update ran, so these are current and the pieces' copies stale.
  struct HeldRows {
    std::vector<HeldRange> ranges;  // sorted, disjoint
    std::vector<float> grad, master, m, v;
    bool updated = false;
  };
  HeldRows held_, merging_;  // this step's; the previous step's while it is merged
  std::vector<float> embed_grad_;  // the split update's gradient (head's part, +0), block 0's shard
  bool embed_streaming_ = false;  // the split update's early part is under way
  int embed_stage_ = 0;         // its stages so far
  int embed_done_ = 0;          // its pieces updated so far
  bool updated_on_device_ = false;  // UpdateBlock: the device held the parameter as its first part began
  std::vector<uint8_t> looked_up_;  // per token id: looked up by the last micro-batch (PlanHeldRows)
  std::vector<int64_t> row_tokens_;
  static void MergeHeld(const HeldRows& held, size_t begin, size_t end, float* master, float* m, float* v);
  std::shared_ptr<const TokenCorpus> eval_corpus_;  // train.eval_data, or train.data's held-out tail
  uint64_t eval_first_ = 0, eval_count_ = 0;         // the validation windows
  uint64_t state_bytes_ = 0;    // this rank's shards of every kind: the "auto" budget
  AdamWConfig adamw_;  // the job's; the rate of each step from LearningRateAt
  struct DecayRun {
    size_t begin = 0, end = 0;  // elements of this rank's shard
    bool decay = false;
  };
  std::vector<std::vector<DecayRun>> decay_runs_;  // per block
  int threads_ = 1;

  LaneBusy lanes_;  // this step's training-thread lanes so far (Collect adds the cache's links)
  std::unique_ptr<ShardStore> store_;
  std::string swap_folder_;  // this run's NVMe folder (MakeSwapFolder), removed at the end
  bool made_nvme_path_ = false;  // cache.nvme_path was absent: removed at the end too, once empty
  FileEnv* nvme_env_ = nullptr;
  Status failed_;            // the first failed step's error
  StatusOr<StepMetrics> RunStep();
  BatchSampler sampler_;
  std::vector<std::vector<float>> gathered_;  // two host working buffers (ranks > 1)
  std::vector<float> scatter_;               // reduce-scatter output, host
  // On a GPU: two working buffers in the compute dtype, the reduce-scatter
  // output (NCCL), and host staging for a gradient on its way to AdamW.
  torch::Tensor work_[2];
  // A whole block's gradient in the compute dtype on the compute device, the
  // largest block's size (the resource model's working set counts it).
  torch::Tensor grad_work_;
  torch::Tensor scatter_dev_;
  std::vector<float> grad_host_;
  std::vector<int> contributions_;           // per block: gradient contributions so far this step
  std::vector<int> needed_;                  // per block: contributions per step (the embedding has two)
  std::vector<torch::Tensor> checkpoints_;   // each layer's input
  Profiler profiler_;
  LinkCalibrator calibrator_;                // the links and budgets the plan is built for
  std::unique_ptr<PrefetchDriver> driver_;   // cache.policy's fetches ahead of use (MakePrefetchDriver)
  std::vector<TensorId> acquire_order_;      // cache ids acquired in the profiled step: the oracle's order
  std::vector<TensorId> step_acquires_;      // cache ids acquired in this step so far
  std::vector<StepEvent> step_events_;       // this step's events so far (training, not sampling)
  std::vector<StepEvent> profiled_events_;   // those of the step that became the profile
  int64_t steps_run_ = 0;                    // steps this process ran (a resumed run starts at step_ > 0)
  int64_t step_ = 0;
  bool sampling_ = false;  // Sample() and Evaluate() run unprofiled
  double step_start_ = 0;
  double acquire_s_ = 0;     // seconds inside Trainer::Acquire, cumulative
  double acquire_mark_ = 0;  // acquire_s_ when the step's latest access ended (or the step began)
  uint64_t allocations_at_warmup_ = 0;
  double setup_peak_rss_ = -1;  // this rank's resident peak up to the end of initialisation (-1: unknown)
  std::unique_ptr<DeviceHitCounter> hit_counter_;  // device hits as tencache-sim counts them, this step
};

}  // namespace tencache
