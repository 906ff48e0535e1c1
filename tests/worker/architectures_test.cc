// Every architecture ModelShape describes, trained by the worker: a tiny
// instance of each preset's architecture (GPT-2, OPT, Llama with grouped-query
// attention, Falcon with multi-query attention and parallel blocks, BLOOM with
// ALiBi over a head count that is not a power of two) gives the logits of the
// published formulas (reference_decoder.h, not the worker's code) within 1e-5
// in fp32, its gradient matches finite differences in fp64, and a cached run
// equals the in-memory reference bitwise on one rank and one rank's losses
// within 1e-4 on two.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "common/hf_layout.h"
#include "common/safetensors.h"
#include "launcher/resource_model.h"
#include "reference_decoder.h"
#include "worker/communicator.h"
#include "worker/decoder_model.h"
#include "worker/hf_checkpoint.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

struct Arch {
  const char* preset;
  std::vector<std::string> sets;  // model keys shrinking it
  const char* device_budget;      // about a third of the parameters, at least a slot of each size
  const char* host_budget;        // below the states: NVMe holds the rest
};

// Tiny shapes of each family; vocab 256 so that the byte corpus trains them.
const std::vector<Arch>& Archs() {
  static const std::vector<Arch> archs = {
      {"gpt2", {"model.layers=2", "model.hidden=32", "model.heads=4", "model.ffn_hidden=64", "model.seq_len=8",
                "model.vocab=256", "model.max_positions=16"}, "96KiB", "320KiB"},
      {"opt-1.3b", {"model.layers=2", "model.hidden=32", "model.heads=4", "model.ffn_hidden=64", "model.seq_len=8",
                    "model.vocab=256", "model.max_positions=16"}, "96KiB", "320KiB"},
      {"llama-2-7b", {"model.layers=2", "model.hidden=32", "model.heads=4", "model.kv_heads=2", "model.ffn_hidden=48",
                      "model.seq_len=8", "model.vocab=256", "model.rope_theta=500"}, "96KiB", "320KiB"},
      {"falcon-7b", {"model.layers=2", "model.hidden=32", "model.heads=4", "model.kv_heads=1", "model.ffn_hidden=64",
                     "model.seq_len=8", "model.vocab=256"}, "96KiB", "320KiB"},
      {"bloom-7b1", {"model.layers=2", "model.hidden=48", "model.heads=6", "model.ffn_hidden=192", "model.seq_len=8",
                     "model.vocab=256"}, "192KiB", "640KiB"},
  };
  return archs;
}

const char kCorpus[] = "/usr/share/common-licenses/GPL-3";

JobSpec ArchJob(const Arch& a, const std::string& policy = "none", std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = a.sets;
  sets.push_back("cache.policy=" + policy);
  sets.push_back("cache.nvme_path=" + (fs::temp_directory_path() / ("tencache_arch_" + std::to_string(getpid()))).string());
  sets.insert(sets.end(), extra.begin(), extra.end());
  StatusOr<JobSpec> job = ParseJobText(std::string("name: arch\nmodel: {preset: ") + a.preset +
                                           ", dtype: fp32}\ntrain: {data: " + kCorpus +
                                           ", micro_batch: 2, global_batch: 8, lr: 3.0e-3, seed: 3}\n",
                                       "arch.yaml", sets);
  EXPECT_TRUE(job.ok()) << a.preset << ": " << job.status().ToString();
  return *job;
}

// Every block's flat buffer: the model's initialisation, then every value
// (norm weights and biases included) moved by N(0, 0.05) so that no parameter
// is at a special value.
std::vector<torch::Tensor> RandomBlocks(const DecoderModel& model, torch::ScalarType dtype) {
  std::vector<torch::Tensor> out;
  torch::manual_seed(7);
  for (int b = 0; b < model.num_blocks(); ++b) {
    std::vector<float> flat(model.layout(b).numel);
    model.InitBlock(b, 11, flat.data());
    torch::Tensor t = torch::from_blob(flat.data(), {int64_t(flat.size())}).clone().to(dtype);
    out.push_back(t + 0.05 * torch::randn_like(t));
  }
  return out;
}

