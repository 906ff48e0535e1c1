#include "common/job_spec.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/byte_size.h"
#include "common/job_keys.h"

namespace tencache {
namespace {

const char kFullJob[] = R"(name: llama7b-finetune
model:
  preset: llama-2-7b
  dtype: bf16
train:
  data: missing-corpus.txt
  tokens_per_epoch: 2e9
  micro_batch: 4
  global_batch: 64
  steps: 1000
  lr: 3.0e-4
  seed: 1
  checkpoint_every: 100
  checkpoint_dir: ckpt/
cluster:
  target: k8s
  max_nodes: 4
  instance_types: [p4d.24xlarge, g5.12xlarge]
  objective: time
  volume: {size: 2TiB, read_gbps: 1.5, write_gbps: 0.8}
cache:
  policy: zero-infinity
  device_budget: 20GiB
  host_budget: auto
  nvme_budget: 1TB
  nvme_path: /mnt/nvme
)";

// Parses kFullJob with `edit` applied as an override and returns the error.
Status ErrorFor(const std::string& text, const std::vector<std::string>& overrides = {}) {
  StatusOr<JobSpec> job = ParseJobText(text, "job.yaml", overrides);
  EXPECT_FALSE(job.ok());
  if (!job.ok()) {
    EXPECT_EQ(ExitCodeFor(job.status()), 2) << job.status().ToString();
  }
  return job.ok() ? Status::Ok() : job.status();
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

void ExpectMentions(const Status& s, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
}

TEST(JobSpec, ParsesEveryDocumentedKey) {
  StatusOr<JobSpec> job = ParseJobText(kFullJob, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->name, "llama7b-finetune");
  EXPECT_EQ(job->model.name, "llama-2-7b");
  EXPECT_EQ(job->dtype, DType::kBf16);
  EXPECT_EQ(job->train.tokens_per_epoch, 2000000000u);
  EXPECT_EQ(job->train.micro_batch, 4);
  EXPECT_EQ(job->train.global_batch, 64);
  EXPECT_DOUBLE_EQ(job->train.lr, 3.0e-4);
  EXPECT_EQ(job->train.checkpoint_every, 100);
  EXPECT_EQ(job->cluster.target, Target::kK8s);
  EXPECT_EQ(job->cluster.max_nodes, 4);
  EXPECT_EQ(job->cluster.instance_types, (std::vector<std::string>{"p4d.24xlarge", "g5.12xlarge"}));
  EXPECT_EQ(job->cluster.objective, Objective::kTime);
  EXPECT_EQ(job->cluster.volume.size, 2 * kTiB);
  EXPECT_DOUBLE_EQ(job->cluster.volume.read_gbps, 1.5);
  EXPECT_EQ(job->cache.policy, CachePolicy::kZeroInfinity);
  EXPECT_EQ(job->cache.device_budget, std::optional<uint64_t>(20 * kGiB));
  EXPECT_FALSE(job->cache.host_budget.has_value());
  EXPECT_EQ(job->cache.nvme_budget, std::optional<uint64_t>(1000000000000ull));
  EXPECT_EQ(job->cache.nvme_path, "/mnt/nvme");
  EXPECT_EQ(job->locations.at("train.micro_batch"), "job.yaml:8:16");
}

TEST(JobSpec, ExplicitModelWithoutPreset) {
  std::string text = "model: {layers: 2, hidden: 64, heads: 4, ffn_hidden: 256, seq_len: 32, vocab: 256}\n"
                     "train: {tokens_per_epoch: 1000}\n";
  StatusOr<JobSpec> job = ParseJobText(text, "custom.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->name, "custom");
  EXPECT_EQ(job->model.kv_heads, 4);
  EXPECT_EQ(job->model.max_positions, 32);
  EXPECT_EQ(job->model.ParamCount(), 256u * 64 + 32u * 64 + 2u * (4 * 64 + 3 * (64 * 64 + 64) + 64 * 64 + 64 +
                                                                    64 * 256 + 256 + 256 * 64 + 64) + 2u * 64);
}

TEST(JobSpec, OverridesAreValidatedLikeTheFile) {
  StatusOr<JobSpec> job = ParseJobText(kFullJob, "job.yaml",
                                       {"cache.device_budget=8MiB", "train.steps=20",
                                        "cluster.instance_types=[g5.xlarge]", "model.seq_len=1024"});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->cache.device_budget, std::optional<uint64_t>(8 * kMiB));
  EXPECT_EQ(job->train.steps, 20);
  EXPECT_EQ(job->model.seq_len, 1024);
  EXPECT_EQ(job->cluster.instance_types, std::vector<std::string>{"g5.xlarge"});
  EXPECT_EQ(job->locations.at("train.steps"), "--set train.steps=20");

  ExpectMentions(ErrorFor(kFullJob, {"train.steps=0"}), {"--set train.steps=0", "train.steps", "integer >= 1"});
  ExpectMentions(ErrorFor(kFullJob, {"cache.device_bugdet=1GiB"}),
                 {"--set cache.device_bugdet=1GiB", "unknown key", "did you mean 'cache.device_budget'"});
  ExpectMentions(ErrorFor(kFullJob, {"train.steps"}), {"--set train.steps", "KEY=VALUE"});
  ExpectMentions(ErrorFor(kFullJob, {"cache.device_budget=lots"}), {"cache.device_budget", "20GiB"});
}

TEST(JobSpec, MissingFile) {
  StatusOr<JobSpec> job = LoadJobFile("/nonexistent/job.yaml");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(ExitCodeFor(job.status()), 2);
  ExpectMentions(job.status(), {"/nonexistent/job.yaml", "not found"});
}

// What is not a job file says what it is, not that it is empty or missing.
TEST(JobSpec, AFolderAnEndlessDeviceOrAHugeFileIsNoJobFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tencache_job_spec_not_a_file";
  std::filesystem::create_directories(dir);
  StatusOr<JobSpec> job = LoadJobFile(dir.string());
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(ExitCodeFor(job.status()), 2);
  ExpectMentions(job.status(), {"is a folder"});
  job = LoadJobFile("/dev/zero");  // endless: read no further than the cap
  ASSERT_FALSE(job.ok());
  ExpectMentions(job.status(), {"/dev/zero", "larger than 1024 KiB"});
  const std::filesystem::path huge = dir / "huge.yaml";
  {
    std::ofstream out(huge);
    out << "name: huge\n";
    for (int i = 0; i < 40000; ++i) out << "# a comment line to make the file large enough\n";
  }
  job = LoadJobFile(huge.string());
  ASSERT_FALSE(job.ok());
  ExpectMentions(job.status(), {"huge.yaml", "larger than 1024 KiB"});
  std::filesystem::remove_all(dir);
}

// train.data that exists but is no file says so (it was "not found").
TEST(JobSpec, DataThatIsADeviceOrAFolderIsNamed) {
  ExpectMentions(ErrorFor(kFullJob, {"train.data=/dev/zero"}), {"'/dev/zero' is not a regular file"});
  ExpectMentions(ErrorFor(kFullJob, {"train.data=/tmp"}), {"'/tmp' is a folder"});
}

// Silently reinterpreted before: an empty value became the default, and a
// second document was ignored.
TEST(JobSpec, AnEmptyValueOrASecondDocumentIsRefused) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "global_batch: 64", "global_batch:")),
                 {"job.yaml:9:3", "key 'train.global_batch' has no value"});
  ExpectMentions(ErrorFor(std::string(kFullJob) + "---\nname: second\n"), {"job.yaml", "holds 2 YAML documents"});
  // A document marker alone, before or after, is one document.
  EXPECT_TRUE(ParseJobText(std::string("---\n") + kFullJob + "---\n", "job.yaml").ok());
}

