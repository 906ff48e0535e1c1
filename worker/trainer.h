// Trainer: one rank of ZeRO-3 training of a DecoderModel, every shard served by a
// ShardStore (the tiered tensor cache, or ordinary memory for the reference).
//
// A step runs `accum` micro-batches. For each block the forward all-gathers
// the parameter shards into a working buffer and keeps only the block's input;
// the backward gathers the block again, recomputes its forward with autograd
// on, and reduce-scatters the block's gradient to this rank. In the last
// micro-batch a block's AdamW update runs as soon as its gradient is complete
// (after its backward): the step has no separate optimizer phase, and a
// gradient that completes in one piece is never stored. No block keeps
// parameters between its forward and backward, and the order of shard
// accesses is the same every step: step 0 is profiled (scheduler Profiler),
// and the cache policy's PrefetchDriver (worker/prefetch_driver.h) fetches
// ahead of use from then on.
//
// The Trainer runs the step (trainer.cc), routes gradients to their update
// (trainer_grads.cc) and runs AdamW on a block (trainer_weights.cc); it owns
// one collaborator per job of the step:
//  - AccessRecorder (worker/access_recorder.h): every training acquire,
//    consumed gradient and access end, the step's event stream
//    (scheduler/step_events.h), the Profiler's records, the driver's AfterAccess;
//  - ShardGatherer (worker/shard_gatherer.h): the all-gather of a block's
//    parameters and the reduce-scatter of its gradient, with their buffers;
//  - DeferredUpdater (worker/deferred_updater.h): with train.grad_clip or fp16
//    loss scaling, gradients stored until the step's norm is known, then
//    every block's update; fp16's loss scale;
//  - SplitEmbeddingUpdater (worker/split_embedding_updater.h): the tied
//    embedding's update (mixed precision), split around the backward;
//  - OptimizerLane (worker/optimizer_lane.h): with train.optimizer_overlap
//    on, the thread every whole-block update runs on, beside the training
//    thread (IssueUpdate, RetireUpdate: docs/worker.md, "The optimizer lane");
//  - PrefetchDriver, LinkCalibrator, DeviceHitCounter: the cache policy, the
//    links the plan is built for, the device hits the simulator counts.
// The training thread owns the Trainer; the optimizer lane touches only the
// shards of the update it was issued, through the store.
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
#include "worker/access_recorder.h"
#include "worker/adamw.h"
#include "worker/communicator.h"
#include "worker/compute_device.h"
#include "worker/decoder_model.h"
#include "worker/deferred_updater.h"
#include "worker/device_hit_counter.h"
#include "worker/link_calibrator.h"
#include "worker/optimizer_lane.h"
#include "worker/prefetch_driver.h"
#include "worker/shard_gatherer.h"
#include "worker/shard_store.h"
#include "worker/split_embedding_updater.h"
#include "worker/step_metrics.h"
#include "common/token_corpus.h"

namespace tencache {

struct RankFileInfo;        // worker/checkpoint.h
struct CheckpointManifest;  // worker/checkpoint.h

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
  // says for the job and rank_compute(), which the launcher's resource model counts.
  WorkerHostBuffers HostBuffers() const;
  // Where this rank computes: its device, torch's compute threads when it was
  // created and its share of the machine's cores (ComputeDevice::cores). train.optimizer_overlap's
  // auto and the host buffers follow it (common/job_spec.h OptimizerLaneOn).
  const RankCompute& rank_compute() const { return compute_; }

  // The events of the step that became the current profile (the first step,
  // or the latest one that diverged from it), in emission order: every
  // training acquire, consumed stored gradient and access end
  // (AccessRecorder). Empty before the first step ends.
  const std::vector<StepEvent>& profiled_events() const;

  // Tests: the optimizer lane takes the n-th acquire (0: the first) of every
  // update it runs as refused for want of a slot, as the cache refuses one
  // whose every slot the training thread pins (RunUpdate's kLane); -1: none.
  // REQUIRES: between steps.
  void TEST_RefuseLaneAcquire(int n) { refuse_lane_acquire_ = n; }

 private:
  Trainer(const JobSpec& job, Communicator* comm, std::shared_ptr<const TokenCorpus> corpus, LogSink log,
          ComputeDevice device, FileEnv* nvme_env);
  Status Init();
  // This rank's NVMe folder for the swap file; collective (every rank learns rank 0's PID).
  StatusOr<std::string> MakeSwapFolder();
  // The step's collaborators, once the store is made (Init).
  void MakeCollaborators();
  Status InitShards();  // trainer_weights.cc: InitShards, PlanDecayRuns, UpdateBlock, SaveWeights
  void PlanDecayRuns();
  // Rounds `count` fp32 master elements into the 16-bit parameter shard
  // `param` (mixed precision), from its element `begin` on.
  void WriteComputeCopy(const ShardRef& param, size_t begin, size_t count, const float* master, LaneBusy* lanes);

