#include "trainer_fixture.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <thread>

namespace tencache {

namespace fs = std::filesystem;

const char kCorpus[] = "/usr/share/common-licenses/GPL-3";  // on every Debian machine

std::string NvmeDir(const std::string& tag) {
  return (fs::temp_directory_path() / ("tencache_trainer_test_" + std::to_string(::getpid()) + "_" + tag)).string();
}

JobSpec SmallJob(const std::string& policy, const std::string& tag, std::vector<std::string> extra) {
  std::vector<std::string> sets = {"cache.policy=" + policy, "cache.nvme_path=" + NvmeDir(tag)};
  sets.insert(sets.end(), extra.begin(), extra.end());
  std::string text = std::string("name: t\nmodel: {preset: tiny, layers: 2, hidden: 64, heads: 4, ffn_hidden: 256, seq_len: 32, dtype: fp32}\n") +
                     "train: {data: " + kCorpus + ", micro_batch: 2, global_batch: 8, lr: 3.0e-3, seed: 5}\n";
  StatusOr<JobSpec> job = ParseJobText(text, "test.yaml", sets);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return *job;
}

std::shared_ptr<const TokenCorpus> Corpus() {
  static std::shared_ptr<const TokenCorpus> corpus = *TokenCorpus::Open(kCorpus);
  return corpus;
}

std::vector<StepMetrics> Train(const JobSpec& job, Communicator* comm, int steps) {
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comm, Corpus(), [](const std::string&) {});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  std::vector<StepMetrics> out;
  if (!t.ok()) return out;
  for (int s = 0; s < steps; ++s) {
    StatusOr<StepMetrics> m = (*t)->Step();
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) break;
    out.push_back(*m);
  }
  return out;
}

std::vector<StepMetrics> TrainOnRanks(const JobSpec& job, int ranks, int steps) {
  auto comms = MakeThreadCommunicators(ranks, 120000);
  std::vector<std::vector<StepMetrics>> per_rank(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { per_rank[r] = Train(job, comms[r].get(), steps); });
  }
  for (auto& t : threads) t.join();
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(per_rank[r].size(), per_rank[0].size());
  return per_rank[0];
}

ReferenceGpt InitialReference(const JobSpec& job) {
  DecoderModel model(job.model);
  ReferenceGpt ref(job.model);
  for (int b = 0; b < model.num_blocks(); ++b) {
    std::vector<float> flat(model.layout(b).numel);
    model.InitBlock(b, job.train.seed, flat.data());
    ref->LoadBlock(b, flat);
  }
  return ref;
}

std::vector<double> ReferenceLosses(
    const JobSpec& job, int steps,
    const std::function<std::unique_ptr<torch::optim::Optimizer>(ReferenceGpt&)>& make_opt,
    const std::function<void(torch::optim::Optimizer&, int)>& before_step,
    const std::function<void(ReferenceGpt&, int)>& after_backward) {
  torch::manual_seed(0);
  ReferenceGpt ref = InitialReference(job);
  std::unique_ptr<torch::optim::Optimizer> opt = make_opt(ref);
  BatchSampler sampler(Corpus(), job.model.seq_len, job.train.global_batch, job.train.seed);
  const int G = job.train.global_batch, T = job.model.seq_len;
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    if (before_step) before_step(*opt, s);
    torch::Tensor seqs = torch::empty({G, T + 1}, torch::kLong);
    for (int j = 0; j < G; ++j) sampler.Sequence(s, j, seqs[j].data_ptr<int64_t>());
    opt->zero_grad();
    torch::Tensor loss = ref->forward(seqs.narrow(1, 0, T), seqs.narrow(1, 1, T));
    loss.backward();
    if (after_backward) after_backward(ref, s);
    opt->step();
    out.push_back(loss.item<double>());
  }
  return out;
}

void ExpectLossesWithin(const std::vector<StepMetrics>& ours, const std::vector<double>& want, double rel) {
  ASSERT_EQ(ours.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    EXPECT_LT(std::fabs(ours[s].loss - want[s]) / want[s], rel) << "step " << s << ": " << ours[s].loss << " vs " << want[s];
  }
}

}  // namespace tencache
