// This machine as a candidate: facts from the OS, the disk probe through the
// NVMe tier, the probe cache, the rank count, and the candidate's figures.
#include "launcher/local_machine.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/shard_bytes.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

fs::path Scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tencache_local_machine_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  return p;
}

JobSpec Job(const std::vector<std::string>& overrides = {}) {
  return ParseJobText("model: {preset: tiny, dtype: fp32}\ntrain: {tokens_per_epoch: 1000, global_batch: 12}\n",
                      "j.yaml", overrides).value();
}

// A machine of two cores and `gib` GiB of RAM, `nvme_gib` free at /tmp.
MachineFacts TwoCores(uint64_t gib, uint64_t nvme_gib = 10) {
  MachineFacts f;
  f.cores = 2;
  f.memory.mem_total = {true, gib << 30, "/proc/meminfo MemTotal"};
  f.nvme_free_bytes = nvme_gib << 30;
  f.nvme_path = "/tmp";
  return f;
}

TEST(LocalMachine, FactsComeFromTheOs) {
  const MachineFacts f = ReadMachineFacts("/tmp/does/not/exist/yet");
  EXPECT_GE(f.cores, 1);
  EXPECT_GT(f.memory.mem_total.bytes.value_or(0), 0u);
  EXPECT_GT(f.memory.mem_available.bytes.value_or(0), 0u);
  EXPECT_GT(f.memory.usable_bytes(), 0u);
  EXPECT_EQ(f.memory.pins_host_memory, f.gpus > 0);
  EXPECT_FALSE(f.hostname.empty());
  EXPECT_GT(f.nvme_free_bytes, 0u);  // measured at the nearest existing parent
}

TEST(LocalMachine, DiskProbeMeasuresAndLeavesNothingBehind) {
  const fs::path dir = Scratch("disk");
  StatusOr<DiskProbe> p = ProbeDisk(dir.string(), 8 << 20);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->read_gbps, 0);
  EXPECT_GT(p->write_gbps, 0);
  EXPECT_EQ(p->bytes, 8u << 20);
  EXPECT_FALSE(fs::exists(dir));  // it made the folder, and removed it
  fs::create_directories(dir);    // a folder that was there stays, empty
  ASSERT_TRUE(ProbeDisk(dir.string(), 8 << 20).ok());
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// A launcher stopped by a signal mid-probe leaves its rank-<pid>.tcnvme: the
// next probe removes it, and leaves the file of a launcher still running.
TEST(LocalMachine, DiskProbeRemovesTheFileOfALauncherThatIsGone) {
  const fs::path dir = Scratch("stale");
  fs::create_directories(dir / ".probe");
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);  // reaped: no process has this PID now
  const fs::path stale = dir / ".probe" / ("rank-" + std::to_string(gone) + ".tcnvme");
  const fs::path running = dir / ".probe" / "rank-1.tcnvme";  // init's PID: always alive
  std::ofstream(stale) << "left by a killed launcher";
  std::ofstream(running) << "another launcher's probe";
  StatusOr<DiskProbe> p = ProbeDisk(dir.string(), 8 << 20);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(running));
  fs::remove_all(dir);
}

TEST(LocalMachine, ProbeCacheRoundTripsByKey) {
  const fs::path file = Scratch("cache") / "probes.json";
  LocalProbes p;
  p.disk = {1.5, 0.5, 4096, "engine"};
  p.compute.dtype = "fp32";
  p.compute.layer_s = 0.25;
  MachineFacts f = ReadMachineFacts("/tmp");
  const std::string key = ProbeCacheKey(Job(), f, 2);
  EXPECT_FALSE(ReadProbeCache(file.string(), key).ok());
  ASSERT_TRUE(WriteProbeCache(file.string(), key, p).ok());
  StatusOr<LocalProbes> back = ReadProbeCache(file.string(), key);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->cached);
  EXPECT_DOUBLE_EQ(back->disk.read_gbps, 1.5);
  EXPECT_DOUBLE_EQ(back->compute.layer_s, 0.25);
  EXPECT_FALSE(ReadProbeCache(file.string(), ProbeCacheKey(Job(), f, 3)).ok());  // another rank count
  EXPECT_NE(ProbeCacheKey(Job({"model.dtype=bf16"}), f, 2), key);
  EXPECT_NE(ProbeCacheKey(Job({"train.compute_threads=1"}), f, 2), key);
  fs::remove_all(file.parent_path());
}

