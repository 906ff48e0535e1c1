// The training recipe beyond AdamW and its schedule: gradient clipping by the
// exact global norm (against torch.nn.utils.clip_grad_norm_), fp16 with
// dynamic loss scaling (skipped steps apply nothing), and the validation loss
// (against a plain libtorch forward on the held-out windows).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "common/status.h"
#include "reference_gpt.h"
#include "trainer_fixture.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

void ExpectBitwiseLosses(const std::vector<StepMetrics>& a, const std::vector<StepMetrics>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s].loss, b[s].loss) << what << ", step " << s;
}

// A threshold above every step's norm: the deferred updates (each gradient
// stored, the norm summed, every block updated after the backward) give the
// in-backward updates' losses bit for bit, in fp32 and bf16, with and without
// accumulation, in memory and through the NVMe tier.
TEST(Recipe, GradClipAboveTheNormChangesNothingBitwise) {
  auto solo = MakeSoloCommunicator();
  for (const char* dtype : {"fp32", "bf16"}) {
    for (const char* micro : {"2", "8"}) {  // 4 accumulation steps, or none
      const std::vector<std::string> base = {std::string("model.dtype=") + dtype, std::string("train.micro_batch=") + micro};
      const std::string what = std::string(dtype) + ", micro_batch " + micro;
      std::vector<StepMetrics> plain = Train(SmallJob("none", "clip-ref", base), solo.get(), 10);
      std::vector<std::string> clip = base;
      clip.push_back("train.grad_clip=1e9");
      std::vector<StepMetrics> clipped = Train(SmallJob("none", "clip", clip), solo.get(), 10);
      ExpectBitwiseLosses(plain, clipped, what);
      for (const StepMetrics& m : plain) EXPECT_EQ(m.grad_norm, -1) << what;  // not computed
      for (const StepMetrics& m : clipped) EXPECT_GT(m.grad_norm, 0) << what;
      clip.insert(clip.end(), {"cache.device_budget=320KiB", "cache.host_budget=1536KiB"});
      std::vector<StepMetrics> cached = Train(SmallJob("tencache", "clip-nvme", clip), solo.get(), 10);
      ExpectBitwiseLosses(plain, cached, what + ", cached");
      double nvme = 0;
      for (const StepMetrics& m : cached) nvme += m.bytes[Link::kNvmeRead];
      EXPECT_GT(nvme, 0) << what;
      fs::remove_all(NvmeDir("clip-nvme"));
    }
  }
}

// The tied embedding's split update (after the head's backward, the rows the
// lookups of the last micro-batch touch after the lookup's) against the whole
// update after the backward (deferred by a threshold never reached), on two
// ranks: each rank holds back the rows any rank looks up, bit for bit.
TEST(Recipe, TheSplitEmbeddingUpdateEqualsTheWholeUpdateOnTwoRanks) {
  for (const char* policy : {"none", "tencache"}) {
    for (const char* micro : {"2", "4"}) {  // 2 accumulation steps a rank, or none
      std::vector<std::string> base = {"model.dtype=bf16", std::string("train.micro_batch=") + micro};
      if (std::string(policy) == "tencache") base.insert(base.end(), {"cache.device_budget=160KiB", "cache.host_budget=1MiB"});
      const std::string what = std::string(policy) + ", micro_batch " + micro;
      std::vector<StepMetrics> split = TrainOnRanks(SmallJob(policy, "split2", base), 2, 8);
      base.push_back("train.grad_clip=1e9");
      std::vector<StepMetrics> whole = TrainOnRanks(SmallJob(policy, "whole2", base), 2, 8);
      ASSERT_EQ(split.size(), 8u) << what;
      ExpectBitwiseLosses(split, whole, what);
      for (const char* tag : {"split2", "whole2"}) fs::remove_all(NvmeDir(tag));
    }
  }
}

// A threshold below the norm clips every step as torch does after the backward.
TEST(Recipe, GradClipEqualsTorchClipGradNorm) {
  JobSpec job = SmallJob("none", "clip-torch", {"train.grad_clip=0.25"});
  auto solo = MakeSoloCommunicator();
  std::vector<StepMetrics> ours = Train(job, solo.get(), 12);
  ASSERT_EQ(ours.size(), 12u);
  int clipped = 0;
  for (const StepMetrics& m : ours) clipped += m.grad_norm > 0.25;
  EXPECT_GE(clipped, 10);  // the threshold binds
  std::vector<double> want = ReferenceLosses(
      job, 12,
      [&](ReferenceGpt& ref) {
        return std::make_unique<torch::optim::AdamW>(ref->parameters(),
                                                     torch::optim::AdamWOptions(job.train.lr).weight_decay(0.0));
      },
      nullptr, [](ReferenceGpt& ref, int) { torch::nn::utils::clip_grad_norm_(ref->parameters(), 0.25); });
  ExpectLossesWithin(ours, want, 1e-4);
  // Without clipping the run differs: the comparison above can fail.
  std::vector<StepMetrics> free = Train(SmallJob("none", "clip-free"), solo.get(), 12);
  EXPECT_GT(std::fabs(free[11].loss - ours[11].loss), 1e-3);
}

