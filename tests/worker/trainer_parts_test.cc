// The Trainer's collaborators on their own (LossScale, DeferredUpdater,
// AccessRecorder), and the event stream a training step records.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/profiler.h"
#include "scheduler/step_events.h"
#include "trainer_fixture.h"
#include "worker/access_recorder.h"
#include "worker/deferred_updater.h"
#include "worker/shard_store.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

TEST(LossScale, HalvesOnOverflowAndDoublesAfterAWindowOfGoodSteps) {
  LossScale s(/*dynamic=*/true, 1024.0, /*window=*/3);
  EXPECT_EQ(s.scale(), 1024.0);
  s.Good();
  s.Good();
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.good_steps(), 2);
  s.Overflow();  // the count starts again
  EXPECT_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.good_steps(), 0);
  s.Good();
  s.Good();
  EXPECT_EQ(s.scale(), 512.0);
  s.Good();
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.good_steps(), 0);
  s.Restore(8.0, 2);
  s.Good();
  EXPECT_EQ(s.scale(), 16.0);
  LossScale fixed(/*dynamic=*/false, 1024.0, 3);
  EXPECT_EQ(fixed.scale(), 1.0);
}

// Two blocks of 8 fp32 elements on one rank, in memory.
struct Rig {
  Rig() : profiler(TraceHeader(), [](const std::string&) {}), comm(MakeSoloCommunicator()) {
    layout = MakeShardLayout({8, 8}, /*layers=*/0, DType::kFp32, 1);
    store = MakeMemoryShardStore(layout);
    recorder = std::make_unique<AccessRecorder>(store.get(), &layout, &profiler, ComputeDevice());
  }
  ShardLayout layout;
  std::unique_ptr<ShardStore> store;
  Profiler profiler;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<AccessRecorder> recorder;
  LaneBusy lanes;
};

struct Updated {
  int block;
  std::vector<float> grad;
};

std::unique_ptr<DeferredUpdater> MakeUpdater(Rig* rig, const TrainSpec& train, bool fp16, std::vector<Updated>* out) {
  return std::make_unique<DeferredUpdater>(train, fp16, &rig->layout, rig->recorder.get(), rig->comm.get(),
                                           &rig->lanes, 8, [out](int b, const float* grad) {
                                             out->push_back({b, std::vector<float>(grad, grad + 8)});
                                             return Status::Ok();
                                           });
}

TEST(DeferredUpdater, UnscalesStoredGradientsAndUpdatesEveryBlockInOrder) {
  Rig rig;
  TrainSpec train;
  train.initial_loss_scale = 4.0;
  train.loss_scale_window = 2;
  std::vector<Updated> updated;
  auto u = MakeUpdater(&rig, train, /*fp16=*/true, &updated);
  for (int step = 0; step < 2; ++step) {
    rig.recorder->BeginStep();
    u->BeginStep();
    EXPECT_EQ(u->step_loss_scale(), 4.0);
    std::vector<float> g1(8, 2.0f), g0(8, 1.0f);
    ASSERT_TRUE(u->Store(1, g1.data(), false).ok());  // blocks complete in any order
    {  // block 0's earlier contribution, stored as the trainer accumulates it
      StatusOr<ShardRef> stored = rig.recorder->Acquire(0, ShardKind::kGrad, 0, Tier::kHost, AccessMode::kOverwrite);
      ASSERT_TRUE(stored.ok());
      std::fill(stored->f32(), stored->f32() + 8, 1.0f);
    }
    ASSERT_TRUE(u->Store(0, g0.data(), /*add_stored=*/true).ok());  // the last one: 2 each
    updated.clear();
    ASSERT_TRUE(u->Apply(step).ok());
    ASSERT_EQ(updated.size(), 2u);
    EXPECT_EQ(updated[0].block, 0);
    EXPECT_EQ(updated[1].block, 1);
    for (const Updated& x : updated) EXPECT_EQ(x.grad, std::vector<float>(8, 0.5f)) << "block " << x.block;
    EXPECT_FALSE(u->step_skipped());
    EXPECT_DOUBLE_EQ(u->step_grad_norm(), std::sqrt(16 * 4.0) / 4.0);
  }
  EXPECT_EQ(u->loss_scale(), 8.0);  // two good steps: the window
  EXPECT_EQ(u->good_steps(), 0);
  // The recorder saw each stored piece consumed: read, then invalidated.
  const std::vector<StepEvent>& ev = rig.recorder->events();
  int reads = 0, invalidates = 0;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == StepEventKind::kInvalidate) {
      ++invalidates;
      ASSERT_GT(i, 0u);
      EXPECT_EQ(ev[i - 1], StepEvent::Acquire(ev[i].block, kStateGrad, 0, Tier::kHost, AccessMode::kRead));
    }
    if (ev[i].kind == StepEventKind::kAcquire && ev[i].mode == AccessMode::kRead) ++reads;
  }
  EXPECT_EQ(reads, 2);
  EXPECT_EQ(invalidates, 2);
}

