// Runs the tencache-launch binary as a user would and checks exit codes and
// messages: 0 and a table or JSON for good input, 2 and one clear message for
// each kind of bad input.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "launcher/local_machine.h"

namespace {

namespace fs = std::filesystem;

using tencache::testing::CommandResult;

// tencache-launch with `args`, stderr merged into the output.
CommandResult RunLaunch(const std::string& args) {
  return tencache::testing::RunCommand(std::string(TENCACHE_LAUNCH_BIN) + " " + args + " 2>&1");
}

std::string Example(const std::string& name) {
  return std::string(TENCACHE_SOURCE_DIR) + "/configs/examples/" + name + ".yaml";
}

class BadJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes `text` as job.yaml, runs plan on it and expects exit 2 and `needles`.
  void Expect(const std::string& text, std::initializer_list<const char*> needles, const std::string& extra = "") {
    std::string path = (dir_ / "job.yaml").string();
    std::ofstream(path) << text;
    CommandResult r = RunLaunch("plan " + path + " " + extra);
    EXPECT_EQ(r.code, 2) << r.out;
    for (const char* n : needles) EXPECT_NE(r.out.find(n), std::string::npos) << "'" << n << "' not in: " << r.out;
  }
  fs::path dir_;
};

const char kGood[] = "model: {preset: tiny}\ntrain: {tokens_per_epoch: 1000000, micro_batch: 2, global_batch: 4}\n";

// A dry run reads this machine's probes from the cache beside the run folder
// and says whether a run would measure again: not while the load per core,
// the CPU, the cores and the build are as the probe recorded them; yes, naming
// what differs, once one of them is not.
TEST(LaunchCli, ACachedProbeStandsOnlyWhileTheMachineIsAsItWas) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_cli_probe_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  tencache::JobSpec job = tencache::LoadJobFile(Example("quickstart")).value();
  tencache::MachineFacts facts = tencache::ReadMachineFacts(job.cache.nvme_path);
  const int ranks = tencache::LocalRanks(job, facts);
  job.train.micro_batch = job.train.global_batch % ranks == 0 ? job.train.global_batch / ranks : 1;  // as probed
  const std::string worker = "/bin/true";
  tencache::LocalProbes probes;
  probes.disk = {1.5, 0.5, 4096, "engine"};
  probes.compute.dtype = "fp32";
  probes.compute.threads = 1;
  probes.compute.embed_s = probes.compute.head_s = 0.001;
  probes.compute.layer_s = 0.01;
  probes.compute.adamw_params_per_s = 1e9;
  probes.compute.copy_gbps = probes.compute.checksum_gbps = 10;
  probes.compute.allgather_gbps = probes.compute.reduce_scatter_gbps = 1;
  probes.conditions = {std::int64_t(std::time(nullptr)) - 3600, tencache::ReadLoadAverage(), facts.cores,
                       tencache::ReadCpuModel(), tencache::WorkerBuild(worker)};
  const std::string cache = (dir / ".probe-cache.json").string();
  const std::string key = tencache::ProbeCacheKey(job, facts, ranks);
  ASSERT_TRUE(tencache::WriteProbeCache(cache, key, probes).ok());
  const std::string dry_run = Example("quickstart") + " --dry-run --out " + (dir / "run").string() + " --worker ";
  CommandResult same = RunLaunch(dry_run + worker);
  EXPECT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find("probe taken 1 h 0 min before this launch"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find(": reused from the probe cache\n"), std::string::npos) << same.out;
  probes.conditions.load1 += 2.0 * facts.cores;  // the probe ran while other work loaded every core
  ASSERT_TRUE(tencache::WriteProbeCache(cache, key, probes).ok());
  CommandResult busy = RunLaunch(dry_run + worker);
  EXPECT_EQ(busy.code, 0) << busy.out;
  EXPECT_NE(busy.out.find("reused from the probe cache; a run would measure again: the load differs"),
            std::string::npos) << busy.out;
  CommandResult other = RunLaunch(dry_run + "/bin/false");  // another worker binary: another build
  EXPECT_NE(other.out.find("a run would measure again: the build differs"), std::string::npos) << other.out;
  fs::remove_all(dir);
}

TEST(LaunchCli, EveryExamplePlans) {
  for (const char* name : {"quickstart", "llama-2-7b", "opt-13b", "llama-2-70b"}) {
    CommandResult r = RunLaunch("plan " + Example(name));
    EXPECT_EQ(r.code, 0) << name << ": " << r.out;
    EXPECT_NE(r.out.find("Chosen:"), std::string::npos) << name << ": " << r.out;
  }
}

// One p4d.24xlarge (1,152 GiB) cannot hold Llama-2-70B's 1.13 TiB of model
// states beside what every rank reserves: the planner spreads them over nodes.
TEST(LaunchCli, LlamaSeventyBOnFortyGigabyteA100sUsesSeveralNodes) {
  CommandResult r = RunLaunch("plan " + Example("llama-2-70b") + " --json --set cluster.instance_types=[p4d.24xlarge]");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["chosen_nodes"].get<int>(), 1);
}