// A tab in the indentation is named as such, with its line.
TEST(JobSpec, ATabIndentIsNamed) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "  micro_batch: 4", "\tmicro_batch: 4")),
                 {"job.yaml:8", "a tab indents this line; YAML indents with spaces only"});
}

TEST(JobSpec, MalformedYamlNamesTheLine) {
  ExpectMentions(ErrorFor("model:\n  preset: [gpt2\ntrain: {}\n"), {"job.yaml:", "malformed YAML"});
  ExpectMentions(ErrorFor("- just\n- a list\n"), {"job.yaml", "expected a mapping"});
}

TEST(JobSpec, UnknownKeySuggestsTheClosest) {
  Status s = ErrorFor(Replace(kFullJob, "micro_batch: 4", "micro_bach: 4"));
  ExpectMentions(s, {"job.yaml:8:3", "unknown key 'train.micro_bach'", "did you mean 'micro_batch'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "cache:", "cahce:")), {"unknown key 'cahce'", "did you mean 'cache'"});
}

TEST(JobSpec, WrongTypes) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "micro_batch: 4", "micro_batch: four")),
                 {"job.yaml:8:16", "train.micro_batch", "an integer >= 1", "got 'four'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "max_nodes: 4", "max_nodes: [4]")), {"cluster.max_nodes", "got a list"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "instance_types: [p4d.24xlarge, g5.12xlarge]", "instance_types: p4d")),
                 {"cluster.instance_types", "a list of names"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "lr: 3.0e-4", "lr: fast")), {"train.lr", "a number > 0"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "dtype: bf16", "dtype: int8")), {"model.dtype", "one of bf16, fp16, fp32"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "policy: zero-infinity", "policy: zero-infinty")),
                 {"cache.policy", "did you mean 'zero-infinity'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "name: llama7b-finetune", "name: Llama_7B")), {"key 'name'", "lower-case"});
}