TEST(LocalMachine, RanksFollowCoresAndTheBatch) {
  MachineFacts f;
  f.cores = 8;
  EXPECT_EQ(LocalRanks(Job(), f), 6);                                // 12 sequences: 6 divides, 8 and 7 do not
  EXPECT_EQ(LocalRanks(Job({"train.micro_batch=4"}), f), 3);        // 3 micro-batches
  EXPECT_EQ(LocalRanks(Job({"cluster.ranks_per_node=5"}), f), 5);   // set: it wins
  f.cores = 1;
  EXPECT_EQ(LocalRanks(Job(), f), 1);
}

TEST(LocalMachine, CandidateChargesExactlyTheProbedCompute) {
  const JobSpec job = Job({"train.micro_batch=2"});
  MachineFacts f = TwoCores(8);
  f.cores = 4;  // two ranks of one thread leave the cache two cores
  LocalProbes p;
  p.disk = {2, 1, 0, "x"};
  p.compute.threads = 1;
  p.compute.embed_s = 0.001;
  p.compute.layer_s = 0.01;
  p.compute.head_s = 0.004;
  p.compute.adamw_params_per_s = 1e9;
  p.compute.copy_gbps = 10;
  p.compute.allgather_gbps = 1e6;  // collectives free, to isolate compute
  const LocalCandidate l = MakeLocalCandidate(job, f, p, 2);
  EXPECT_EQ(l.instance.gpu_count, 2);
  EXPECT_TRUE(l.assumptions.device_in_host_memory);
  // The simulated device holds every parameter shard (auto).
  EXPECT_GE(l.instance.gpu_memory_gib * double(1ull << 30), double(ShardBytesPerRank(job.model, job.dtype, 2).bytes[kStateParam]));
  Candidate c = EvaluateCandidate(job, l.instance, l.gpu, 1, l.assumptions);
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_NEAR(c.step.compute_s, 0.001 + job.model.layers * 0.01 + 0.004, 1e-6);
}

// Where the ranks' compute threads take every core, the cache's copies (the
// simulated device's) and NVMe checksums take the compute's time: the step
// grows by exactly the bytes it moves at the probed rates. With cores to
// spare they cost the compute nothing.
TEST(LocalMachine, TheCachesCpuWorkJoinsTheComputeWhereItHasNoCoreOfItsOwn) {
  const JobSpec job = Job({"train.micro_batch=2", "cache.host_budget=3MiB"});
  LocalProbes p;
  p.disk = {200, 100, 0, "x"};  // a fast disk: the compute lane is every block's slowest
  p.compute.threads = 1;
  p.compute.embed_s = 0.001;
  p.compute.layer_s = 0.01;
  p.compute.head_s = 0.004;
  p.compute.adamw_params_per_s = 1e15;  // AdamW free: the vCPUs differ below
  p.compute.copy_gbps = 10;
  p.compute.checksum_gbps = 4;
  p.compute.allgather_gbps = 1e6;
  MachineFacts shared = TwoCores(8), spare = TwoCores(8);
  spare.cores = 4;
  const LocalCandidate ls = MakeLocalCandidate(job, shared, p, 2), lf = MakeLocalCandidate(job, spare, p, 2);
  EXPECT_DOUBLE_EQ(ls.assumptions.cache_copy_cpu_bps, 10e9);
  EXPECT_DOUBLE_EQ(ls.assumptions.cache_checksum_cpu_bps, 4e9);
  EXPECT_EQ(lf.assumptions.cache_copy_cpu_bps, 0);
  const Candidate cs = EvaluateCandidate(job, ls.instance, ls.gpu, 1, ls.assumptions);
  const Candidate cf = EvaluateCandidate(job, lf.instance, lf.gpu, 1, lf.assumptions);
  ASSERT_TRUE(cs.feasible && cf.feasible) << cs.reason << cf.reason;
  ASSERT_GT(cs.step.bytes[Link::kNvmeRead], 0);  // the 2 MiB host sends states to NVMe
  const double cpu = (cs.step.bytes[Link::kH2D] + cs.step.bytes[Link::kD2H]) / 10e9 +
                     (cs.step.bytes[Link::kNvmeRead] + cs.step.bytes[Link::kNvmeWrite]) / 4e9;
  // All of it, but where a block's copy lane was already longer than its
  // compute (the embedding's gradient: few FLOPs), the compute hides that part.
  EXPECT_LE(cs.step.step_s - cf.step.step_s, cpu + 1e-12);
  EXPECT_GE(cs.step.step_s - cf.step.step_s, 0.95 * cpu);
  EXPECT_NEAR(cf.step.compute_s, 0.001 + job.model.layers * 0.01 + 0.004, 1e-6);
}

