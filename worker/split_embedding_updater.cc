#include "worker/split_embedding_updater.h"

#include <algorithm>
#include <cstring>

#include "worker/lane_timer.h"

namespace tencache {
namespace {

using HeldRange = SplitEmbeddingUpdater::HeldRange;

// Calls f(begin, end, at) for each part of `ranges` within [begin, end)
// (elements of the shard), `at` being where that part starts in the held arrays.
template <typename F>
void ForEachHeld(const std::vector<HeldRange>& ranges, size_t begin, size_t end, F f) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t v, const HeldRange& r) { return v < r.end; });
  for (; it != ranges.end() && it->begin < end; ++it) {
    const size_t lo = std::max(begin, it->begin), hi = std::min(end, it->end);
    if (lo < hi) f(lo, hi, it->at + (lo - it->begin));
  }
}

}  // namespace

SplitEmbeddingUpdater::SplitEmbeddingUpdater(const JobSpec* job, const DecoderModel* model, const ShardLayout* layout,
                                             int rank, int ranks, int accum, BatchSampler* sampler, ShardStore* store,
                                             AccessRecorder* recorder, ComputeDevice device, LaneBusy* lanes,
                                             std::vector<DecayRun> decay0, size_t embed_floats, size_t held_floats,
                                             Hooks hooks)
    : job_(job),
      model_(model),
      layout_(layout),
      rank_(rank),
      ranks_(ranks),
      accum_(accum),
      sampler_(sampler),
      store_(store),
      recorder_(recorder),
      device_(device),
      decay0_(std::move(decay0)),
      hooks_(std::move(hooks)),
      lanes_(lanes),
      embed_grad_(embed_floats, 0.0f) {
  static_assert(kHeldRowArrays == 2 * 4, "held_ and merging_, four arrays each");
  for (HeldRows* h : {&held_, &merging_}) {
    for (std::vector<float>* a : {&h->grad, &h->master, &h->m, &h->v}) a->reserve(held_floats / kHeldRowArrays);
  }
}

// The held values of `held` within the piece [begin, end) of the shard into
// the piece's master and moments.
void SplitEmbeddingUpdater::MergeHeld(const HeldRows& held, size_t begin, size_t end, float* master, float* m,
                                      float* v) {
  ForEachHeld(held.ranges, begin, end, [&](size_t lo, size_t hi, size_t at) {
    const size_t n = (hi - lo) * sizeof(float);
    std::memcpy(master + (lo - begin), &held.master[at], n);
    std::memcpy(m + (lo - begin), &held.m[at], n);
    std::memcpy(v + (lo - begin), &held.v[at], n);
  });
}

// The shard's elements the last micro-batch's lookup may give a gradient:
// block 0 outside the token matrix, and the token rows any rank looks up.
void SplitEmbeddingUpdater::PlanHeldRows(int64_t step) {
  HeldRows* held = &held_;
  held->ranges.clear();
  const int64_t count = int64_t(layout_->counts[0]), lo = rank_ * count, hi = lo + count;
  const int64_t mb = job_->train.micro_batch, T = job_->model.seq_len, C = job_->model.hidden;
  looked_up_.assign(size_t(job_->model.vocab), 0);  // capacity kept: no allocation after the first step
  row_tokens_.resize(size_t(T + 1));
  for (int r = 0; r < ranks_; ++r) {
    const int first = r * (job_->train.global_batch / ranks_) + (accum_ - 1) * int(mb);
    for (int i = 0; i < mb; ++i) {
      sampler_->Sequence(step, first + i, row_tokens_.data());
      for (int64_t t = 0; t < T; ++t) looked_up_[size_t(row_tokens_[size_t(t)])] = 1;
    }
  }
  size_t at = 0;
  auto add = [&](int64_t b, int64_t e) {  // block-0 elements [b, e), clipped to this rank's shard
    b = std::max(b, lo), e = std::min(e, hi);
    if (b >= e) return;
    const size_t sb = size_t(b - lo), se = size_t(e - lo);
    if (!held->ranges.empty() && held->ranges.back().end == sb) {
      held->ranges.back().end = se;
    } else {
      held->ranges.push_back({sb, se, at});
    }
    at += se - sb;
  };
  for (const ParamSlot& p : model_->layout(0).params) {  // in offset order
    if (p.name != "embed.tokens") {
      add(p.offset, p.offset + p.numel);
      continue;
    }
    for (int64_t row = 0; row < job_->model.vocab; ++row) {
      if (looked_up_[size_t(row)]) add(p.offset + row * C, p.offset + (row + 1) * C);
    }
  }
  held->grad.resize(at);
  held->master.resize(at);
  held->m.resize(at);
  held->v.resize(at);
  held->updated = false;
}

Status SplitEmbeddingUpdater::Early(const float* grad, int64_t step) {
  std::swap(merging_, held_);  // the previous step's held rows: merged into the pieces as they pass
  PlanHeldRows(step);
  {
    LaneTimer busy(lanes_, StepLane::kOptimizer);
    for (const HeldRange& r : held_.ranges) {
      std::memcpy(&held_.grad[r.at], grad + r.begin, (r.end - r.begin) * sizeof(float));
    }
    // Elsewhere the lookup adds +0: as the unsplit update's sum does, a -0 becomes +0.
    const size_t n = layout_->counts[0];
    for (size_t j = 0; j < n; ++j) embed_grad_[j] = grad[j] + 0.0f;
  }
  stage_ = 0;
  done_ = 0;
  streaming_ = true;
  return Stream();
}

