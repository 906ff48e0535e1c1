// The trainer's weights: where they start (the seed, or a Hugging Face
// checkpoint), how the optimizer updates them, and how they are saved.
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

#include "worker/hf_checkpoint.h"
#include "worker/lane_timer.h"
#include "worker/trainer.h"

namespace tencache {

// This rank's shard of each block in runs that weight decay applies to or not
// (norms and biases are not decayed; nor is the padding).
void Trainer::PlanDecayRuns() {
  decay_runs_.resize(model_.num_blocks());
  for (int b = 0; b < model_.num_blocks(); ++b) {
    const int64_t lo = int64_t(comm_->rank() * layout_.counts[b]), hi = lo + int64_t(layout_.counts[b]);
    int64_t at = lo;
    for (const ParamSlot& p : model_.layout(b).params) {
      const bool bias = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
      const bool decay = !bias && p.name.find("norm") == std::string::npos;
      const int64_t end = std::min(hi, p.offset + p.numel);
      if (end <= at) continue;
      if (!decay_runs_[b].empty() && decay_runs_[b].back().decay == decay) decay_runs_[b].back().end = size_t(end - lo);
      else decay_runs_[b].push_back({size_t(at - lo), size_t(end - lo), decay});
      at = end;
    }
    if (at < hi) decay_runs_[b].push_back({size_t(at - lo), size_t(hi - lo), false});
  }
}

// Every rank generates each whole block from the seed, or reads the tensors
// of model.init that overlap its shard, and keeps its shard (in mixed precision: the fp32 master, and
// the bf16 parameter rounded from it).
Status Trainer::InitShards() {
  std::unique_ptr<HfCheckpointReader> init;
  if (!job_.init.empty()) {
    TC_ASSIGN_OR_RETURN(HfCheckpointReader r, HfCheckpointReader::Open(job_.init, model_, job_.Where("model.init")));
    init = std::make_unique<HfCheckpointReader>(std::move(r));
  }
  // Blocks are drawn in parallel (each from its own seeded stream, so the
  // values do not depend on the threads), up to `threads_` at a time and 4 GiB
  // of whole blocks at once, and written to the store in order from this thread.
  size_t largest = 1;
  for (int b = 0; b < model_.num_blocks(); ++b) largest = std::max(largest, padded(b) * sizeof(float));
  const int n = model_.num_blocks();
  const int batch = int(std::clamp<size_t>((size_t(4) << 30) / largest, 1, size_t(std::max(1, threads_))));
  for (int first = 0; first < n; first += batch) {
    const int last = std::min(n, first + batch);
    std::vector<std::vector<float>> blocks(last - first);
    std::vector<Status> read(last - first);
    std::vector<std::thread> drawers;
    for (int b = first; b < last; ++b) {
      drawers.emplace_back([this, b, first, &blocks, &read, &init] {
        blocks[b - first].assign(padded(b), 0.0f);
        const int64_t mine = int64_t(comm_->rank() * layout_.counts[b]);  // only this rank's part is read
        if (init) read[b - first] = init->ReadBlock(b, blocks[b - first].data(), mine, mine + int64_t(layout_.counts[b]));
        else model_.InitBlock(b, job_.train.seed, blocks[b - first].data());
      });
    }
    for (std::thread& t : drawers) t.join();
    for (const Status& st : read) TC_RETURN_IF_ERROR(st);
    for (int b = first; b < last; ++b) {
      const float* mine = blocks[b - first].data() + comm_->rank() * layout_.counts[b];
      const ShardKind master = layout_.MasterKind();
      for (int i = 0; i < layout_.Pieces(b, master); ++i) {
        TC_ASSIGN_OR_RETURN(ShardRef p, store_->Acquire(b, master, i, Tier::kHost, AccessMode::kOverwrite));
        std::memcpy(p.data(), mine + layout_.PieceBegin(b, master, i), p.count() * sizeof(float));
      }
      if (layout_.mixed) {
        TC_ASSIGN_OR_RETURN(ShardRef param, store_->Acquire(b, ShardKind::kParam, 0, Tier::kHost, AccessMode::kOverwrite));
        WriteComputeCopy(param, 0, layout_.counts[b], mine, &lanes_);
      }
      blocks[b - first] = std::vector<float>();
    }
  }
  return Status::Ok();
}

// The bf16 or fp16 parameter shard rounded from the fp32 master (mixed precision).
void Trainer::WriteComputeCopy(const ShardRef& param, size_t begin, size_t count, const float* master,
                               LaneBusy* lanes) {
  LaneTimer busy(lanes, StepLane::kOptimizer);
  void* at = static_cast<uint8_t*>(param.data()) + begin * layout_.ElementBytes(ShardKind::kParam);
  torch::from_blob(at, {int64_t(count)}, param_dtype_)
      .copy_(torch::from_blob(const_cast<float*>(master), {int64_t(count)}, torch::kFloat32));
}

Status Trainer::SaveWeights(const std::string& dir, uint64_t max_shard_bytes) {
  TC_RETURN_IF_ERROR(split_->Flush());
  std::unique_ptr<HfCheckpointWriter> out;
  if (comm_->rank() == 0) {
    StatusOr<HfCheckpointWriter> w = HfCheckpointWriter::Begin(dir, model_, StDType::kF32, job_.dtype, max_shard_bytes);
    if (!w.ok()) return w.status().WithContext("--save-weights " + dir);
    out = std::make_unique<HfCheckpointWriter>(std::move(*w));
  }
  for (int b = 0; b < model_.num_blocks(); ++b) {
    const size_t count = layout_.counts[b];
    std::vector<float> mine(count), all(count * ranks_);
    const ShardKind master = layout_.MasterKind();
    for (int i = 0; i < layout_.Pieces(b, master); ++i) {
      TC_ASSIGN_OR_RETURN(ShardRef p, store_->Acquire(b, master, i, Tier::kHost, AccessMode::kRead));
      std::memcpy(mine.data() + layout_.PieceBegin(b, master, i), p.f32(), p.count() * sizeof(float));
    }
    TC_RETURN_IF_ERROR(comm_->AllGather(mine.data(), all.data(), count * sizeof(float)));
    if (out) TC_RETURN_IF_ERROR(out->WriteBlock(b, all.data()));
  }
  store_->EndStep();  // saving is not a training step
  return out ? out->Finish() : Status::Ok();
}

// AdamW on the block's shards, piece by piece (ShardLayout::pieces): the
// master (in fp32 the whole parameter shard, held throughout) and both moments
// of one piece at a time, so that the host holds three pieces, not three whole
// shards, of a huge block. In mixed precision the 16-bit parameter (held from
// the first piece's rounding on, and overwritten) is rounded from each piece
// of the master once that piece is updated. A shard the plan keeps on the
// device until its next use is copied back there right after its host update
// (the update invalidated the device copy: RefreshDeviceCopy); otherwise the
// plan fetches it before its use.
Status Trainer::UpdateBlock(int b, const float* grad, bool split, int first, int last) {
  TC_RETURN_IF_ERROR(RetireUpdate());
  const double asked = Now(), waited = recorder_->WaitedSinceLastAccess();  // the update asks for its first shard
  const TensorId param = ShardTensorId(b, ShardKind::kParam);
  TensorCache* cache = store_->cache();
  const int pieces = layout_.Pieces(b, ShardKind::kAdamM);
  const bool part = last >= 0;  // a part of a streamed update
  if (!part) last = pieces;
  // Whether the device held the parameter when the (whole) update began.
  if (first == 0) updated_on_device_ = cache != nullptr && cache->IsResident(param, Tier::kDevice);
  LaneUpdate done;
  TC_RETURN_IF_ERROR(RunUpdate(b, grad, split, first, last, /*lane=*/false, threads_, &lanes_, &done));
  if (last == pieces) RefreshDeviceCopy(b, profiler_.position(), updated_on_device_);
  optimizer_wait_s_ += Now() - asked;
  return recorder_->EndAccess(b, Phase::kOptimizer, Now() - done.compute_s, asked, waited, part ? first : 0,
                              part ? last : 0);
}

Status Trainer::IssueUpdate(int b, const float* grad) {
  TC_RETURN_IF_ERROR(RetireUpdate());
  const double asked = Now();
  issued_.asked_s = asked;
  issued_.position = profiler_.position();
  TensorCache* cache = store_->cache();
  issued_.on_device = cache != nullptr && cache->IsResident(ShardTensorId(b, ShardKind::kParam), Tier::kDevice);
  // The update's events, as UpdateBlock's acquires make them: fp32, the
  // parameter (its own master) first; per piece the master (mixed precision)
  // and both moments; mixed precision, the 16-bit parameter after the first piece's.
  const int pieces = layout_.Pieces(b, ShardKind::kAdamM);
  if (!layout_.mixed) recorder_->RecordAcquire(b, ShardKind::kParam, 0, Tier::kHost, AccessMode::kWrite);
  for (int i = 0; i < pieces; ++i) {
    if (layout_.mixed) recorder_->RecordAcquire(b, ShardKind::kMaster, i, Tier::kHost, AccessMode::kWrite);
    recorder_->RecordAcquire(b, ShardKind::kAdamM, i, Tier::kHost, AccessMode::kWrite);
    recorder_->RecordAcquire(b, ShardKind::kAdamV, i, Tier::kHost, AccessMode::kWrite);
    if (layout_.mixed && i == 0) recorder_->RecordAcquire(b, ShardKind::kParam, 0, Tier::kHost, AccessMode::kOverwrite);
  }
  recorder_->RecordUpdateEnd(b);
  std::memcpy(lane_->grad_buffer(), grad, layout_.counts[size_t(b)] * sizeof(float));
  lane_->Issue(b);
  optimizer_wait_s_ += Now() - asked;
  return Status::Ok();
}

Status Trainer::RetireUpdate() {
  if (lane_ == nullptr || !lane_->in_flight()) return Status::Ok();
  const double t0 = Now();
  LaneUpdate done;
  const Status st = lane_->Retire(&done);
  const double waited = Now() - t0;
  optimizer_wait_s_ += waited;
  recorder_->AddWait(waited);  // not the training thread's own time
  for (int l = 0; l < kStepLanes; ++l) lanes_.seconds[l] += done.lanes.seconds[l];
  TC_RETURN_IF_ERROR(st);
  RefreshDeviceCopy(done.block, issued_.position, issued_.on_device);
  recorder_->EndLaneAccess(done.block, issued_.asked_s, done.begin_s, done.acquire_waited_s,
                           done.end_s - done.compute_s, done.end_s);
  return Status::Ok();
}

void Trainer::RefreshDeviceCopy(int b, DeviceAccessIndex k, bool was_on_device) {
  const TensorId param = ShardTensorId(b, ShardKind::kParam);
  TensorCache* cache = store_->cache();
  if (recorder_->recording() && was_on_device && k.value() > 0 && driver_->KeepsOnDeviceAfterUpdate(b, k - 1) &&
      !cache->IsResident(param, Tier::kDevice)) {
    hit_counter_->NoteRefresh(b, store_->Prefetch(b, ShardKind::kParam, 0, Tier::kDevice));
  }
}

Status Trainer::RunUpdate(int b, const float* grad, bool split, int first, int last, bool lane, int threads,
                          LaneBusy* lanes, LaneUpdate* done) {
  auto acquire = [&](ShardKind kind, int piece, AccessMode mode) -> StatusOr<ShardRef> {
    if (!lane) return recorder_->Acquire(b, kind, piece, Tier::kHost, mode);
    const double t0 = Now();
    StatusOr<ShardRef> ref = store_->Acquire(b, kind, piece, Tier::kHost, mode);
    done->acquire_waited_s += Now() - t0;
    return ref;
  };
  done->begin_s = Now();
  double compute_s = 0;  // the update's own time, waits for its shards left out (the trace's access time)
  {
    // fp32: the parameter shard, its own master, held throughout. Mixed
    // precision: the 16-bit copy, rewritten whole, held from the first piece's
    // rounding on (acquired once that piece's moments are released: at most
    // three pins of one size, as StatePieces keeps a piece and it apart).
    ShardRef whole;
    if (!layout_.mixed) {
      TC_ASSIGN_OR_RETURN(whole, acquire(ShardKind::kParam, 0, AccessMode::kWrite));
    }
    AdamWConfig config = adamw_;
    config.lr = LearningRateAt(job_.train, step_);
    for (int i = first; i < last; ++i) {
      const size_t begin = layout_.PieceBegin(b, ShardKind::kAdamM, i);
      const size_t end = begin + layout_.PieceCount(b, ShardKind::kAdamM, i);
      ShardRef master;  // the piece's fp32 master (mixed precision)
      if (layout_.mixed) {
        TC_ASSIGN_OR_RETURN(master, acquire(ShardKind::kMaster, i, AccessMode::kWrite));
      }
      float* p = layout_.mixed ? master.f32() : whole.f32() + begin;  // element `begin` of the shard
      double t0 = 0;
      {
        TC_ASSIGN_OR_RETURN(ShardRef m, acquire(ShardKind::kAdamM, i, AccessMode::kWrite));
        TC_ASSIGN_OR_RETURN(ShardRef v, acquire(ShardKind::kAdamV, i, AccessMode::kWrite));
        t0 = Now();
        LaneTimer busy(lanes, StepLane::kOptimizer);
        if (split) split_->SwapHeldRows(begin, end, p, m.f32(), v.f32());
        for (const DecayRun& r : decay_runs_[b]) {  // the runs' parts within the piece
          const size_t lo = std::max(r.begin, begin), hi = std::min(r.end, end);
          if (lo >= hi) continue;
          config.weight_decay = r.decay ? adamw_.weight_decay : 0.0;
          auto step = [&](size_t from, size_t to) {
            AdamWStep(config, optimizer_steps_ + 1, to - from, p + (from - begin), grad + from,
                      m.f32() + (from - begin), v.f32() + (from - begin), threads);
          };
          if (split) split_->ForEachUnheld(lo, hi, step);
          else step(lo, hi);
        }
      }
      if (layout_.mixed) {
        if (i == first) {  // the first part overwrites it; a later one writes into it
          compute_s += Now() - t0;  // the wait for the parameter's slot is not the update's
          TC_ASSIGN_OR_RETURN(whole, acquire(ShardKind::kParam, 0, i == 0 ? AccessMode::kOverwrite : AccessMode::kWrite));
          t0 = Now();
        }
        WriteComputeCopy(whole, begin, end - begin, p, lanes);
      }
      compute_s += Now() - t0;
    }
  }
  done->compute_s = compute_s;
  done->end_s = Now();
  return Status::Ok();
}

}  // namespace tencache