// The norm is global: each rank's shard adds its squares, all ranks sum them.
TEST(Recipe, ClippedRunOnTwoRanksMatchesOneRank) {
  JobSpec job = SmallJob("none", "clip-ranks", {"train.grad_clip=0.25"});
  auto solo = MakeSoloCommunicator();
  std::vector<StepMetrics> one = Train(job, solo.get(), 8);
  std::vector<StepMetrics> two = TrainOnRanks(job, 2, 8);
  ASSERT_EQ(two.size(), one.size());
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_NEAR(two[s].loss, one[s].loss, 1e-4 * one[s].loss) << "step " << s;
    EXPECT_NEAR(two[s].grad_norm, one[s].grad_norm, 1e-4 * one[s].grad_norm) << "step " << s;
  }
}

// On this CPU an fp16 job computes in fp32 from fp16 weights, so a power-of-two
// loss scale is exact: scale 65536 gives scale 1's losses bit for bit, through
// the cache's NVMe tier too; the scale doubles after loss_scale_window steps.
TEST(Recipe, Fp16LossScalingIsExactAndGrows) {
  auto solo = MakeSoloCommunicator();
  std::vector<StepMetrics> unscaled =
      Train(SmallJob("none", "fp16-1", {"model.dtype=fp16", "train.initial_loss_scale=1"}), solo.get(), 8);
  std::vector<StepMetrics> scaled = Train(
      SmallJob("none", "fp16-s", {"model.dtype=fp16", "train.loss_scale_window=3"}), solo.get(), 8);
  ExpectBitwiseLosses(unscaled, scaled, "scale 65536");
  ASSERT_EQ(scaled.size(), 8u);
  const double want[] = {65536, 65536, 65536, 131072, 131072, 131072, 262144, 262144};
  for (int s = 0; s < 8; ++s) {
    EXPECT_EQ(scaled[s].loss_scale, want[s]) << "step " << s;
    EXPECT_FALSE(scaled[s].skipped);
  }
  EXPECT_EQ(scaled[0].job_dtype, "fp16");
  EXPECT_EQ(scaled[0].compute_dtype, "fp32");  // no fp16 kernels in this CPU libtorch
  std::vector<StepMetrics> cached = Train(SmallJob("tencache", "fp16-nvme", {"model.dtype=fp16",
                                                                             "cache.device_budget=320KiB",
                                                                             "cache.host_budget=1536KiB"}),
                                          solo.get(), 8);
  ExpectBitwiseLosses(unscaled, cached, "cached fp16");
  fs::remove_all(NvmeDir("fp16-nvme"));
  // fp16 weights follow fp32 closely.
  std::vector<StepMetrics> fp32 = Train(SmallJob("none", "fp16-32"), solo.get(), 8);
  for (int s = 0; s < 8; ++s) EXPECT_NEAR(scaled[s].loss, fp32[s].loss, 0.02 * fp32[s].loss) << "step " << s;
}

std::vector<float> Master(Trainer& t, int block) {
  std::vector<float> all;
  for (int i = 0; i < t.store()->layout().Pieces(block, ShardKind::kMaster); ++i) {
    StatusOr<ShardRef> p = t.store()->Acquire(block, ShardKind::kMaster, i, Tier::kHost, AccessMode::kRead);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (!p.ok()) return {};
    all.insert(all.end(), p->f32(), p->f32() + p->count());
  }
  return all;
}

// A scale whose scaled loss overflows: the step is skipped (weights and
// optimizer untouched), the scale halves each time, and once the gradient is
// finite the steps apply.
TEST(Recipe, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  auto solo = MakeSoloCommunicator();
  JobSpec job = SmallJob("none", "fp16-over", {"model.dtype=fp16", "train.initial_loss_scale=1e39"});
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, solo.get(), Corpus(), [](const std::string&) {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::vector<float> before = Master(**t, 1);
  StatusOr<StepMetrics> first = (*t)->Step();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->skipped);
  EXPECT_EQ(first->loss_scale, 1e39);
  EXPECT_EQ(first->skipped_steps, 1);
  EXPECT_TRUE(std::isfinite(first->loss));  // the loss itself is reported unscaled
  EXPECT_EQ(Master(**t, 1), before);        // nothing applied
  double scale = 1e39;
  int skipped = 1;
  bool applied = false;
  for (int s = 1; s < 12 && !applied; ++s) {
    StatusOr<StepMetrics> m = (*t)->Step();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    scale /= 2;
    EXPECT_EQ(m->loss_scale, scale) << "step " << s;
    skipped += m->skipped;
    EXPECT_EQ(m->skipped_steps, skipped);
    applied = !m->skipped;
  }
  EXPECT_TRUE(applied);
  EXPECT_NE(Master(**t, 1), before);
}