TEST(LaunchCli, JsonOutputParsesAndOverridesApply) {
  CommandResult r = RunLaunch("plan " + Example("quickstart") + " --json --set cluster.instance_types=[g5.xlarge]");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["candidates"].size(), 1u);
  EXPECT_EQ(j["candidates"][0]["instance_type"], "g5.xlarge");
  EXPECT_EQ(j["chosen"], "g5.xlarge");
  EXPECT_EQ(j["model"]["name"], "tiny");
}

TEST(LaunchCli, NoFeasiblePlanExitsNonZeroAndSaysWhatToChange) {
  CommandResult r = RunLaunch("plan " + Example("llama-2-70b") +
                              " --set cluster.instance_types=[g5.xlarge] --set cluster.max_nodes=1");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("No feasible plan."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no feasible plan for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("raise cluster.max_nodes"), std::string::npos) << r.out;
}

TEST(LaunchCli, VersionAndHelpOnEverySubcommand) {
  CommandResult r = RunLaunch("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("tencache-launch 0.1.0"), std::string::npos) << r.out;
  for (const char* sub : {"plan", "run", "report"}) {
    r = RunLaunch(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub << ": " << r.out;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << r.out;
  }
  r = RunLaunch("plan " + Example("quickstart") + " --json --set=train.steps=5");  // --flag=value
  EXPECT_EQ(r.code, 0) << r.out;
  r = RunLaunch("-v");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tencache-launch 0.1.0"), std::string::npos) << r.out;
  // No default outside an option's own range.
  r = RunLaunch("run --help");
  EXPECT_EQ(r.out.find("=-1"), std::string::npos) << r.out;
}

TEST(LaunchCli, CountsTakeTheExponentFormJobFilesTake) {
  CommandResult r = RunLaunch("run " + Example("quickstart") + " --steps 1e3 --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("steps: 1000  # from --set train.steps=1000"), std::string::npos) << r.out;
  r = RunLaunch("run " + Example("quickstart") + " --steps 1.5 --dry-run");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("expected a whole number from 1 to 100000000"), std::string::npos) << r.out;
}

TEST_F(BadJob, MissingFile) {
  CommandResult r = RunLaunch("plan /nonexistent/job.yaml");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent/job.yaml: job file not found"), std::string::npos) << r.out;
}

TEST_F(BadJob, MalformedYaml) { Expect("model: {preset: tiny\n", {"job.yaml:", "malformed YAML"}); }

TEST_F(BadJob, UnknownKey) {
  Expect(std::string(kGood) + "cache: {polcy: lru}\n", {"unknown key 'cache.polcy'", "did you mean 'policy'"});
}

TEST_F(BadJob, WrongType) {
  Expect("model: {preset: tiny}\ntrain: {tokens_per_epoch: many}\n",
         {"job.yaml:2:27", "train.tokens_per_epoch", "expected an integer >= 1", "got 'many'"});
}

TEST_F(BadJob, ZeroSize) { Expect(kGood, {"cache.device_budget", "a positive size"}, "--set cache.device_budget=0"); }

TEST_F(BadJob, SizeThatDoesNotParse) {
  Expect(std::string(kGood) + "cache: {host_budget: 12 bananas}\n", {"cache.host_budget", "got '12 bananas'"});
}

TEST_F(BadJob, UnknownPreset) { Expect("model: {preset: gpt3}\n", {"model.preset", "unknown model preset 'gpt3'"}); }

TEST_F(BadJob, UnknownInstanceType) {
  Expect(std::string(kGood) + "cluster: {instance_types: [g5.xlage]}\n",
         {"cluster.instance_types", "unknown instance type 'g5.xlage'", "did you mean 'g5.xlarge'"});
}

TEST_F(BadJob, HeadsNotDividingHidden) {
  Expect(kGood, {"--set model.heads=5", "model.heads", "divisor of hidden (128)"}, "--set model.heads=5");
}

TEST_F(BadJob, BadFlagsAndCommands) {
  CommandResult r = RunLaunch("plan " + Example("quickstart") + " --jsn");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--jsn (did you mean '--json'?)"), std::string::npos) << r.out;
  r = RunLaunch("run " + Example("quickstart") + " --dryrun");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("(did you mean '--dry-run'?)"), std::string::npos) << r.out;
  r = RunLaunch("plna " + Example("quickstart"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown command 'plna' (did you mean 'plan'?)"), std::string::npos) << r.out;
  r = RunLaunch("$(printf 'pl\\033[2Jan')");  // a terminal escape is never echoed raw
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown command 'pl\\x1b[2Jan'"), std::string::npos) << r.out;
  r = RunLaunch("plan");
  EXPECT_EQ(r.code, 2);
  r = RunLaunch("plan " + Example("quickstart") + " --catalog /nonexistent");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent: catalog not found"), std::string::npos) << r.out;
}

}  // namespace