LocalProbes SomeProbes();

// The simulated device of a 2-rank candidate, GiB.
double LocalDeviceGiB(const JobSpec& job, const MachineFacts& f) {
  return MakeLocalCandidate(job, f, SomeProbes(), 2).instance.gpu_memory_gib;
}

LocalProbes SomeProbes() {
  LocalProbes p;
  p.disk = {2, 1, 0, "x"};
  p.compute.threads = 1;
  p.compute.embed_s = p.compute.head_s = 0.001;
  p.compute.layer_s = 0.01;
  p.compute.adamw_params_per_s = 1e9;
  p.compute.copy_gbps = 10;
  p.compute.allgather_gbps = 1;
  return p;
}

// A pod's cgroup limit, not the node's MemTotal, is the host memory the plan
// budgets: a host budget above it is refused, and the plan says which bound it.
TEST(LocalMachine, CandidateRamIsTheCgroupLimit) {
  MachineFacts f;
  f.cores = 2;
  f.memory.mem_total = {true, 64ull << 30, "/proc/meminfo MemTotal"};
  f.memory.mem_available = {true, 60ull << 30, "/proc/meminfo MemAvailable"};
  f.memory.cgroup_v2 = {true, 2ull << 30, "/sys/fs/cgroup/kubepods/pod/memory.max"};
  f.nvme_free_bytes = 10ull << 30;
  f.nvme_path = "/tmp";
  const LocalCandidate l = MakeLocalCandidate(Job(), f, SomeProbes(), 2);
  EXPECT_DOUBLE_EQ(l.instance.ram_gib, 2.0);
  bool noted = false;
  for (const std::string& n : l.notes) {
    noted |= n.rfind("host memory: 2.00 GiB usable (bound by cgroup v2 memory.max "
                     "(/sys/fs/cgroup/kubepods/pod/memory.max); MemTotal 64.0 GiB", 0) == 0;
  }
  EXPECT_TRUE(noted) << ::testing::PrintToString(l.notes);
  const JobSpec over = Job({"cache.host_budget=3GiB"});
  const Candidate c = EvaluateCandidate(over, l.instance, l.gpu, 1, l.assumptions);
  EXPECT_FALSE(c.feasible);
  EXPECT_NE(c.reason.find("cache.host_budget"), std::string::npos) << c.reason;
}