// The plain-libtorch model's mean loss over windows [first, first + n) of `corpus`.
double ReferenceMeanLoss(const JobSpec& job, const TokenCorpus& corpus, uint64_t first, int n) {
  torch::NoGradGuard no_grad;
  ReferenceGpt ref = InitialReference(job);
  const int T = job.model.seq_len;
  torch::Tensor seqs = torch::empty({n, T + 1}, torch::kLong);
  for (int i = 0; i < n; ++i) corpus.Window(first + uint64_t(i), T, seqs[i].data_ptr<int64_t>());
  return ref->forward(seqs.narrow(1, 0, T), seqs.narrow(1, 1, T)).item<double>();
}

// The validation loss is the model's mean loss on the last eval_split of the
// data's windows, on 1 and 2 ranks (the second rank's last pass is empty), and
// training never samples those windows.
TEST(Recipe, ValidationLossIsTheHeldOutWindowsMeanLoss) {
  JobSpec job = SmallJob("none", "eval", {"train.eval_every=2", "train.eval_sequences=6"});
  const uint64_t all = Corpus()->windows(job.model.seq_len);
  const uint64_t held = uint64_t(double(all) * 0.05);
  const double want = ReferenceMeanLoss(job, *Corpus(), all - held, 6);
  std::vector<double> got(3, 0.0);
  auto evaluate = [&](Communicator* comm, double* out) {
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comm, Corpus(), [](const std::string&) {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    StatusOr<double> loss = (*t)->Evaluate();
    ASSERT_TRUE(loss.ok()) << loss.status().ToString();
    *out = *loss;
    ASSERT_TRUE((*t)->Step().ok());  // evaluation leaves training working
  };
  auto solo = MakeSoloCommunicator();
  evaluate(solo.get(), &got[0]);
  EXPECT_NEAR(got[0], want, 1e-5 * want);
  auto comms = MakeThreadCommunicators(2, 120000);
  std::thread other([&] { evaluate(comms[1].get(), &got[2]); });
  evaluate(comms[0].get(), &got[1]);
  other.join();
  EXPECT_NEAR(got[1], want, 1e-5 * want);
  EXPECT_EQ(got[1], got[2]);

  BatchSampler sampler(Corpus(), job.model.seq_len, job.train.global_batch, job.train.seed, all - held);
  std::vector<int64_t> seq(job.model.seq_len + 1), window(job.model.seq_len + 1);
  for (int64_t step = 0; step < int64_t(all / job.train.global_batch) + 2; ++step) {  // over an epoch
    for (int j = 0; j < job.train.global_batch; ++j) {
      sampler.Sequence(step, j, seq.data());
      for (uint64_t w = all - held; w < all; ++w) {
        Corpus()->Window(w, job.model.seq_len, window.data());
        ASSERT_NE(seq, window) << "step " << step << " sampled held-out window " << w;
      }
    }
  }
}

TEST(Recipe, BadValidationAndRecipeKeysAreErrorsNamingTheKey) {
  StatusOr<JobSpec> j = ParseJobText(
      "model: {preset: tiny}\ntrain: {data: /usr/share/common-licenses/GPL-3, eval_every: 2, eval_split: 0.7}\n",
      "bad.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("train.eval_split"), std::string::npos) << j.status().message();
  j = ParseJobText("model: {preset: tiny}\ntrain: {data: /usr/share/common-licenses/GPL-3, grad_clip: -1}\n", "bad.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("train.grad_clip"), std::string::npos) << j.status().message();
  JobSpec job = SmallJob("none", "eval-bad", {"train.eval_every=1", "train.eval_data=/nonexistent/valid.txt"});
  auto solo = MakeSoloCommunicator();
  Status s = Trainer::Create(job, solo.get(), Corpus(), [](const std::string&) {}).status();
  EXPECT_EQ(ExitCodeFor(s), 2) << s.ToString();
  EXPECT_NE(s.message().find("train.eval_data"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/nonexistent/valid.txt"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tencache