// Integer keys are read as integers: every value of a uint64 key up to 2^64 - 1
// reads and writes back exactly; a fraction or a value beyond the key's range
// is refused naming the file, the key and the range.
TEST(JobSpec, IntegersAreReadExactly) {
  const JobKey* seed_key = FindJobKey("train.seed");
  ASSERT_NE(seed_key, nullptr);
  for (const uint64_t seed : {uint64_t(0), (uint64_t(1) << 53) + 1, uint64_t(12345678901234567891ull), UINT64_MAX}) {
    StatusOr<JobSpec> job =
        ParseJobText(Replace(kFullJob, "seed: 1\n", "seed: " + std::to_string(seed) + "\n"), "job.yaml");
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(job->train.seed, seed);
    const std::string written = seed_key->write(*job);
    EXPECT_EQ(written, std::to_string(seed));
    StatusOr<JobSpec> back = ParseJobText(Replace(kFullJob, "seed: 1\n", "seed: " + written + "\n"), "job.yaml");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->train.seed, seed);
  }
  // Exponent form, when integral, is exact too.
  StatusOr<JobSpec> job = ParseJobText(Replace(Replace(kFullJob, "seed: 1\n", "seed: 9.007199254740993e15\n"),
                                               "global_batch: 64", "global_batch: 6.4e1"),
                                       "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->train.seed, (uint64_t(1) << 53) + 1);
  EXPECT_EQ(job->train.global_batch, 64);
  ExpectMentions(ErrorFor(Replace(kFullJob, "seed: 1\n", "seed: 1.5\n")),
                 {"job.yaml:12:9", "key 'train.seed': expected an integer >= 0, got '1.5'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "seed: 1\n", "seed: 18446744073709551616\n")),
                 {"job.yaml:12", "key 'train.seed': expected an integer >= 0 and at most 18446744073709551615"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "seed: 1\n", "seed: -1\n")), {"key 'train.seed'", "got '-1'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "seed: 1\n", "seed: 1e-3\n")), {"key 'train.seed'", "got '1e-3'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "tokens_per_epoch: 2e9", "tokens_per_epoch: 1e30")),
                 {"job.yaml:7", "key 'train.tokens_per_epoch': expected an integer >= 1 and at most 18446744073709551615",
                  "got '1e30'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "steps: 1000", "steps: 3e9")),
                 {"key 'train.steps': expected an integer >= 1 and at most 2147483647", "got '3e9'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "steps: 1000", "steps: 1000.5")), {"key 'train.steps'", "got '1000.5'"});
  ExpectMentions(ErrorFor(kFullJob, {"train.seed=2.5"}), {"--set train.seed", "key 'train.seed'", "got '2.5'"});
}

TEST(JobSpec, ZeroAndNegativeSizes) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "device_budget: 20GiB", "device_budget: 0")),
                 {"cache.device_budget", "a positive size", "got '0'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "nvme_budget: 1TB", "nvme_budget: -5GiB")), {"cache.nvme_budget", "got '-5GiB'"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "micro_batch: 4", "micro_batch: 0")), {"train.micro_batch", ">= 1"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "micro_batch: 4", "micro_batch: -2")), {"train.micro_batch"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "lr: 3.0e-4", "lr: 0")), {"train.lr", "> 0"});
  ExpectMentions(ErrorFor(Replace(kFullJob, "size: 2TiB", "size: 0")), {"cluster.volume.size"});
}