// Where the device is simulated in host memory, a rank's host budget is what
// is left of its share of RAM after the device tier, activations, gathered
// blocks, buffers and the process itself: the host memory beside the budget
// (host_overhead_bytes) and the budget add up to the share.
TEST(LocalMachine, TheSimulatedDeviceAndTheProcessComeOutOfTheHostBudget) {
  const MachineFacts f = TwoCores(16);
  const JobSpec job = Job({"train.micro_batch=2"});
  const LocalCandidate l = MakeLocalCandidate(job, f, SomeProbes(), 2);
  const Candidate c = EvaluateCandidate(job, l.instance, l.gpu, 1, l.assumptions);
  ASSERT_TRUE(c.feasible) << c.reason;
  const double share = 16.0 * (1ull << 30) * (1 - l.assumptions.host_reserved_fraction) / 2;
  EXPECT_NEAR(double(c.capacity[kCpu] + c.host_overhead_bytes), share, 1.0);
  const uint64_t device = uint64_t(l.instance.gpu_memory_gib * double(1ull << 30));
  EXPECT_GE(c.host_overhead_bytes, device + l.assumptions.host_process_bytes + c.gpu_fixed.activations +
                                       c.gpu_fixed.working_set);
}

// A model whose parameter shards would take more than a tenth of a rank's
// memory gets a simulated device of that tenth (a GPU smaller than the model),
// never less than four of its largest shards.
TEST(LocalMachine, TheSimulatedDeviceIsATenthOfARanksMemoryForALargeModel) {
  MachineFacts f = TwoCores(16, 100);
  const JobSpec big = ParseJobText("model: {preset: gpt2-xl, dtype: fp32}\ntrain: {tokens_per_epoch: 1000, global_batch: 2, "
                                   "micro_batch: 1}\n", "j.yaml").value();
  const double device = LocalDeviceGiB(big, f) * double(1ull << 30);
  EXPECT_NEAR(device, double(8ull << 30) / 10, 1.0);  // a tenth of 8 GiB a rank
  EXPECT_LT(device, double(ShardBytesPerRank(big.model, big.dtype, 2).bytes[kStateParam]));
  f.memory.mem_total.bytes = 1ull << 30;  // a tenth is less than four embedding shards (164 MB each)
  const double four = LocalDeviceGiB(big, f) * double(1ull << 30);
  EXPECT_GE(four, 4.0 * 164099200);  // (50257 + 1024) x 1600 / 2 ranks x 4 bytes, slot-rounded
  EXPECT_LE(four, 4.0 * 164099200 * 1.05);
  // The tiny model fits a tenth: every shard on the device.
  f.memory.mem_total.bytes = 16ull << 30;
  EXPECT_GE(LocalDeviceGiB(Job(), f) * double(1ull << 30), double(ShardBytesPerRank(Job().model, DType::kFp32, 2).bytes[kStateParam]));
}

// A probe whose in-memory reference ran on a cut model (its states would not
// fit) charges what that cut model left over beyond its blocks, not what the
// whole model would.
TEST(LocalMachine, AReferenceOnACutModelIsComparedWithTheCutModel) {
  const MachineFacts f = TwoCores(16);
  const JobSpec job = Job({"train.micro_batch=2"});
  LocalProbes p = SomeProbes();
  p.compute.reference_step_s = 0.5;
  const LocalCandidate whole = MakeLocalCandidate(job, f, p, 2);
  p.compute.reference_layers = 1;
  const LocalCandidate cut = MakeLocalCandidate(job, f, p, 2);
  // The cut model computes (layers - 1) layers less in each of the step's 3
  // micro-steps (12 sequences, 2 ranks, 2 a micro-batch): that much more is
  // overhead (its collectives, a few per cent of it, aside).
  const double less = (job.model.layers - 1) * p.compute.layer_s * 3;
  ASSERT_GT(whole.assumptions.step_overhead_s, 0);
  EXPECT_NEAR(cut.assumptions.step_overhead_s - whole.assumptions.step_overhead_s, less, 0.15 * less);
  bool noted = false;
  for (const std::string& n : cut.notes) noted |= n.find("the model cut to 1 layers") != std::string::npos;
  EXPECT_TRUE(noted) << ::testing::PrintToString(cut.notes);
}