  // One step (Step() keeps its failure) and its micro-batches: each returns
  // the micro-batch's mean loss.
  StatusOr<StepMetrics> RunStep();
  StatusOr<double> MicroStep(int micro);
  // The parts of a micro-batch. ForwardLayers: x [B, T, C] from tokens [B, T]
  // through the embedding and every layer, checkpoints_[b] being layer b's
  // input. HeadBackward: the loss (a scalar, detached) of x against targets
  // [B, T] and dx [B, T, C] of the loss times loss scale / (accum x ranks),
  // the final block's (and, tied, the embedding's) gradients reduced. LayerBackward: dx through layer b, recomputed from its
  // input, its gradient reduced. LookupBackward: the embedding's lookup.
  StatusOr<torch::Tensor> ForwardLayers(const torch::Tensor& tokens);
  Status HeadBackward(const torch::Tensor& x, const torch::Tensor& targets, torch::Tensor* loss, torch::Tensor* dx);
  Status LayerBackward(int b, torch::Tensor* dx);
  Status LookupBackward(const torch::Tensor& tokens, const torch::Tensor& dx);

  // Block `block`'s parameters, whole, for an access in `phase`, in working
  // buffer `slot`: the driver's BeforeAccess and OnAccess around the acquire
  // (training only).
  StatusOr<Gathered> Gather(int block, int slot, Phase phase);
  // Unpins `g`; the driver's fetches for the next access start (training only).
  Status Release(Gathered* g);
  // The access of a gathered block ended: its times as Gather took them. An
  // error is the prefetch driver's (AfterAccess) and fails the step.
  // An update in flight on the optimizer lane is retired first, once the
  // access's compute has ended (the wait for it is not the access's).
  Status EndAccess(int block, Phase phase, const Gathered& g) {
    const double end = recorder_->ComputeEnd();
    TC_RETURN_IF_ERROR(RetireUpdate());
    return recorder_->EndAccess(block, phase, g.start_s, g.asked_s, g.waited_s, 0, 0, end);
  }
  // Reduces one contribution to the block's gradient to this rank; the last
  // one of the step updates the block (trainer_grads.cc).
  Status ReduceGrad(int block, const torch::Tensor& dflat);
  // The whole update of `block` with its complete gradient shard `grad`: on
  // the optimizer lane (IssueUpdate) when train.optimizer_overlap is on, else
  // here (UpdateBlock). `grad` may be reused once it returns.
  Status Update(int block, const float* grad) {
    return lane_ ? IssueUpdate(block, grad) : UpdateBlock(block, grad);
  }
  // AdamW on the block's shards with its complete gradient (this rank's
  // shard), on the training thread, once an update in flight is retired.
  // `split` (block 0, the split update): the held rows are left out, their
  // states swapped with the held arrays. `last` >= 0: only pieces [first,
  // last), a part of a streamed update (the parts in order).
  Status UpdateBlock(int block, const float* grad, bool split = false, int first = 0, int last = -1);
  // Retires the update in flight, records the update's acquires and end as
  // StepEvents (RunUpdate's kRecordOnly: those UpdateBlock makes, in its
  // order), copies `grad` to the lane and issues it. REQUIRES: lane_.
  Status IssueUpdate(int block, const float* grad);
  // Waits for the update in flight on the lane (none: returns at once) and
  // finishes it here where the lane yielded; its times reach the Profiler, its
  // device copy is refreshed as UpdateBlock's. REQUIRES: the training thread
  // pins no host slot (the finish may need every slot of a size).
  Status RetireUpdate();
  // How an update's body runs (RunUpdate).
  enum class UpdateRun {
    kHere,        // on the training thread, its shards acquired through the recorder (recorded)
    kRecordOnly,  // records the acquires kHere makes, in its order and modes, and touches nothing (an issue)
    kLane,        // on the lane, straight from the store; an acquire refused for want of a slot yields
    kFinish,      // on the training thread, the rest of an update the lane yielded, straight from the store
  };
  // Pieces [first, last) of a block's update; `first_computed`: piece
  // `first`'s AdamW already ran (the lane yielded before rounding it).
  struct PieceSpan {
    int first = 0, last = 0;
    bool first_computed = false;
  };
  // The update's body (trainer_update.cc), on either thread, as `run` says:
  // AdamW on `threads` threads, its busy time into `lanes`, its compute
  // seconds (waits left out) into done->compute_s, the store's acquires'
  // seconds into done->acquire_waited_s (kLane, kFinish). kLane: an acquire
  // refused with ResourceExhausted (the training thread pins the slot it
  // needs) ends the update early, touching nothing more, with where to resume
  // in done->resume_piece and done->resume_computed (RetireUpdate finishes it).
  Status RunUpdate(int block, const float* grad, bool split, PieceSpan span, UpdateRun run, int threads,
                   LaneBusy* lanes, LaneUpdate* done);
  // After a whole update: the plan keeps the parameter on the device until
  // its next use (device access `k` was the step's latest) and the device held
  // it when the update began (`was_on_device`): it is copied back there.
  void RefreshDeviceCopy(int block, DeviceAccessIndex k, bool was_on_device);
  // Whether the update of `block` reads a stored gradient (contributions
  // before it were stored).
  bool UpdateReadsStoredGradient(int block) const;
  // trainer_checkpoint.cc: the kinds a checkpoint holds per block, and one rank's file.
  std::vector<ShardKind> CheckpointKinds() const;
  Status WriteRankFile(const std::string& path, RankFileInfo* info);
  Status LoadRankFile(const std::string& path, const RankFileInfo& info);
  // Elastic resume: a checkpoint of manifest.world_size ranks read into this
  // run's shards. Each block's fp32 states are one flat vector over the ranks
  // in rank order; this rank's part comes from the old shards that overlap it
  // (each read whole, its CRC32C checked), the padding past the block's
  // elements zero; mixed precision rounds the 16-bit parameter again.
  Status LoadResharded(const std::string& folder, const CheckpointManifest& manifest);
  // The forward of `tokens` [B, T] through every block, then `head` on the
  // final block's and (tied) the embedding's parameters and the activations
  // [B, T, C] (Evaluate, Sample, Logits). Unrecorded callers only.
  using HeadFn = std::function<torch::Tensor(const torch::Tensor& flat_last, const torch::Tensor& flat0,
                                             const torch::Tensor& x)>;
  StatusOr<torch::Tensor> Forward(const torch::Tensor& tokens, const HeadFn& head);
  StatusOr<StepMetrics> Collect(double loss_sum, double seconds, const CacheMetrics& cache);
  double Now() const;
  // Elements of a whole block, padded to a multiple of the ranks.
  size_t padded(int block) const { return layout_.Padded(block, ranks_); }

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
  bool defer_updates_ = false;    // updates after the backward (train.grad_clip or fp16): deferred_
  bool split_embedding_ = false;  // a tied embedding, mixed precision, not deferred: split_
  bool fp16_ = false;             // dynamic loss scaling
  int64_t optimizer_steps_ = 0;   // updates applied (AdamW's bias correction counts these)
  bool updated_on_device_ = false;  // UpdateBlock: the device held the parameter as its first part began
  // The update in flight on the lane: when it was issued, the device access
  // it followed and whether the device held its parameter then.
  struct Issued {
    double asked_s = 0;
    DeviceAccessIndex position;
    bool on_device = false;
  } issued_;
  double optimizer_wait_s_ = 0;  // this step: the training thread's time in updates, or issuing and retiring them
  int optimizer_threads_ = 1;    // AdamW's threads on the lane
  int lane_fallbacks_ = 0;       // this step: acquires that waited for the lane's update to free a slot
  int lane_yields_ = 0;          // this step: lane updates refused a slot and finished on the training thread
  int refuse_lane_acquire_ = -1;  // TEST_RefuseLaneAcquire
  std::shared_ptr<const TokenCorpus> eval_corpus_;  // train.eval_data, or train.data's held-out tail
  uint64_t eval_first_ = 0, eval_count_ = 0;         // the validation windows
  uint64_t state_bytes_ = 0;    // this rank's shards of every kind: the "auto" budget
  AdamWConfig adamw_;  // the job's; the rate of each step from LearningRateAt
  std::vector<std::vector<DecayRun>> decay_runs_;  // per block
  int threads_ = 1;      // this rank's share of the machine's cores (ComputeDevice::cores): AdamW's threads on the training thread
  RankCompute compute_;  // rank_compute()