torch::Tensor ModelLogits(const DecoderModel& model, const std::vector<torch::Tensor>& blocks,
                          const torch::Tensor& tokens) {
  torch::Tensor x = model.Embed(blocks[0], tokens);
  for (int b = 1; b <= model.shape().layers; ++b) x = model.Layer(b, blocks[b], x);
  return model.Logits(blocks.back(), blocks[0], x);
}

TEST(Architectures, LogitsEqualThePublishedFormulas) {
  for (const Arch& a : Archs()) {
    const JobSpec job = ArchJob(a);
    ASSERT_TRUE(CheckWorkerSupports(job.model).ok()) << a.preset;
    DecoderModel model(job.model);
    const std::vector<torch::Tensor> blocks = RandomBlocks(model, torch::kFloat32);
    std::map<std::string, torch::Tensor> weights;
    for (int b = 0; b < model.num_blocks(); ++b) {
      for (const ParamSlot& s : model.layout(b).params) weights[s.name] = model.View(blocks[b], b, s.name);
    }
    torch::Tensor tokens = torch::randint(0, job.model.vocab, {2, job.model.seq_len}, torch::kLong);
    torch::Tensor ours = ModelLogits(model, blocks, tokens);
    torch::Tensor ref = ReferenceLogits(job.model, weights, tokens);
    ASSERT_EQ(ours.sizes(), ref.sizes()) << a.preset;
    const double diff = (ours - ref).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << a.preset << ": logits differ by " << diff;
    EXPECT_GT(ref.abs().max().item<double>(), 0.1) << a.preset << ": logits too small to tell";
  }
}

// The loss's gradient in fp64 against central differences at sampled entries
// of every block.
TEST(Architectures, GradientsMatchFiniteDifferences) {
  for (const Arch& a : Archs()) {
    const JobSpec job = ArchJob(a);
    DecoderModel model(job.model);
    std::vector<torch::Tensor> blocks = RandomBlocks(model, torch::kFloat64);
    torch::Tensor tokens = torch::randint(0, job.model.vocab, {2, job.model.seq_len}, torch::kLong);
    torch::Tensor targets = torch::randint(0, job.model.vocab, {2, job.model.seq_len}, torch::kLong);
    auto loss_of = [&](const std::vector<torch::Tensor>& bs) {
      torch::Tensor logits = ModelLogits(model, bs, tokens);
      return torch::nn::functional::cross_entropy(logits.view({-1, job.model.vocab}), targets.reshape({-1}));
    };
    for (torch::Tensor& b : blocks) b.requires_grad_(true);
    torch::Tensor loss = loss_of(blocks);
    std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, blocks);
    torch::NoGradGuard no_grad;
    std::mt19937 pick(5);
    for (int b = 0; b < model.num_blocks(); ++b) {
      for (int trial = 0; trial < 6; ++trial) {
        const int64_t i = std::uniform_int_distribution<int64_t>(0, blocks[b].numel() - 1)(pick);
        const double h = 1e-6, analytic = grads[b][i].item<double>();
        std::vector<torch::Tensor> plus, minus;
        for (const torch::Tensor& t : blocks) {
          plus.push_back(t.detach().clone());
          minus.push_back(t.detach().clone());
        }
        plus[b][i] += h;
        minus[b][i] -= h;
        const double numeric = (loss_of(plus).item<double>() - loss_of(minus).item<double>()) / (2 * h);
        EXPECT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::fabs(numeric))
            << a.preset << " block " << b << " element " << i;
      }
    }
  }
}

std::shared_ptr<const TokenCorpus> Corpus() {
  static std::shared_ptr<const TokenCorpus> corpus = *TokenCorpus::Open(kCorpus);
  return corpus;
}

// Each step's loss; `moved` (when given) the bytes the cache read from NVMe
// and copied host to device over the run.
std::vector<double> Losses(const JobSpec& job, Communicator* comm, int steps, double* moved = nullptr) {
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comm, Corpus(), [](const std::string&) {});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  std::vector<double> out;
  double nvme = 0, h2d = 0;
  for (int s = 0; t.ok() && s < steps; ++s) {
    StatusOr<StepMetrics> m = (*t)->Step();
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) break;
    out.push_back(m->loss);
    nvme += m->bytes[Link::kNvmeRead];
    h2d += m->bytes[Link::kH2D];
  }
  if (moved != nullptr) moved[0] = nvme, moved[1] = h2d;
  return out;
}

