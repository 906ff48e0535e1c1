// SplitEmbeddingUpdater: the tied embedding's update split around the backward
// (mixed precision, updates not deferred; docs/worker.md, "The tied
// embedding's update"). Its gradient is the head's part, known at the start of
// the backward, plus the lookup's, known at its end, which is zero outside
// the rows the last micro-batch looked up (on any rank) and block 0's other
// parameters. So the rows outside those (the unheld) are updated right after
// the head (Early), their pieces spread over the layers' backward (Stream,
// after each layer's), so that the reads of each part overlap the layers'
// compute; the held rows' states are copied aside during that update and
// updated after the lookup (Late), and merged back into their pieces at the
// next update or before anything reads the store (Flush). AdamW is
// elementwise, so the result is bit for bit the unsplit update's.
// Owns the held rows and the early part's gradient copy.
// Training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"
#include "common/step_lanes.h"
#include "common/token_corpus.h"
#include "worker/access_recorder.h"
#include "worker/adamw.h"
#include "worker/compute_device.h"
#include "worker/decoder_model.h"
#include "worker/shard_store.h"

namespace tencache {

class SplitEmbeddingUpdater {
 public:
  // Elements [begin, end) of this rank's block-0 shard held apart from the
  // split update, at `at` in the held arrays.
  struct HeldRange {
    size_t begin = 0, end = 0, at = 0;
  };
  // What the updater asks of the optimizer.
  struct Hooks {
    // AdamW on block 0's pieces [first, last) with gradient shard `grad`,
    // leaving the held rows out (SwapHeldRows, ForEachUnheld).
    std::function<Status(const float* grad, int first, int last)> update_pieces;
    // This step's AdamW on n elements of the held arrays (`decay`: weight decay applies).
    std::function<void(bool decay, size_t n, float* master, const float* grad, float* m, float* v)> adamw;
    // Rounds `count` fp32 master elements into the 16-bit parameter shard from its element `begin` on.
    std::function<void(const ShardRef& param, size_t begin, size_t count, const float* master)> write_compute_copy;
  };
  // `decay0`: block 0's decay runs (elements of this rank's shard).
  // `embed_floats`, `held_floats`: WorkerHostBuffers' embed_grad and
  // held_rows, in floats. Its own work counts on `lanes`' optimizer lane. REQUIRES: every pointer outlives the updater.
  SplitEmbeddingUpdater(const JobSpec* job, const DecoderModel* model, const ShardLayout* layout, int rank, int ranks,
                        int accum, BatchSampler* sampler, ShardStore* store, AccessRecorder* recorder,
                        ComputeDevice device, LaneBusy* lanes, std::vector<DecayRun> decay0, size_t embed_floats,
                        size_t held_floats, Hooks hooks);

  // The head's contributions are complete: `grad` is block 0's gradient shard
  // but for the last lookup's part (the stored part added in), for step
  // `step`. Copies it (its buffer is reused) and updates the first part.
  Status Early(const float* grad, int64_t step);
  // The next part, after a layer's backward; nothing when none is under way.
  Status Stream();
  // REQUIRES: Early ran this step; `lookup` is the last lookup's gradient
  // shard. Finishes the unheld part, then updates the held rows and writes
  // them into the 16-bit parameter.
  Status Late(const float* lookup);
  // The held rows' current states into their pieces, before anything reads
  // them from the store (a checkpoint, the exported weights). Unrecorded.
  Status Flush();

  // Inside the update of block 0's piece [begin, end) of the shard, with the
  // piece's master and moments: the previous step's held values go into the
  // piece, this step's are copied out.
  void SwapHeldRows(size_t begin, size_t end, float* master, float* m, float* v);
  // Calls f(lo, hi) for the parts of [begin, end) outside the held ranges.
  void ForEachUnheld(size_t begin, size_t end, const std::function<void(size_t, size_t)>& f) const;

  // Bytes of the host buffers it holds (WorkerHostBuffers' embed_grad, held_rows).
  uint64_t embed_grad_bytes() const;
  uint64_t held_rows_bytes() const;

 private:
  // The held rows: fp32 gradient (head part, then whole), master and moments,
  // concatenated in range order. `updated`: the late update ran, so these are
  // current and the pieces' copies stale.
  struct HeldRows {
    std::vector<HeldRange> ranges;  // sorted, disjoint
    std::vector<float> grad, master, m, v;
    bool updated = false;
  };
  static void MergeHeld(const HeldRows& held, size_t begin, size_t end, float* master, float* m, float* v);
  void PlanHeldRows(int64_t step);  // held_'s ranges for the step
  Status ContinueUpdate(int upto);   // up to piece `upto` (exclusive)

  const JobSpec* const job_;
  const DecoderModel* const model_;
  const ShardLayout* const layout_;
  const int rank_, ranks_, accum_;
  BatchSampler* const sampler_;
  ShardStore* const store_;
  AccessRecorder* const recorder_;
  const ComputeDevice device_;
  const std::vector<DecayRun> decay0_;
  const Hooks hooks_;
  LaneBusy* const lanes_;
  HeldRows held_, merging_;        // this step's; the previous step's while it is merged
  std::vector<float> embed_grad_;  // the early part's gradient (head's part, +0), block 0's shard
  bool streaming_ = false;         // the early part is under way
  int stage_ = 0;                  // its stages so far
  int done_ = 0;                   // its pieces updated so far
  std::vector<uint8_t> looked_up_;  // per token id: looked up by the last micro-batch (PlanHeldRows)
  std::vector<int64_t> row_tokens_;
};

}  // namespace tencache
