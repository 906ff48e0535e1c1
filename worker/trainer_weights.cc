// The trainer's weights: where they start (the seed, or a Hugging Face
// checkpoint), and how they are saved (the optimizer updates them: trainer_update.cc).
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

}  // namespace tencache