TEST(JobSpec, SizeStringThatDoesNotParse) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "device_budget: 20GiB", "device_budget: 20 gigs")),
                 {"job.yaml:23:18", "cache.device_budget", "'auto' or a positive size such as 20GiB", "got '20 gigs'"});
}

TEST(JobSpec, UnknownPreset) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "preset: llama-2-7b", "preset: llama-2-7")),
                 {"job.yaml:3:11", "model.preset", "unknown model preset 'llama-2-7'", "did you mean 'llama-2-7b'"});
}

TEST(JobSpec, HeadsMustDivideHidden) {
  std::string text = "model: {layers: 2, hidden: 100, heads: 3, ffn_hidden: 256, seq_len: 32, vocab: 256}\n"
                     "train: {tokens_per_epoch: 1000}\n";
  ExpectMentions(ErrorFor(text), {"job.yaml:1:40", "model.heads", "a divisor of hidden (100), got 3"});
  ExpectMentions(ErrorFor(kFullJob, {"model.heads=30"}), {"--set model.heads=30", "a divisor of hidden (4096)"});
}

TEST(JobSpec, ExplicitModelNeedsEveryShapeKey) {
  ExpectMentions(ErrorFor("model: {layers: 2, hidden: 64}\ntrain: {tokens_per_epoch: 10}\n"),
                 {"model.heads", "required when model.preset is not set"});
}

TEST(JobSpec, BatchesMustDivide) {
  ExpectMentions(ErrorFor(Replace(kFullJob, "global_batch: 64", "global_batch: 10")),
                 {"train.global_batch", "multiple of train.micro_batch (4)"});
}

TEST(JobSpec, TokensComeFromTheDataFile) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "tencache_job_spec_test";
  fs::create_directories(dir);
  { std::ofstream(dir / "corpus.txt") << std::string(1000, 'a'); }
  { std::ofstream(dir / "tokens.bin") << std::string(1000, 'a'); }
  std::string base = "model: {preset: tiny}\ntrain: {data: ";
  StatusOr<JobSpec> text = ParseJobText(base + "corpus.txt}\n", (dir / "job.yaml").string());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->train.tokens_per_epoch, 1000u);
  EXPECT_EQ(text->train.data, (dir / "corpus.txt").string());
  StatusOr<JobSpec> bin = ParseJobText(base + "tokens.bin}\n", (dir / "job.yaml").string());
  ASSERT_TRUE(bin.ok());
  EXPECT_EQ(bin->train.tokens_per_epoch, 500u);  // uint16 tokens
  Status missing = ErrorFor(base + "nope.txt}\n");
  ExpectMentions(missing, {"train.data", "nope.txt", "not found", "train.tokens_per_epoch"});
  fs::remove_all(dir);
}

TEST(JobSpec, EveryKnownKeyIsDocumented) {
  std::ifstream doc(std::string(TENCACHE_SOURCE_DIR) + "/docs/job-yaml.md");
  ASSERT_TRUE(doc.good());
  std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  for (const std::string& key : KnownJobKeys()) {
    EXPECT_NE(text.find("`" + key + "`"), std::string::npos) << key << " is not in docs/job-yaml.md";
  }
}

}  // namespace
}  // namespace tencache

namespace tencache {
namespace {

const char kHostsJob[] = "name: h\nmodel: {preset: tiny}\ntrain: {tokens_per_epoch: 1000, micro_batch: 1, global_batch: 8}\n";

StatusOr<JobSpec> HostsJob(std::vector<std::string> sets) {
  return ParseJobText(kHostsJob, "hosts.yaml", sets);
}

TEST(JobSpecHosts, HostsFixNodesAndRanksPerNode) {
  StatusOr<JobSpec> j = HostsJob({"cluster.target=hosts", "cluster.hosts=[node1:2, node2:2]", "cluster.rsh_agent=ssh -p 2222"});
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->cluster.target, Target::kHosts);
  EXPECT_EQ(j->cluster.nodes, 2);
  EXPECT_EQ(j->cluster.ranks_per_node, 2);
  ASSERT_EQ(j->cluster.hosts.list.size(), 2u);
  EXPECT_EQ(j->cluster.hosts.list[1].host, "node2");
  EXPECT_EQ(j->cluster.hosts.rsh_agent, "ssh -p 2222");
  j = HostsJob({"cluster.target=hosts", "cluster.hosts=[10.0.0.1, 10.0.0.2, 10.0.0.3]", "train.global_batch=12"});
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->cluster.nodes, 3);
  EXPECT_EQ(j->cluster.ranks_per_node, 1);
}

