// The worker's events in a training step are the step protocol's for its
// trace (scheduler/step_protocol.h): for a grid of small jobs, the profiled
// step's acquires, consumed gradient pieces and access ends, in order, equal
// what DeriveStepEvents derives from the profile.
#include "scheduler/step_protocol.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "trainer_fixture.h"
#include "worker/communicator.h"

namespace tencache {
namespace {

// "" when equal; otherwise the first differing event, with the two before it.
std::string FirstDifference(const std::vector<StepEvent>& worker, const std::vector<StepEvent>& protocol) {
  const size_t n = std::min(worker.size(), protocol.size());
  size_t i = 0;
  while (i < n && worker[i] == protocol[i]) ++i;
  if (i == n && worker.size() == protocol.size()) return "";
  std::string out = "event " + std::to_string(i) + " of " + std::to_string(worker.size()) + " (worker) / " +
                    std::to_string(protocol.size()) + " (protocol): worker '" +
                    (i < worker.size() ? DescribeStepEvent(worker[i]) : std::string("(none)")) + "', protocol '" +
                    (i < protocol.size() ? DescribeStepEvent(protocol[i]) : std::string("(none)")) + "'; before it:";
  for (size_t k = i >= 2 ? i - 2 : 0; k < i; ++k) out += " '" + DescribeStepEvent(worker[k]) + "'";
  return out;
}

// Two steps of `job` on this rank; what differs between the profiled step's
// events and the protocol's for its profile ("" when nothing), or the failure.
// `embed_pieces` > 0: block 0's states must be cut into that many pieces.
std::string CheckRank(const JobSpec& job, Communicator* comm, int embed_pieces = 0) {
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comm, Corpus(), [](const std::string&) {});
  if (!t.ok()) return "Create: " + t.status().ToString();
  for (int s = 0; s < 2; ++s) {
    StatusOr<StepMetrics> m = (*t)->Step();
    if (!m.ok()) return "step " + std::to_string(s) + ": " + m.status().ToString();
  }
  const Trace& profile = (*t)->profiler().profile();
  if (profile.header.deferred_updates != DeferredUpdates(job)) return "the trace header's deferred_updates is wrong";
  StepShape shape = StepShapeOf(profile);
  shape.late_rows_tier = Tier::kDevice;  // on the CPU the device tier is host memory, holding the embedding
  if (embed_pieces > 0 && shape.pieces[0] != embed_pieces) {
    return "block 0's states in " + std::to_string(shape.pieces[0]) + " pieces, expected " +
           std::to_string(embed_pieces);
  }
  const std::vector<StepEvent> protocol = DeriveStepEvents(profile, shape).events;
  if (protocol.empty()) return "the protocol derived no events";
  return FirstDifference((*t)->profiled_events(), protocol);
}

TEST(StepProtocol, TheWorkersEventsAreTheProtocolsForItsProfile) {
  int checked = 0;
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    for (bool tied : {true, false}) {
      for (int accum : {1, 2}) {
        for (bool clip : {false, true}) {
          if (std::string(dtype) == "fp16" && clip) continue;  // fp16 defers its updates either way
          for (int ranks : {1, 2}) {
            const std::string name = std::string(dtype) + (tied ? " tied" : " untied") + ", accumulation " +
                                     std::to_string(accum) + (clip ? ", grad_clip" : "") + ", ranks " +
                                     std::to_string(ranks);
            SCOPED_TRACE(name);
            const std::string tag = "protocol" + std::to_string(checked);
            const JobSpec job = SmallJob(
                "tencache", tag,
                {std::string("model.dtype=") + dtype, std::string("model.tied_embeddings=") + (tied ? "true" : "false"),
                 "train.global_batch=" + std::to_string(2 * ranks * accum),
                 std::string("train.grad_clip=") + (clip ? "1.0" : "0")});
            std::vector<std::string> diff(static_cast<size_t>(ranks));
            auto comms = MakeThreadCommunicators(ranks, 120000);
            std::vector<std::thread> threads;
            for (int r = 0; r < ranks; ++r) {
              threads.emplace_back([&, r] { diff[size_t(r)] = CheckRank(job, comms[size_t(r)].get()); });
            }
            for (std::thread& th : threads) th.join();
            for (int r = 0; r < ranks; ++r) EXPECT_EQ(diff[size_t(r)], "") << "rank " << r;
            std::filesystem::remove_all(NvmeDir(tag));
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 40);
}

// An embedding five times a layer has its states cut into 6 pieces: the split
// update streams in parts (each acquiring the parameter after its first
// piece), accumulating over micro-batches, and deferred with gradient clipping.
TEST(StepProtocol, TheWorkersEventsAreTheProtocolsWithAnEmbeddingInPieces) {
  for (const char* dtype : {"fp32", "bf16"}) {
    for (bool clip : {false, true}) {
      SCOPED_TRACE(std::string(dtype) + (clip ? ", grad_clip" : ""));
      const JobSpec job = SmallJob("tencache", "protocol-pieces",
                                   {"model.vocab=4096", std::string("model.dtype=") + dtype, "train.global_batch=4",
                                    std::string("train.grad_clip=") + (clip ? "0.5" : "0")});
      auto solo = MakeSoloCommunicator();
      EXPECT_EQ(CheckRank(job, solo.get(), 6), "");
      std::filesystem::remove_all(NvmeDir("protocol-pieces"));
    }
  }
}

}  // namespace
}  // namespace tencache