TEST(DeferredUpdater, AnOverflowSkipsTheUpdateAndHalvesTheScale) {
  Rig rig;
  TrainSpec train;
  train.initial_loss_scale = 64.0;
  std::vector<Updated> updated;
  auto u = MakeUpdater(&rig, train, /*fp16=*/true, &updated);
  rig.recorder->BeginStep();
  u->BeginStep();
  std::vector<float> g(8, 1.0f), bad(8, 1.0f);
  bad[3] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(u->Store(0, g.data(), false).ok());
  ASSERT_TRUE(u->Store(1, bad.data(), false).ok());
  ASSERT_TRUE(u->Apply(0).ok());
  EXPECT_TRUE(updated.empty());
  EXPECT_TRUE(u->step_skipped());
  EXPECT_EQ(u->skipped_steps(), 1);
  EXPECT_EQ(u->step_loss_scale(), 64.0);
  EXPECT_EQ(u->loss_scale(), 32.0);
  // In fp32 a non-finite gradient fails the step, naming it.
  Rig rig32;
  auto u32 = MakeUpdater(&rig32, TrainSpec(), /*fp16=*/false, &updated);
  EXPECT_EQ(u32->loss_scale(), 1.0);
  u32->BeginStep();
  ASSERT_TRUE(u32->Store(0, bad.data(), false).ok());
  ASSERT_TRUE(u32->Store(1, g.data(), false).ok());
  Status s = u32->Apply(7);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("step 7"), std::string::npos) << s.ToString();
}

TEST(AccessRecorder, RecordsTrainingAccessesInOrderAndKeepsTheProfiledOnes) {
  Rig rig;
  rig.recorder->BeginStep();
  {
    StatusOr<ShardRef> p = rig.recorder->Acquire(1, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kRead);
    ASSERT_TRUE(p.ok());
  }
  ASSERT_TRUE(rig.recorder->EndAccess(1, Phase::kForward, 0, 0, 0).ok());
  {
    AccessRecorder::Unrecorded off(rig.recorder.get());  // evaluation: not the step's
    EXPECT_FALSE(rig.recorder->recording());
    ASSERT_TRUE(rig.recorder->Acquire(0, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kRead).ok());
    ASSERT_TRUE(rig.recorder->EndAccess(0, Phase::kForward, 0, 0, 0).ok());
  }
  EXPECT_TRUE(rig.recorder->recording());
  ASSERT_TRUE(rig.recorder->Acquire(0, ShardKind::kAdamV, 0, Tier::kHost, AccessMode::kWrite).ok());
  ASSERT_TRUE(rig.recorder->Acquire(0, ShardKind::kGrad, 0, Tier::kHost, AccessMode::kRead).ok());
  rig.recorder->Invalidate(0, ShardKind::kGrad, 0);
  ASSERT_TRUE(rig.recorder->EndAccess(0, Phase::kOptimizer, 0, 0, 0, 0, 1).ok());
  const std::vector<StepEvent> want = {
      StepEvent::Acquire(1, kStateParam, 0, Tier::kDevice, AccessMode::kRead),
      StepEvent::AccessEnd(1, Phase::kForward),
      StepEvent::Acquire(0, kStateAdamV, 0, Tier::kHost, AccessMode::kWrite),
      StepEvent::Acquire(0, kStateGrad, 0, Tier::kHost, AccessMode::kRead),
      StepEvent::Invalidate(0, kStateGrad, 0),
      StepEvent::AccessEnd(0, Phase::kOptimizer, 0, 1),
  };
  EXPECT_EQ(rig.recorder->events(), want);
  EXPECT_TRUE(rig.recorder->profiled_events().empty());
  rig.recorder->KeepAsProfile();
  EXPECT_EQ(rig.recorder->profiled_events(), want);
  const std::vector<TensorId> order = {rig.layout.Id(1, ShardKind::kParam), rig.layout.Id(0, ShardKind::kAdamV),
                                       rig.layout.Id(0, ShardKind::kGrad)};
  EXPECT_EQ(rig.recorder->acquire_order(), order);
  rig.recorder->BeginStep();  // the next step starts afresh; the profile's stay
  EXPECT_TRUE(rig.recorder->events().empty());
  EXPECT_EQ(rig.recorder->profiled_events(), want);
}