TEST(JobSpecHosts, AHostfileIsRead) {
  const std::string path = ::testing::TempDir() + "/tencache_hostfile.txt";
  std::ofstream(path) << "# two machines\nnode1 slots=4\n\nnode2 slots=4  # the second\n";
  StatusOr<JobSpec> j = HostsJob({"cluster.target=hosts", "cluster.hostfile=" + path});
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->cluster.nodes, 2);
  EXPECT_EQ(j->cluster.ranks_per_node, 4);
  std::ofstream(path) << "node1 slots=four\n";
  j = HostsJob({"cluster.target=hosts", "cluster.hostfile=" + path});
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find(path + ":1: expected 'HOST' or 'HOST slots=N'"), std::string::npos)
      << j.status().message();
  std::remove(path.c_str());
}

TEST(JobSpecHosts, MistakesNameTheKey) {
  struct Case {
    std::vector<std::string> sets;
    std::string says;
  } cases[] = {
      {{"cluster.target=hosts"}, "cluster.target hosts needs cluster.hosts"},
      {{"cluster.target=hosts", "cluster.hosts=[a]", "cluster.hostfile=h.txt"}, "not both"},
      {{"cluster.target=hosts", "cluster.hosts=[a:2, b:1]"}, "every host needs the same slots (ranks per node), got a:2, b:1"},
      {{"cluster.target=hosts", "cluster.hosts=[a:0]"}, "expected HOST or HOST:SLOTS (slots >= 1), got 'a:0'"},
      {{"cluster.target=hosts", "cluster.hosts=[a, a]"}, "'a' is listed twice"},
      {{"cluster.target=hosts", "cluster.hosts=[a:1, a:2]"}, "host 'a' is named twice"},
      {{"cluster.target=hosts", "cluster.hosts=['a;rm -rf /']"}, "expected HOST or HOST:SLOTS"},
      {{"cluster.target=hosts", "cluster.hosts=[a, b]", "cluster.nodes=3"}, "cluster.nodes': 3, but cluster.hosts names 2"},
      {{"cluster.target=hosts", "cluster.hosts=[a:2]", "cluster.ranks_per_node=1"}, "every host in cluster.hosts has 2"},
      {{"cluster.hosts=[a, b]"}, "applies to cluster.target hosts, but the target is local"},
      {{"cluster.instance_type=g5.xlarge"}, "cluster.instance_type': applies to cluster.target hosts"},
      {{"cluster.target=hosts", "cluster.hosts=[a]", "cluster.rsh_agent="}, "cluster.rsh_agent"},
      {{"cluster.target=hosts", "cluster.hosts=[a, b, c]"}, "train.global_batch': 8 is not a multiple of the 3 ranks"},
  };
  for (const Case& c : cases) {
    StatusOr<JobSpec> j = HostsJob(c.sets);
    ASSERT_FALSE(j.ok()) << c.says;
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(j.status().message().find(c.says), std::string::npos) << j.status().message();
  }
}

}  // namespace
}  // namespace tencache

namespace tencache {
namespace {

TrainSpec Schedule(const std::vector<std::string>& sets) {
  StatusOr<JobSpec> j = ParseJobText("model: {preset: tiny}\ntrain: {tokens_per_epoch: 10, steps: 110, lr: 1.0}\n",
                                     "s.yaml", sets);
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j->train;
}

TEST(LearningRate, WarmupThenConstantCosineOrLinear) {
  TrainSpec t = Schedule({"train.warmup_steps=10"});
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 9), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 60), 1.0);
  t = Schedule({"train.warmup_steps=10", "train.lr_schedule=cosine", "train.min_lr=0.1"});
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 10), 1.0);
  EXPECT_NEAR(LearningRateAt(t, 60), 0.55, 1e-12);  // half way down the cosine
  EXPECT_NEAR(LearningRateAt(t, 110), 0.1, 1e-12);
  EXPECT_NEAR(LearningRateAt(t, 500), 0.1, 1e-12);  // past train.steps: min_lr
  t = Schedule({"train.lr_schedule=linear"});
  EXPECT_DOUBLE_EQ(LearningRateAt(t, 0), 1.0);
  EXPECT_NEAR(LearningRateAt(t, 55), 0.5, 1e-12);
  EXPECT_EQ(t.beta1, 0.9);
  EXPECT_EQ(t.beta2, 0.999);
  EXPECT_EQ(t.eps, 1e-8);
}

