#include "scheduler/synth.h"

#include <gtest/gtest.h>

#include "common/model_shape.h"

namespace tencache {
namespace {

TEST(SynthTest, TinyForwardBackwardOptimizerOrder) {
  ModelShape tiny = *FindPreset("tiny");
  SynthOptions o;
  o.device_flops = 1e12;
  Trace t = *SynthesizeTrace(tiny, o);
  const auto tensors = tiny.Tensors();
  std::vector<const TraceEvent*> fwd, bwd, opt;
  for (const TraceEvent& e : t.events) {
    ASSERT_EQ(e.kind, EventKind::kAccess);  // one rank: no collectives
    (e.phase == Phase::kForward ? fwd : e.phase == Phase::kBackward ? bwd : opt).push_back(&e);
  }
  // Tied head: the embedding is used again at the end of forward / start of backward.
  ASSERT_EQ(fwd.size(), tensors.size() + 1);
  ASSERT_EQ(bwd.size(), tensors.size() + 1);
  ASSERT_EQ(opt.size(), tensors.size());
  EXPECT_EQ(fwd.front()->id, 0u);
  EXPECT_EQ(fwd.back()->id, 0u);
  EXPECT_EQ(fwd.back()->block, tiny.layers + 1);
  EXPECT_EQ(bwd.front()->id, 0u);
  EXPECT_EQ(bwd.back()->block, 0);
  for (size_t i = 1; i < bwd.size(); ++i) EXPECT_LE(bwd[i]->block, bwd[i - 1]->block);
  const double tokens = tiny.seq_len;
  const TraceEvent& q = *fwd[3];
  EXPECT_NEAR(q.duration_s(), 2.0 * tensors[q.id].numel * tokens / 1e12, 1e-15);
  EXPECT_EQ(q.bytes, tensors[q.id].numel * 2);
  for (const TraceEvent* b : bwd) {
    if (b->id == q.id) {
      EXPECT_NEAR(b->duration_s(), 3 * q.duration_s(), 1e-15);
    }
  }
}

TEST(SynthTest, RanksShardBytesAndAddCollectives) {
  SynthOptions o;
  o.ranks = 4;
  Trace t = *SynthesizeTrace(*FindPreset("tiny"), o);
  int gathers = 0, scatters = 0;
  for (const TraceEvent& e : t.events) {
    if (e.kind != EventKind::kCollective) continue;
    (e.collective == CollectiveKind::kAllGather ? gathers : scatters)++;
  }
  const int blocks = 4 + 2;
  EXPECT_EQ(gathers, 2 * blocks);
  EXPECT_EQ(scatters, blocks);
  EXPECT_EQ(t.events[1].kind, EventKind::kCollective);  // block 1 gathered one block ahead
  EXPECT_EQ(t.events[1].block, 1);
  EXPECT_EQ(t.header.ranks, 4);
  EXPECT_EQ(t.TensorBytes()[0], uint64_t(256) * 128 * 2 / 4);
}

// With optimizer_lane every update, and nothing else, runs on the optimizer
// lane; the times are those of the trace without it.
TEST(SynthTest, OptimizerLaneMarksEveryUpdate) {
  SynthOptions o;
  o.ranks = 2;
  const Trace plain = *SynthesizeTrace(*FindPreset("tiny"), o);
  o.optimizer_lane = true;
  const Trace lane = *SynthesizeTrace(*FindPreset("tiny"), o);
  ASSERT_EQ(lane.events.size(), plain.events.size());
  int updates = 0;
  for (size_t i = 0; i < lane.events.size(); ++i) {
    const TraceEvent& e = lane.events[i];
    const bool update = e.kind == EventKind::kAccess && e.phase == Phase::kOptimizer;
    updates += update;
    EXPECT_EQ(e.optimizer_lane, update) << i;
    EXPECT_FALSE(plain.events[i].optimizer_lane) << i;
    EXPECT_EQ(e.start_s, plain.events[i].start_s) << i;
    EXPECT_EQ(e.end_s, plain.events[i].end_s) << i;
  }
  EXPECT_GT(updates, 0);
}

TEST(SynthTest, RejectsBadOptions) {
  SynthOptions o;
  o.micro_batch = 0;
  EXPECT_EQ(SynthesizeTrace(*FindPreset("tiny"), o).status().code(), StatusCode::kInvalidArgument);
  o = SynthOptions();
  o.device_flops = 0;
  EXPECT_FALSE(SynthesizeTrace(*FindPreset("tiny"), o).ok());
}

}  // namespace
}  // namespace tencache