// The profiled step's events against its trace: one access end per trace
// access, in the trace's order, every acquire of the step recorded, and every
// consumed stored gradient acquired (read) right before it is invalidated.
void ExpectEventsMatchTheProfile(const Trainer& t) {
  const std::vector<StepEvent>& ev = t.profiled_events();
  std::vector<StepEvent> ends;
  int acquires = 0;
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == StepEventKind::kAccessEnd) ends.push_back(ev[i]);
    if (ev[i].kind == StepEventKind::kAcquire) ++acquires;
    if (ev[i].kind == StepEventKind::kInvalidate) {
      ASSERT_GT(i, 0u);
      EXPECT_EQ(ev[i - 1], StepEvent::Acquire(ev[i].block, kStateGrad, ev[i].piece, Tier::kHost, AccessMode::kRead))
          << DescribeStepEvent(ev[i - 1]);
    }
  }
  std::vector<StepEvent> accesses;
  for (const TraceEvent& e : t.profiler().profile().events) {
    if (e.kind != EventKind::kAccess) continue;
    accesses.push_back(StepEvent::AccessEnd(e.block, e.phase, e.pieces_begin, e.pieces_end));
  }
  EXPECT_EQ(ends, accesses);
  EXPECT_GT(acquires, int(accesses.size()));  // each access acquires its parameters; updates their states too
  // Every access's parameters are acquired on the device before its end.
  size_t at = 0;
  for (const StepEvent& end : ends) {
    if (end.phase == Phase::kOptimizer) continue;
    bool acquired = false;
    for (; at < ev.size() && !(ev[at] == end); ++at) {
      if (ev[at].kind == StepEventKind::kAcquire && ev[at].tier == Tier::kDevice) acquired = true;
    }
    EXPECT_TRUE(acquired) << DescribeStepEvent(end);
    ++at;
  }
}

TEST(Trainer, TheProfiledStepsEventsFollowItsTrace) {
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{"model.dtype=bf16"}, {"train.grad_clip=1.0"}}) {
    auto solo = MakeSoloCommunicator();
    StatusOr<std::unique_ptr<Trainer>> t =
        Trainer::Create(SmallJob("tencache", "events", extra), solo.get(), Corpus(), [](const std::string&) {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_TRUE((*t)->profiled_events().empty());
    ASSERT_TRUE((*t)->Step().ok());
    ExpectEventsMatchTheProfile(**t);
    const std::vector<StepEvent> first = (*t)->profiled_events();
    bool invalidates = false;
    for (const StepEvent& e : first) invalidates |= e.kind == StepEventKind::kInvalidate;
    EXPECT_TRUE(invalidates) << extra[0];  // accumulation (and deferral) consume stored gradients
    StatusOr<std::string> sample = (*t)->Sample("a", 2);  // unrecorded
    ASSERT_TRUE(sample.ok());
    ASSERT_TRUE((*t)->Step().ok());  // follows the profile: the profile's events stay
    EXPECT_EQ((*t)->profiled_events(), first);
    t->reset();
    fs::remove_all(NvmeDir("events"));
  }
}

}  // namespace
}  // namespace tencache