// Budgets that keep a third of the parameters on the device and send states
// to NVMe, so every tier serves each architecture.
TEST(Architectures, CachedRunsEqualTheReferenceOnOneRankAndTwo) {
  for (const Arch& a : Archs()) {
    const JobSpec ref_job = ArchJob(a);
    auto solo = MakeSoloCommunicator();
    const std::vector<double> ref = Losses(ref_job, solo.get(), 5);
    ASSERT_EQ(ref.size(), 5u) << a.preset;
    const JobSpec cached = ArchJob(a, "tencache", {std::string("cache.device_budget=") + a.device_budget,
                                                   std::string("cache.host_budget=") + a.host_budget});
    double moved[2] = {0, 0};
    EXPECT_EQ(Losses(cached, solo.get(), 5, moved), ref) << a.preset << ": not bitwise on one rank";
    EXPECT_GT(moved[0], 0) << a.preset << ": nothing read from NVMe";
    EXPECT_GT(moved[1], 0) << a.preset << ": nothing copied to the device";

    auto comms = MakeThreadCommunicators(2, 120000);
    std::vector<double> two[2];
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) threads.emplace_back([&, r] { two[r] = Losses(cached, comms[r].get(), 5); });
    for (auto& t : threads) t.join();
    ASSERT_EQ(two[0].size(), ref.size()) << a.preset;
    for (size_t s = 0; s < ref.size(); ++s) {
      EXPECT_LT(std::fabs(two[0][s] - ref[s]) / ref[s], 1e-4) << a.preset << " step " << s;
    }
    EXPECT_LT(ref.back(), ref.front()) << a.preset << ": the loss did not fall";
  }
}

// The resource model charges the collectives the worker's profiled trace
// records (the trace tencache-sim replays): per block and micro-step, its
// all-gathers and reduce-scatters, tied head (GPT-2) and untied (Llama), with
// one and two micro-steps a step.
TEST(Architectures, TheModelsCollectivesAreTheTracesCollectives) {
  for (int arch : {0, 2}) {
    for (int micro : {4, 2}) {
      const JobSpec job = ArchJob(Archs()[arch], "tencache",
                                  {"train.micro_batch=" + std::to_string(micro), "cache.device_budget=1MiB",
                                   "cache.host_budget=4MiB"});
      const int accum = 8 / (2 * micro);
      auto comms = MakeThreadCommunicators(2, 120000);
      std::vector<std::map<std::pair<int, int>, int>> counted(2);  // (block, kind) -> events
      std::vector<std::thread> threads;
      for (int r = 0; r < 2; ++r) {
        threads.emplace_back([&, r] {
          StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comms[r].get(), Corpus(), [](const std::string&) {});
          ASSERT_TRUE(t.ok()) << t.status().ToString();
          ASSERT_TRUE((*t)->Step().ok());
          for (const TraceEvent& e : (*t)->profiler().profile().events) {
            if (e.kind == EventKind::kCollective) ++counted[r][{e.block, int(e.collective)}];
          }
        });
      }
      for (auto& t : threads) t.join();
      for (int b = 0; b < job.model.num_blocks(); ++b) {
        const BlockCollectives n = CollectivesOfBlock(job.model, b);
        EXPECT_EQ((counted[0][{b, int(CollectiveKind::kAllGather)}]), accum * (n.forward_gathers + n.backward_gathers))
            << Archs()[arch].preset << " micro " << micro << " block " << b;
        EXPECT_EQ((counted[0][{b, int(CollectiveKind::kReduceScatter)}]), accum * n.reduce_scatters)
            << Archs()[arch].preset << " micro " << micro << " block " << b;
      }
    }
  }
}

std::string FileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> ArchBudgets(const Arch& a) {
  return {std::string("cache.device_budget=") + a.device_budget, std::string("cache.host_budget=") + a.host_budget};
}