  LaneBusy lanes_;  // this step's training-thread lanes so far (Collect adds the cache's links)
  std::unique_ptr<ShardStore> store_;
  std::string swap_folder_;  // this run's NVMe folder (MakeSwapFolder), removed at the end
  bool made_nvme_path_ = false;  // cache.nvme_path was absent: removed at the end too, once empty
  FileEnv* nvme_env_ = nullptr;
  Status failed_;            // the first failed step's error
  BatchSampler sampler_;
  std::vector<int> contributions_;           // per block: gradient contributions so far this step
  std::vector<int> needed_;                  // per block: contributions per step (the embedding has two)
  std::vector<torch::Tensor> checkpoints_;   // each layer's input
  Profiler profiler_;
  LinkCalibrator calibrator_;                // the links and budgets the plan is built for
  std::unique_ptr<AccessRecorder> recorder_;          // the step's accesses and events
  std::unique_ptr<ShardGatherer> gatherer_;           // all-gather, reduce-scatter and their buffers
  std::unique_ptr<DeferredUpdater> deferred_;         // deferred updates, the loss scale (always made)
  std::unique_ptr<SplitEmbeddingUpdater> split_;      // the tied embedding's split update (always made)
  std::unique_ptr<PrefetchDriver> driver_;   // cache.policy's fetches ahead of use (MakePrefetchDriver)
  std::unique_ptr<OptimizerLane> lane_;      // train.optimizer_overlap on; destroyed before the store
  int64_t steps_run_ = 0;                    // steps this process ran (a resumed run starts at step_ > 0)
  int64_t step_ = 0;
  uint64_t allocations_at_warmup_ = 0;
  double setup_peak_rss_ = -1;  // this rank's resident peak up to the end of initialisation (-1: unknown)
  std::unique_ptr<DeviceHitCounter> hit_counter_;  // device hits as tencache-sim counts them, this step
};

}  // namespace tencache