// A reference step shorter than its lanes add up to (the probe's
// back-to-back collectives cost more than the step's own) charges the
// collectives at the share the reference leaves them: the model then predicts
// the reference's own step as measured, where it once kept the probe's excess.
TEST(LocalMachine, AReferenceFasterThanItsLanesChargesTheCollectivesItLeaves) {
  MachineFacts f = TwoCores(16);
  f.cores = 4;  // the cache's copies off the compute's cores: the reference has no cache
  const JobSpec job = Job({"train.micro_batch=2"});
  LocalProbes p = SomeProbes();
  p.compute.allgather_gbps = p.compute.reduce_scatter_gbps = 0.05;
  p.compute.collective_latency_s = 0.008;
  const LocalCandidate probed = MakeLocalCandidate(job, f, p, 2);
  const double lanes = EvaluateCandidate(job, probed.instance, probed.gpu, 1, probed.assumptions).step.step_s;
  const double compute = 3 * (0.001 + job.model.layers * 0.01 + 0.001);  // 3 micro-steps
  ASSERT_GT(lanes, compute + 0.1);  // collectives are most of it
  p.compute.reference_step_s = compute + 0.5 * (lanes - compute);
  const LocalCandidate l = MakeLocalCandidate(job, f, p, 2);
  EXPECT_EQ(l.assumptions.step_overhead_s, 0);
  EXPECT_NEAR(l.assumptions.collective_efficiency, 2.0, 0.1);
  const Candidate c = EvaluateCandidate(job, l.instance, l.gpu, 1, l.assumptions);
  EXPECT_NEAR(c.step.step_s, p.compute.reference_step_s, 1e-4 * p.compute.reference_step_s);  // lanes overlap a little
  bool noted = false;
  for (const std::string& n : l.notes) noted |= n.rfind("collectives: the reference step took", 0) == 0;
  EXPECT_TRUE(noted) << ::testing::PrintToString(l.notes);
  // A reference shorter than the compute alone leaves the collectives nothing.
  p.compute.reference_step_s = compute / 2;
  const LocalCandidate none = MakeLocalCandidate(job, f, p, 2);
  EXPECT_EQ(none.assumptions.collective_latency_s, 0);
  EXPECT_NEAR(EvaluateCandidate(job, none.instance, none.gpu, 1, none.assumptions).step.step_s,
              EvaluateCandidate(job, probed.instance, probed.gpu, 1, probed.assumptions).step.step_s - (lanes - compute),
              0.02 * lanes);
}

// Without a GPU the worker computes on the CPU: its reduce-scatters write the
// gradients into host memory and none passes through the simulated device, so
// the prediction charges none device->host (the run measures 0 B); on a GPU
// the same placement sends gradients down.
TEST(LocalMachine, TheSimulatedDeviceMovesNoGradientDeviceToHost) {
  const JobSpec job = Job({"train.micro_batch=2"});
  const LocalCandidate l = MakeLocalCandidate(job, TwoCores(16), SomeProbes(), 2);
  const Candidate c = EvaluateCandidate(job, l.instance, l.gpu, 1, l.assumptions);
  ASSERT_TRUE(c.feasible) << c.reason;
  ASSERT_GT(c.placement.fraction[kStateGrad][kCpu], 0.0);  // the gradients are off the device
  EXPECT_EQ(c.step.bytes[Link::kD2H], 0.0);
  EXPECT_EQ(c.step.d2h_s, 0.0);
  EXPECT_GT(c.step.bytes[Link::kH2D], 0.0);  // updated parameters still go up
  ModelAssumptions gpu = l.assumptions;
  gpu.device_in_host_memory = false;
  EXPECT_GT(EstimateStep(job, l.instance, l.gpu, 1, c.placement, c.states, 1, 1, gpu).bytes[Link::kD2H], 0.0);
}