// Weights out (--save-weights) and back in (model.init) through the cache's
// tiers: the file written after loading is the file loaded, byte for byte;
// it holds transformers' names and shapes; and training from it gives the
// seeded run's losses bitwise.
TEST(Architectures, SafetensorsRoundTripIsByteIdenticalAndTrainsTheSame) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_arch_hf_" + std::to_string(getpid()));
  for (const Arch& a : Archs()) {
    fs::remove_all(dir);
    const std::vector<std::string> budgets = ArchBudgets(a);
    const JobSpec seeded = ArchJob(a, "tencache", budgets);
    auto solo = MakeSoloCommunicator();
    {
      StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(seeded, solo.get(), Corpus(), [](const std::string&) {});
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ASSERT_TRUE((*t)->SaveWeights((dir / "a").string()).ok()) << a.preset;
    }
    std::vector<std::string> from = budgets;
    from.push_back("model.init=" + (dir / "a").string());
    const JobSpec loaded = ArchJob(a, "tencache", from);
    {
      StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(loaded, solo.get(), Corpus(), [](const std::string&) {});
      ASSERT_TRUE(t.ok()) << a.preset << ": " << t.status().ToString();
      ASSERT_TRUE((*t)->SaveWeights((dir / "b").string()).ok()) << a.preset;
    }
    EXPECT_EQ(FileBytes(dir / "a" / "model.safetensors"), FileBytes(dir / "b" / "model.safetensors")) << a.preset;
    EXPECT_EQ(FileBytes(dir / "a" / "config.json"), FileBytes(dir / "b" / "config.json")) << a.preset;
    // transformers' names and shapes, every one of them and nothing else.
    StatusOr<SafetensorsReader> r = SafetensorsReader::Open((dir / "a").string());
    ASSERT_TRUE(r.ok()) << r.status().message();
    const HfArch arch = *HfArchFor(seeded.model);
    EXPECT_EQ(r->tensors().size(), arch.tensors.size()) << a.preset;
    for (const HfTensor& t : arch.tensors) {
      const StTensor* found = r->Find(t.theirs);
      ASSERT_NE(found, nullptr) << a.preset << ": " << t.theirs;
      EXPECT_EQ(found->shape, t.their_dims) << t.theirs;
    }
    EXPECT_EQ(Losses(loaded, solo.get(), 3), Losses(seeded, solo.get(), 3)) << a.preset;
  }
  // Spot checks of the published names and layouts.
  fs::remove_all(dir);
  const HfArch g = *HfArchFor(ArchJob(Archs()[0]).model);
  EXPECT_EQ(g.tensors[2].theirs, "transformer.h.0.ln_1.weight");
  const HfTensor* c_attn = nullptr;
  for (const HfTensor& t : g.tensors) {
    if (t.theirs == "transformer.h.0.attn.c_attn.weight") c_attn = &t;
  }
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->their_dims, (std::vector<int64_t>{32, 96}));  // Conv1D: [in, out]
  const HfArch l = *HfArchFor(ArchJob(Archs()[2]).model);
  EXPECT_EQ(l.tensors.back().theirs, "lm_head.weight");
  EXPECT_EQ(l.tensors[2].theirs, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(l.tensors[3].their_dims, (std::vector<int64_t>{16, 32}));  // k_proj: 2 kv heads of 8
}

