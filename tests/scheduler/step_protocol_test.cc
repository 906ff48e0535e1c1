#include "scheduler/step_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tencache {
namespace {

// Two blocks of one 16-bit piece each: forward 0, 1, backward 1, 0, then (when
// `updates`) the deferred updates 0, 1.
Trace DeferredTrace(bool updates) {
  Trace t;
  t.header.dtype = "bf16";
  t.header.deferred_updates = true;
  double now = 0;
  auto access = [&](int id, Phase phase) {
    TraceEvent e;
    e.id = TensorId(id);
    e.name = "block" + std::to_string(id) + ".param";
    e.phase = phase;
    e.block = id;
    e.bytes = 4096;
    e.start_s = now;
    e.end_s = now += 1e-3;
    t.events.push_back(e);
  };
  access(0, Phase::kForward);
  access(1, Phase::kForward);
  access(1, Phase::kBackward);
  access(0, Phase::kBackward);
  if (updates) {
    access(0, Phase::kOptimizer);
    access(1, Phase::kOptimizer);
  }
  return t;
}

std::vector<std::string> Described(const Trace& trace) {
  std::vector<std::string> out;
  for (const StepEvent& e : DeriveStepEvents(trace, StepShapeOf(trace)).events) out.push_back(DescribeStepEvent(e));
  return out;
}

// Deferred: every contribution is stored, and each update reads its gradient
// back and consumes it before its states.
TEST(StepProtocol, ADeferredStepStoresEveryGradientAndEachUpdateConsumesIt) {
  const std::vector<std::string> want = {
      "acquire block0.param[0] device read", "end block0 fwd",
      "acquire block1.param[0] device read", "end block1 fwd",
      "acquire block1.param[0] device read", "end block1 bwd",
      "acquire block1.grad[0] host overwrite",
      "acquire block0.param[0] device read", "end block0 bwd",
      "acquire block0.grad[0] host overwrite",
      "acquire block0.grad[0] host read", "invalidate block0.grad[0]",
      "acquire block0.master[0] host write", "acquire block0.adam_m[0] host write",
      "acquire block0.adam_v[0] host write", "acquire block0.param[0] host overwrite", "end block0 optimizer",
      "acquire block1.grad[0] host read", "invalidate block1.grad[0]",
      "acquire block1.master[0] host write", "acquire block1.adam_m[0] host write",
      "acquire block1.adam_v[0] host write", "acquire block1.param[0] host overwrite", "end block1 optimizer"};
  EXPECT_EQ(Described(DeferredTrace(true)), want);
  // Not deferred, the same accesses store nothing: each gradient goes to its update.
  Trace plain = DeferredTrace(true);
  plain.header.deferred_updates = false;
  for (const std::string& e : Described(plain)) EXPECT_EQ(e.find("grad"), std::string::npos) << e;
}

// A deferred step without updates was skipped (fp16 overflow): its stored
// gradients are consumed unread at the end.
TEST(StepProtocol, ASkippedDeferredStepConsumesEveryStoredGradient) {
  const std::vector<std::string> got = Described(DeferredTrace(false));
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(got[got.size() - 2], "invalidate block0.grad[0]");
  EXPECT_EQ(got[got.size() - 1], "invalidate block1.grad[0]");
}

// Each trace event's events are one contiguous run of the stream.
TEST(StepProtocol, EachTraceEventOwnsAContiguousRun) {
  const Trace trace = DeferredTrace(true);
  const StepStream s = DeriveStepEvents(trace, StepShapeOf(trace));
  ASSERT_EQ(s.begin.size(), trace.events.size() + 1);
  EXPECT_EQ(s.begin.front(), 0u);
  EXPECT_EQ(s.begin.back(), s.events.size());
  for (size_t i = 0; i < trace.events.size(); ++i) {
    ASSERT_LT(s.begin[i], s.begin[i + 1]) << "event " << i;
    int ends = 0;
    for (size_t k = s.begin[i]; k < s.begin[i + 1]; ++k) {
      EXPECT_EQ(s.source[k], i);
      if (s.events[k].kind != StepEventKind::kAccessEnd) continue;
      ++ends;
      EXPECT_EQ(s.events[k].block, trace.events[i].block) << "event " << i;
      EXPECT_EQ(s.events[k].phase, trace.events[i].phase) << "event " << i;
    }
    EXPECT_EQ(ends, 1) << "event " << i;  // its own AccessEnd, and no other
  }
}

}  // namespace
}  // namespace tencache
