// The resolved job: every auto replaced by the plan's value, written with a
// comment per key, and read back by the parser to the same job.
#include "launcher/resolved_job.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/every_key_job.h"
#include "common/shard_bytes.h"
#include "launcher/catalog.h"
#include "launcher/local_machine.h"
#include "launcher/planner.h"

namespace tencache {
namespace {

const char kJob[] =
    "name: resolve-me\n"
    "model: {preset: tiny, dtype: fp32}\n"
    "train: {tokens_per_epoch: 100000, micro_batch: auto, global_batch: 8}\n"
    "cluster: {nodes: auto, ranks_per_node: auto, instance_types: [g5.xlarge]}\n";

LocalProbes Probes() {
  LocalProbes p;
  p.disk = {2.0, 1.0, 1 << 20, "test"};
  p.compute.dtype = "fp32";
  p.compute.threads = 1;
  p.compute.embed_s = 1e-4;
  p.compute.layer_s = 1e-3;
  p.compute.head_s = 1e-3;
  p.compute.adamw_params_per_s = 1e9;
  p.compute.copy_gbps = 10;
  p.compute.allgather_gbps = 2;
  p.compute.collective_latency_s = 1e-5;
  return p;
}

MachineFacts Facts() {
  MachineFacts f;
  f.hostname = "test";
  f.cores = 2;
  f.memory.mem_total = {true, 16ull << 30, "/proc/meminfo MemTotal"};
  f.nvme_path = "/tmp/x";
  f.nvme_free_bytes = 100ull << 30;
  return f;
}

// Resolves the job for this (described) machine's plan, feasible or not.
StatusOr<ResolvedJob> Resolve(const std::vector<std::string>& overrides, Candidate* used = nullptr) {
  StatusOr<JobSpec> job = ParseJobText(kJob, "job.yaml", overrides);
  if (!job.ok()) return job.status();
  const LocalCandidate local = MakeLocalCandidate(*job, Facts(), Probes(), LocalRanks(*job, Facts()));
  StatusOr<Catalog> catalog = Catalog::Load(DefaultCatalogPath());
  if (!catalog.ok()) return catalog.status();
  StatusOr<PlanResult> plan = PlanJob(*job, *catalog, ModelAssumptions(), &local);
  if (!plan.ok()) return plan.status();
  if (used != nullptr) *used = *plan->local;
  return ResolveJob(*job, *plan->local);
}

TEST(ResolvedJob, EveryAutoIsReplacedAndSaysWhy) {
  Candidate planned;
  StatusOr<ResolvedJob> r = Resolve({}, &planned);
  ASSERT_TRUE(planned.feasible) << planned.reason;
  ASSERT_TRUE(r.ok()) << r.status().message();
  const JobSpec& j = r->job;
  EXPECT_EQ(j.cluster.nodes, 1);
  EXPECT_EQ(j.cluster.ranks_per_node, 2);  // two cores, eight sequences
  EXPECT_EQ(j.train.micro_batch, 4);       // the largest that divides 8 / 2
  const ShardBytes s = ShardBytesPerRank(j.model, j.dtype, 2);
  EXPECT_GE(*j.cache.device_budget, s.bytes[kStateParam]);
  EXPECT_GE(*j.cache.host_budget, s.total());
  EXPECT_EQ(*j.cache.nvme_budget, 0u);  // everything fits the host
  for (const char* key : {"cluster.nodes", "cluster.ranks_per_node", "train.micro_batch", "cache.device_budget",
                          "cache.host_budget", "cache.nvme_budget"}) {
    ASSERT_TRUE(r->why.count(key)) << key;
    EXPECT_EQ(r->why.at(key).rfind("planned: ", 0), 0u) << r->why.at(key);
  }
}

// train.checkpoint_every auto: 0 with no preemptions priced (this machine);
// on spot nodes Young/Daly's interval for the plan's instance type. Either way
// the resolved job carries the number and why.
TEST(ResolvedJob, CheckpointEveryAutoIsPlannedAndSaysWhy) {
  StatusOr<ResolvedJob> r = Resolve({"train.checkpoint_every=auto"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->job.train.checkpoint_every, 0);
  ASSERT_TRUE(r->why.count("train.checkpoint_every"));
  EXPECT_NE(r->why.at("train.checkpoint_every").find("off spot nodes"), std::string::npos)
      << r->why.at("train.checkpoint_every");
  const std::string text = RenderResolvedJob(*r, {});
  EXPECT_NE(text.find("checkpoint_every: 0  # planned: no periodic checkpoint off spot nodes"), std::string::npos)
      << text;

  StatusOr<JobSpec> job = ParseJobText(kJob, "job.yaml",
                                       {"train.checkpoint_every=auto", "train.checkpoint_on_stop=false",
                                        "cluster.use_spot=true", "train.tokens_per_epoch=1e12"});
  ASSERT_TRUE(job.ok()) << job.status().message();
  StatusOr<Catalog> catalog = Catalog::Load(DefaultCatalogPath());
  ASSERT_TRUE(catalog.ok());
  StatusOr<PlanResult> plan = PlanJob(*job, *catalog, ModelAssumptions());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_GE(plan->chosen, 0);
  const Candidate& c = plan->candidates[size_t(plan->chosen)];
  r = ResolveJob(*job, c);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->job.train.checkpoint_every, 0);
  EXPECT_EQ(r->job.train.checkpoint_every, c.spot_estimate.checkpoint_every);
  EXPECT_EQ(r->why.at("train.checkpoint_every").rfind("planned: Young/Daly", 0), 0u) << r->why.at("train.checkpoint_every");
  StatusOr<JobSpec> back = ParseJobText(RenderResolvedJob(*r, {}), "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->train.checkpoint_every, r->job.train.checkpoint_every);
}

TEST(ResolvedJob, TextReadsBackToTheSameJob) {
  StatusOr<ResolvedJob> r = Resolve({"cache.host_budget=3MiB", "train.lr=0.002"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string text = RenderResolvedJob(*r, {"header line"});
  EXPECT_EQ(text.rfind("# header line\n", 0), 0u);
  EXPECT_NE(text.find("host_budget: 3145728  # from --set cache.host_budget=3MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("micro_batch: 4  # planned:"), std::string::npos) << text;
  StatusOr<JobSpec> back = ParseJobText(text, "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  const JobSpec& a = r->job;
  const JobSpec& b = *back;
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.model.ParamCount(), a.model.ParamCount());
  EXPECT_EQ(b.dtype, a.dtype);
  EXPECT_EQ(b.train.micro_batch, a.train.micro_batch);
  EXPECT_EQ(b.train.lr, a.train.lr);
  EXPECT_EQ(b.cluster.nodes, a.cluster.nodes);
  EXPECT_EQ(b.cluster.ranks_per_node, a.cluster.ranks_per_node);
  EXPECT_EQ(b.cluster.instance_types, a.cluster.instance_types);
  EXPECT_EQ(b.cache.device_budget, a.cache.device_budget);
  EXPECT_EQ(b.cache.host_budget, a.cache.host_budget);
  EXPECT_EQ(b.cache.nvme_budget, a.cache.nvme_budget);
  // 1 MiB of host cannot hold every shard: the NVMe tier gets a file.
  EXPECT_GT(*b.cache.nvme_budget, 0u);
}

// The planned NVMe file holds what cannot stay on the host and a clean copy
// of every parameter shard, not one extent for every shard: at scale that
// file and the checkpoints must share one disk.
TEST(ResolvedJob, NvmeBudgetIsWhatLeavesTheHostAndTheParameterCopies) {
  const uint64_t host = 3ull << 20;
  StatusOr<ResolvedJob> r = Resolve({"cache.host_budget=3MiB"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const JobSpec& j = r->job;
  const ShardBytes s = ShardBytesPerRank(j.model, j.dtype, 2);
  const uint64_t every = s.total() + s.tensors * 4096, blocks = uint64_t(j.model.num_blocks());
  ASSERT_GT(every, host + s.bytes[kStateParam] + blocks * 4096);  // the formula is the smaller one here
  EXPECT_EQ(*j.cache.nvme_budget, every - host + s.bytes[kStateParam] + blocks * 4096);
  EXPECT_NE(r->why.at("cache.nvme_budget").find("a clean copy of every parameter shard"), std::string::npos)
      << r->why.at("cache.nvme_budget");
}

// A --set value may hold a line break (a path): its comment stays one
// line, and the value reads back unchanged.
TEST(ResolvedJob, ALineBreakInASetValueStaysInsideItsComment) {
  StatusOr<ResolvedJob> r = Resolve({"cache.nvme_path=/tmp/two\nlines\tand a tab", "train.data=/tmp/a\rb"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string text = RenderResolvedJob(*r, {"header\nline"});
  EXPECT_EQ(text.rfind("# header\\nline\n", 0), 0u) << text;
  EXPECT_NE(text.find("# from --set cache.nvme_path=/tmp/two\\nlines\\tand a tab\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# from --set train.data=/tmp/a\\rb\n"), std::string::npos) << text;
  StatusOr<JobSpec> back = ParseJobText(text, "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(back->cache.nvme_path, r->job.cache.nvme_path);  // as --set read it (YAML folds a plain line break)
  EXPECT_EQ(back->train.data, r->job.train.data);
}

// The written job reads back equal, with every key of the schema set.
TEST(ResolvedJob, EveryKeyReadsBackEqual) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tencache_resolved_every_key";
  StatusOr<JobSpec> job = ParseJobText("", (dir / "job.yaml").string(), AsOverrides(EveryKeyValues(dir)));
  ASSERT_TRUE(job.ok()) << job.status().message();
  const std::string text = RenderResolvedJob(ResolvedJob{*job, {}}, {});
  // Every key is written but cluster.hostfile, which is written as cluster.hosts.
  const size_t unset = text.find("not set");
  EXPECT_EQ(unset, text.find("# cluster.hostfile: not set (default)\n") + 20) << text;
  EXPECT_EQ(text.find("not set", unset + 1), std::string::npos) << text;
  StatusOr<JobSpec> back = ParseJobText(text, (dir / "resolved.yaml").string());
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_TRUE(*back == *job) << text;
  std::filesystem::remove_all(dir);
}

// cluster.hostfile is written as the hosts read from it (cluster.hosts).
TEST(ResolvedJob, AHostfileIsWrittenAsItsHosts) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tencache_resolved_hostfile";
  std::map<std::string, std::string> values = EveryKeyValues(dir);
  values.erase("cluster.hosts");
  values["cluster.hostfile"] = HostfileValue();
  StatusOr<JobSpec> job = ParseJobText("", (dir / "job.yaml").string(), AsOverrides(values));
  ASSERT_TRUE(job.ok()) << job.status().message();
  const std::string text = RenderResolvedJob(ResolvedJob{*job, {}}, {});
  EXPECT_NE(text.find("hosts: [\"node1:2\", \"node2:2\"]"), std::string::npos) << text;
  StatusOr<JobSpec> back = ParseJobText(text, (dir / "resolved.yaml").string());
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  JobSpec expected = *job;
  expected.cluster.hosts.hostfile.clear();
  EXPECT_TRUE(*back == expected) << text;
  std::filesystem::remove_all(dir);
}

// A job that leaves every key it may at its default (auto included) reads back equal.
TEST(ResolvedJob, DefaultsReadBackEqual) {
  StatusOr<JobSpec> job = ParseJobText("train: {tokens_per_epoch: 1000}\nmodel: {preset: tiny}\n", "/tmp/defaults.yaml");
  ASSERT_TRUE(job.ok()) << job.status().message();
  const std::string text = RenderResolvedJob(ResolvedJob{*job, {}}, {});
  EXPECT_NE(text.find("nodes: auto  # default"), std::string::npos) << text;
  EXPECT_NE(text.find("device_budget: auto  # default"), std::string::npos) << text;
  StatusOr<JobSpec> back = ParseJobText(text, "/tmp/resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_TRUE(*back == *job) << text;
}

TEST(ResolvedJob, ZeroNvmeWithTooSmallAHostIsRefusedNamingTheKeys) {
  Candidate planned;
  StatusOr<ResolvedJob> r = Resolve({"cache.host_budget=1MiB", "cache.nvme_budget=0"}, &planned);
  EXPECT_FALSE(planned.feasible);  // the planner refuses it first
  EXPECT_NE(planned.reason.find("(cache.nvme_budget)"), std::string::npos) << planned.reason;
  ASSERT_FALSE(r.ok());  // and resolving says why in the worker's accounting
  EXPECT_EQ(ExitCodeFor(r.status()), 2);
  EXPECT_NE(r.status().message().find("cache.nvme_budget"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("cache.host_budget 1.00 MiB holds less"), std::string::npos)
      << r.status().message();
}

TEST(ResolvedJob, HostBudgetBeyondThisMachineIsInfeasibleWithTheNumbers) {
  StatusOr<JobSpec> job = ParseJobText(kJob, "job.yaml", {"cache.host_budget=200GiB"});
  ASSERT_TRUE(job.ok());
  const LocalCandidate local = MakeLocalCandidate(*job, Facts(), Probes(), 2);
  Candidate c = EvaluateWithMicroBatch(*job, local.instance, local.gpu, 1, local.assumptions);
  EXPECT_FALSE(c.feasible);
  EXPECT_NE(c.reason.find("cache.host_budget 200 GiB per rank exceeds the"), std::string::npos) << c.reason;
}

}  // namespace
}  // namespace tencache