// The seeded start written as a sharded checkpoint (--write-init), and the
// trained weights saved in shards: read back through the index, each gives
// the run it came from, bitwise.
TEST(Architectures, ShardedCheckpointsOfTheSeededStartAndOfSavedWeightsTrainTheSame) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_arch_shards_" + std::to_string(getpid()));
  for (const Arch& a : Archs()) {
    fs::remove_all(dir);
    const std::vector<std::string> budgets = ArchBudgets(a);
    const JobSpec seeded = ArchJob(a, "tencache", budgets);
    auto solo = MakeSoloCommunicator();
    const DecoderModel model(seeded.model);
    ASSERT_TRUE(WriteInitialWeights(model, seeded.train.seed, seeded.dtype, (dir / "init").string(), 16 << 10).ok());
    ASSERT_TRUE(fs::exists(dir / "init" / "model.safetensors.index.json")) << a.preset;
    StatusOr<SafetensorsReader> shards = SafetensorsReader::Open((dir / "init").string());
    ASSERT_TRUE(shards.ok()) << shards.status().message();
    EXPECT_GE(shards->files().size(), 2u) << a.preset;
    std::vector<std::string> from = budgets;
    from.push_back("model.init=" + (dir / "init").string());
    EXPECT_EQ(Losses(ArchJob(a, "tencache", from), solo.get(), 3), Losses(seeded, solo.get(), 3)) << a.preset;
    {
      StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(seeded, solo.get(), Corpus(), [](const std::string&) {});
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ASSERT_TRUE((*t)->SaveWeights((dir / "saved").string(), 16 << 10).ok()) << a.preset;
    }
    ASSERT_TRUE(fs::exists(dir / "saved" / "model.safetensors.index.json")) << a.preset;
    from.back() = "model.init=" + (dir / "saved").string();
    EXPECT_EQ(Losses(ArchJob(a, "tencache", from), solo.get(), 3), Losses(seeded, solo.get(), 3)) << a.preset;
  }
  fs::remove_all(dir);
}

// A rank reads only the tensors that overlap its shard of a block: the rest
// of the block is left untouched, the part it reads equals a whole read.
TEST(Architectures, ARankReadsOnlyTheTensorsOfItsShard) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_arch_part_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const JobSpec job = ArchJob(Archs()[2]);  // Llama
  auto solo = MakeSoloCommunicator();
  {
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, solo.get(), Corpus(), [](const std::string&) {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->SaveWeights(dir.string()).ok());
  }
  DecoderModel model(job.model);
  StatusOr<HfCheckpointReader> r = HfCheckpointReader::Open(dir.string(), model, "model.init");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const BlockLayout& layout = model.layout(1);
  const int64_t half = layout.numel / 2;
  std::vector<float> whole(layout.numel, NAN), part(layout.numel, NAN);
  ASSERT_TRUE(r->ReadBlock(1, whole.data()).ok());
  ASSERT_TRUE(r->ReadBlock(1, part.data(), 0, half).ok());
  int skipped = 0;
  for (const ParamSlot& p : layout.params) {
    const bool overlaps = p.offset < half;
    skipped += !overlaps;
    for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
      if (overlaps) {
        ASSERT_EQ(part[i], whole[i]) << p.name;
      } else {
        ASSERT_TRUE(std::isnan(part[i])) << p.name << " was read though it lies beyond the range";
      }
    }
  }
  EXPECT_GT(skipped, 0);
  fs::remove_all(dir);
}

TEST(Architectures, CheckpointsOfAnotherShapeAreRefusedNamingTheTensor) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_arch_bad_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const Arch& llama = Archs()[2];
  auto solo = MakeSoloCommunicator();
  {
    StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(ArchJob(llama), solo.get(), Corpus(), [](const std::string&) {});
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*t)->SaveWeights(dir.string()).ok());
  }
  auto refusal = [&](std::vector<std::string> sets) {
    sets.push_back("model.init=" + dir.string());
    return Trainer::Create(ArchJob(llama, "none", sets), solo.get(), Corpus(), [](const std::string&) {}).status();
  };
  Status s = refusal({"model.layers=3"});
  EXPECT_EQ(ExitCodeFor(s), 2);
  EXPECT_NE(s.message().find("model.init"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tensor 'model.layers.2.input_layernorm.weight'"), std::string::npos) << s.message();
  s = refusal({"model.layers=1"});
  EXPECT_NE(s.message().find("tensor 'model.layers.1."), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("is not part of the job's llama model"), std::string::npos) << s.message();
  s = refusal({"model.ffn_hidden=40"});
  EXPECT_NE(s.message().find("has shape [48, 32]; the job's model needs [40, 32]"), std::string::npos) << s.message();
  s = refusal({"model.bias=true"});  // no transformers architecture: rotary with biases
  EXPECT_NE(s.message().find("model.position: no Hugging Face architecture matches"), std::string::npos) << s.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