TEST(LearningRate, BadRecipeKeysNameTheKey) {
  const char* base = "model: {preset: tiny}\ntrain: {tokens_per_epoch: 10, lr: 1.0e-3}\n";
  for (const auto& [set, says] : std::vector<std::pair<std::string, std::string>>{
           {"train.lr_schedule=step", "train.lr_schedule"},
           {"train.beta2=1.0", "train.beta2': expected a number in [0, 1)"},
           {"train.min_lr=0.1", "train.min_lr': 0.100000 is above train.lr"},
           {"train.warmup_steps=-1", "train.warmup_steps"},
           {"train.eps=0", "train.eps"}}) {
    StatusOr<JobSpec> j = ParseJobText(base, "b.yaml", {set});
    ASSERT_FALSE(j.ok()) << set;
    EXPECT_NE(j.status().message().find(says), std::string::npos) << j.status().message();
  }
}

}  // namespace
}  // namespace tencache

namespace tencache {
namespace {

// train.optimizer_overlap: auto unless set; auto, on or off; anything else an
// error naming the file, the key, the value's expected form and the nearest.
TEST(OptimizerOverlap, ReadsAutoOnOrOffAndNamesABadValue) {
  const char* base = "model: {preset: tiny}\ntrain: {tokens_per_epoch: 10}\n";
  StatusOr<JobSpec> j = ParseJobText(base, "o.yaml", {});
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->train.optimizer_overlap, OptimizerOverlap::kAuto);
  for (const char* mode : {"auto", "on", "off"}) {
    j = ParseJobText(base, "o.yaml", {std::string("train.optimizer_overlap=") + mode});
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    EXPECT_STREQ(OptimizerOverlapName(j->train.optimizer_overlap), mode);
  }
  j = ParseJobText("model: {preset: tiny}\ntrain: {tokens_per_epoch: 10, optimizer_overlap: onn}\n", "o.yaml", {});
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  for (const char* says : {"o.yaml:2", "train.optimizer_overlap", "one of", "on"}) {
    EXPECT_NE(j.status().message().find(says), std::string::npos) << j.status().message();
  }
}

// The lane's cores: a GPU's rank leaves all of its share to it, a CPU's what
// its compute threads do not take. auto runs the lane only where that is a
// core or more; on and off whatever the cores.
TEST(OptimizerOverlap, AutoRunsTheLaneWhereTheComputeLeavesACore) {
  EXPECT_EQ(LaneCores({/*gpu=*/true, 12, 12}), 12);
  EXPECT_EQ(LaneCores({false, 2, 2}), 0);
  EXPECT_EQ(LaneCores({false, 1, 2}), 1);
  EXPECT_EQ(LaneCores({false, 3, 2}), 0);  // oversubscribed: none
  TrainSpec t;
  ASSERT_EQ(t.optimizer_overlap, OptimizerOverlap::kAuto);
  EXPECT_TRUE(OptimizerLaneOn(t, {true, 8, 8}));
  EXPECT_TRUE(OptimizerLaneOn(t, {false, 7, 8}));
  EXPECT_FALSE(OptimizerLaneOn(t, {false, 8, 8}));
  t.optimizer_overlap = OptimizerOverlap::kOn;
  EXPECT_TRUE(OptimizerLaneOn(t, {false, 8, 8}));
  t.optimizer_overlap = OptimizerOverlap::kOff;
  EXPECT_FALSE(OptimizerLaneOn(t, {true, 8, 8}));
  EXPECT_FALSE(OptimizerLaneOn(t, {false, 1, 8}));
}

}  // namespace
}  // namespace tencache