// Stage s of L (the head's, then after each layer's backward but the first
// layer's) updates the pieces up to ceil(P s / L).
Status SplitEmbeddingUpdater::Stream() {
  const int pieces = layout_->Pieces(0, ShardKind::kAdamM);
  if (!streaming_) return Status::Ok();
  const int stages = std::max(1, job_->model.layers);
  ++stage_;
  return ContinueUpdate(std::min(pieces, (pieces * stage_ + stages - 1) / stages));
}

Status SplitEmbeddingUpdater::ContinueUpdate(int upto) {
  const int pieces = layout_->Pieces(0, ShardKind::kAdamM);
  if (upto <= done_) return Status::Ok();
  TC_RETURN_IF_ERROR(hooks_.update_pieces(embed_grad_.data(), done_, upto));
  done_ = upto;
  if (done_ == pieces) {
    streaming_ = false;
    merging_.ranges.clear();
    merging_.updated = false;
  }
  return Status::Ok();
}

void SplitEmbeddingUpdater::SwapHeldRows(size_t begin, size_t end, float* master, float* m, float* v) {
  if (merging_.updated) MergeHeld(merging_, begin, end, master, m, v);
  ForEachHeld(held_.ranges, begin, end, [&](size_t lo, size_t hi, size_t at) {
    const size_t n = (hi - lo) * sizeof(float);
    std::memcpy(&held_.master[at], master + (lo - begin), n);
    std::memcpy(&held_.m[at], m + (lo - begin), n);
    std::memcpy(&held_.v[at], v + (lo - begin), n);
  });
}

void SplitEmbeddingUpdater::ForEachUnheld(size_t begin, size_t end,
                                          const std::function<void(size_t, size_t)>& f) const {
  size_t at = begin;
  ForEachHeld(held_.ranges, begin, end, [&](size_t lo, size_t hi, size_t) {
    if (at < lo) f(at, lo);
    at = hi;
  });
  if (at < end) f(at, end);
}

Status SplitEmbeddingUpdater::Late(const float* lookup) {
  TC_RETURN_IF_ERROR(ContinueUpdate(layout_->Pieces(0, ShardKind::kAdamM)));  // every part first
  {
    LaneTimer busy(lanes_, StepLane::kOptimizer);
    for (const HeldRange& r : held_.ranges) {
      for (size_t j = 0; j < r.end - r.begin; ++j) held_.grad[r.at + j] = held_.grad[r.at + j] + lookup[r.begin + j];
    }
    // In runs of one decay setting over the held arrays (the ranges are in shard order there too).
    size_t run_at = 0, run_n = 0;
    bool run_decay = false;
    auto flush = [&] {
      if (run_n == 0) return;
      hooks_.adamw(run_decay, run_n, &held_.master[run_at], &held_.grad[run_at], &held_.m[run_at], &held_.v[run_at]);
      run_n = 0;
    };
    for (const DecayRun& d : decay0_) {
      ForEachHeld(held_.ranges, d.begin, d.end, [&](size_t lo, size_t hi, size_t at) {
        if (run_n > 0 && (run_decay != d.decay || run_at + run_n != at)) flush();
        if (run_n == 0) run_at = at, run_decay = d.decay;
        run_n += hi - lo;
      });
    }
    flush();
  }
  // The held rows of the 16-bit parameter: where its current copy is. On a
  // CPU the device tier is host memory, written in place (the next forward
  // finds it there); on a GPU the host copy is written and fetched again.
  TensorCache* cache = store_->cache();
  const Tier tier = cache != nullptr && !device_.cuda() &&
                            cache->IsResident(ShardTensorId(0, ShardKind::kParam), Tier::kDevice)
                        ? Tier::kDevice
                        : Tier::kHost;
  {
    TC_ASSIGN_OR_RETURN(ShardRef param, recorder_->Acquire(0, ShardKind::kParam, 0, tier, AccessMode::kWrite));
    for (const HeldRange& r : held_.ranges) {
      hooks_.write_compute_copy(param, r.begin, r.end - r.begin, &held_.master[r.at]);
    }
  }
  held_.updated = true;
  return Status::Ok();
}

Status SplitEmbeddingUpdater::Flush() {
  if (!held_.updated) return Status::Ok();
  for (int i = 0; i < layout_->Pieces(0, ShardKind::kAdamM); ++i) {
    const size_t begin = layout_->PieceBegin(0, ShardKind::kAdamM, i);
    const size_t end = begin + layout_->PieceCount(0, ShardKind::kAdamM, i);
    TC_ASSIGN_OR_RETURN(ShardRef master, store_->Acquire(0, ShardKind::kMaster, i, Tier::kHost, AccessMode::kWrite));
    TC_ASSIGN_OR_RETURN(ShardRef m, store_->Acquire(0, ShardKind::kAdamM, i, Tier::kHost, AccessMode::kWrite));
    TC_ASSIGN_OR_RETURN(ShardRef v, store_->Acquire(0, ShardKind::kAdamV, i, Tier::kHost, AccessMode::kWrite));
    MergeHeld(held_, begin, end, master.f32(), m.f32(), v.f32());
  }
  held_.ranges.clear();
  held_.updated = false;
  return Status::Ok();
}

uint64_t SplitEmbeddingUpdater::embed_grad_bytes() const { return uint64_t(embed_grad_.capacity()) * sizeof(float); }

uint64_t SplitEmbeddingUpdater::held_rows_bytes() const {
  auto bytes = [](const std::vector<float>& a) { return uint64_t(a.capacity()) * sizeof(float); };
  uint64_t n = 0;
  for (const HeldRows* h : {&held_, &merging_}) n += bytes(h->grad) + bytes(h->master) + bytes(h->m) + bytes(h->v);
  return n;
}

}  // namespace tencache