TEST(LocalMachine, FactsRoundTripThroughMachineJson) {
  MachineFacts f;
  f.hostname = "box";
  f.cores = 4;
  f.gpus = 1;
  f.gpu_name = "H200";
  f.memory.mem_total = {true, 16ull << 30, "/proc/meminfo MemTotal"};
  f.memory.cgroup_v1 = {true, 4ull << 30, "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  f.memory.memlock = {true, 8ull << 20, "RLIMIT_MEMLOCK"};
  f.memory.pins_host_memory = true;
  f.nvme_path = "/tmp";
  const nlohmann::json j = nlohmann::json::parse(f.ToJson().dump());
  EXPECT_EQ(j["ram_bytes"], 16ull << 30);
  EXPECT_EQ(j["memory"]["bound_by"], "RLIMIT_MEMLOCK");
  StatusOr<MachineFacts> back = MachineFacts::FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), f.ToJson());

  // A machine.json from before the limits were read: MemTotal alone.
  nlohmann::json old = j;
  old.erase("memory");
  StatusOr<MachineFacts> older = MachineFacts::FromJson(old);
  ASSERT_TRUE(older.ok()) << older.status().message();
  EXPECT_EQ(older->memory.usable_bytes(), 16ull << 30);
  EXPECT_EQ(older->memory.bound_by(), "MemTotal");
  EXPECT_FALSE(older->memory.cgroup_v1.known);
  old.erase("ram_bytes");
  EXPECT_FALSE(MachineFacts::FromJson(old).ok());
}

JobSpec HostsJob(const std::string& hosts, const std::string& type) {
  return ParseJobText("model: {preset: tiny, dtype: fp32}\ntrain: {tokens_per_epoch: 1000, global_batch: 8}\n"
                      "cluster: {target: hosts, hosts: " + hosts + ", instance_type: " + type + "}\n",
                      "h.yaml")
      .value();
}

TEST(CatalogHosts, EveryHostIsTheCatalogEntryWithItsPrice) {
  const Catalog catalog = *Catalog::Load(DefaultCatalogPath());
  StatusOr<LocalCandidate> l = MakeCatalogHostsCandidate(HostsJob("[n1, n2]", "g5.xlarge"), catalog);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->nodes, 2);
  EXPECT_EQ(l->instance.type, "g5.xlarge");
  EXPECT_EQ(l->gpu.name, (*catalog.FindInstance("g5.xlarge"))->gpu);
  EXPECT_GT(l->instance.price_on_demand, 0);
  EXPECT_FALSE(l->assumptions.device_in_host_memory);  // a real GPU, the catalog's assumptions
  ASSERT_FALSE(l->notes.empty());
  EXPECT_NE(l->notes[0].find("not measured"), std::string::npos);
  JobSpec job = HostsJob("[n1, n2]", "g5.xlarge");
  job.train.micro_batch = 1;
  const Candidate c = EvaluateCandidate(job, l->instance, l->gpu, l->nodes, l->assumptions);
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_EQ(c.ranks, 2);
  EXPECT_GT(c.cost_per_epoch_usd, 0);
}

TEST(CatalogHosts, MismatchesNameTheKey) {
  const Catalog catalog = *Catalog::Load(DefaultCatalogPath());
  StatusOr<LocalCandidate> l = MakeCatalogHostsCandidate(HostsJob("[n1:2, n2:2]", "g5.xlarge"), catalog);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("cluster.hosts': host 'n1' has 2 slot(s), but cluster.instance_type g5.xlarge "
                                      "has 1 GPU(s)"), std::string::npos) << l.status().message();
  l = MakeCatalogHostsCandidate(HostsJob("[n1, n2]", "g5.xlarg"), catalog);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("cluster.instance_type"), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find("did you mean 'g5.xlarge'"), std::string::npos) << l.status().message();
}

TEST(LocalMachine, LinksNameEachInterfaceButLoopback) {
  EXPECT_EQ(ReadLinks("no-such-interface0"), "");
  const std::string all = ReadLinks("");
  EXPECT_EQ(all.find("lo mtu"), std::string::npos) << all;
  EXPECT_EQ(ReadLinks(""), all);  // stable: a cache key
}

}  // namespace
}  // namespace tencache
