// The disk check before a run: what each place will hold (NVMe tier,
// checkpoints, final weights), demands on one file system added up, and a
// refusal that names every key with the numbers.
#include "common/checkpoint_dir.h"
#include "launcher/disk_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "common/shard_bytes.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

JobSpec Job(const std::vector<std::string>& overrides = {}) {
  return ParseJobText("model: {preset: tiny, dtype: fp32}\n"
                      "cluster: {nodes: 1, ranks_per_node: 1}\n"
                      "train: {tokens_per_epoch: 1000, global_batch: 4, checkpoint_every: 10, keep_checkpoints: 2,\n"
                      "        checkpoint_dir: /ckpt}\n"
                      "cache: {nvme_path: /nvme}\n",
                      "j.yaml", overrides).value();
}

TEST(DiskCheck, ACheckpointHoldsTwelveBytesAParameterInEveryDtype) {
  // One rank: no padding. fp32 keeps the parameter as its master; mixed
  // precision a separate fp32 master; both keep two fp32 moments.
  for (const char* dtype : {"fp32", "bf16"}) {
    const JobSpec job = Job({std::string("model.dtype=") + dtype});
    EXPECT_EQ(CheckpointBytes(job, 1), 12 * job.model.ParamCount()) << dtype;
  }
}

TEST(DiskCheck, DemandsCountRanksAndTheCheckpointsAtThePeak) {
  const JobSpec job = Job();
  const uint64_t one = CheckpointBytes(job, 1);
  const std::vector<DiskDemand> fresh = RunDiskDemands(job, 1000, 2, "/runs/r", 0);
  ASSERT_EQ(fresh.size(), 4u);
  EXPECT_EQ(fresh[0].key, "cache.nvme_path");
  EXPECT_EQ(fresh[0].bytes, 2000u);
  EXPECT_FALSE(fresh[0].transient);
  EXPECT_EQ(fresh[1].key, "train.checkpoint_dir");
  EXPECT_EQ(fresh[1].bytes, 2 * one);  // keep 2
  EXPECT_FALSE(fresh[1].transient);
  EXPECT_EQ(fresh[2].bytes, one);      // and a third while it is written
  EXPECT_TRUE(fresh[2].transient);
  EXPECT_EQ(fresh[3].bytes, job.model.ParamCount() * 4);
  EXPECT_TRUE(fresh[3].transient);
  // Resuming beside two complete checkpoints: one more, for a while.
  const std::vector<DiskDemand> resumed = RunDiskDemands(job, 1000, 2, "/runs/r", 2);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[1].bytes, one);
  EXPECT_TRUE(resumed[1].transient);
  // No periodic checkpoints: still the one a stop writes.
  EXPECT_EQ(RunDiskDemands(Job({"train.checkpoint_every=0"}), 0, 2, "/runs/r", 0).size(), 3u);
  // Nothing on NVMe, no checkpoints at all: the weights alone.
  const std::vector<DiskDemand> plain =
      RunDiskDemands(Job({"train.checkpoint_every=0", "train.checkpoint_on_stop=false"}), 0, 2, "/runs/r", 0);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].key, "--out");
}

// Each rank's NVMe file is allocated whole at its budget, whatever the plan
// places there: the budget is the demand, up to every shard's extent (each
// cache tensor's bytes rounded up to 4 KiB, as the tensor cache reserves them).
TEST(DiskCheck, TheNvmeFileIsTheBudgetUpToEveryShard) {
  JobSpec job = Job();
  uint64_t every = 0;
  for (uint64_t b : ShardTensorBytes(job.model, job.dtype, 2).all) every += (b + 4095) / 4096 * 4096;
  job.cache.nvme_budget.reset();
  EXPECT_EQ(NvmeFileBytes(job, 2), every / 4096 * 4096);
  job.cache.nvme_budget = every / 3 + 100;
  EXPECT_EQ(NvmeFileBytes(job, 2), (every / 3 + 100) / 4096 * 4096);
  job.cache.nvme_budget = 1000 * every;
  EXPECT_EQ(NvmeFileBytes(job, 2), every / 4096 * 4096);
  job.cache.nvme_budget = 0;
  EXPECT_EQ(NvmeFileBytes(job, 2), 0u);
}

TEST(DiskCheck, TransientDemandsOnOneFileSystemCountOnceTheLargest) {
  // 600 lasting + max(300, 350) transient = 950 of 1000: fits; a 500 transient does not.
  std::vector<DiskDemand> d = {{"cache.nvme_path", "/d", 600, "nvme"},
                               {"train.checkpoint_dir", "/d", 300, "one more checkpoint", true},
                               {"--out", "/d", 350, "weights", true}};
  auto query = [](const std::string&) { return FsSpace{1, 1000, true}; };
  EXPECT_TRUE(CheckDiskSpace(d, query).ok());
  d[1].bytes = 500;
  const Status s = CheckDiskSpace(d, query);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("one more checkpoint"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("weights"), std::string::npos) << s.message();  // the smaller transient is not summed
  EXPECT_NE(s.message().find("1.07 KiB"), std::string::npos) << s.message();  // 600 + 500
}

TEST(DiskCheck, DemandsOnOneFileSystemAreAddedUp) {
  const std::vector<DiskDemand> d = {{"cache.nvme_path", "/nvme", 600, "nvme"},
                                     {"train.checkpoint_dir", "/ckpt", 500, "ckpt"}};
  std::map<std::string, FsSpace> fs = {{"/nvme", {1, 1000, true}}, {"/ckpt", {1, 1000, true}}};
  auto query = [&](const std::string& p) { return fs[p]; };
  const Status one = CheckDiskSpace(d, query);
  ASSERT_EQ(one.code(), StatusCode::kInvalidArgument);
  for (const char* part : {"cache.nvme_path /nvme", "train.checkpoint_dir /ckpt", "600 B", "500 B", "free"}) {
    EXPECT_NE(one.message().find(part), std::string::npos) << part << " in: " << one.message();
  }
  fs["/ckpt"].device = 2;  // two disks: each demand fits its own
  EXPECT_TRUE(CheckDiskSpace(d, query).ok());
  fs["/ckpt"] = {2, 100, true};
  const Status two = CheckDiskSpace(d, query);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.message().find("cache.nvme_path"), std::string::npos) << two.message();
  fs["/ckpt"].known = false;  // a place that cannot be queried is not checked
  EXPECT_TRUE(CheckDiskSpace(d, query).ok());
}

TEST(DiskCheck, QueriesTheNearestExistingFolderAndCountsCompleteCheckpoints) {
  const fs::path dir = fs::temp_directory_path() / ("tencache_disk_check_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "step-00000010");
  fs::create_directories(dir / "step-00000020");
  fs::create_directories(dir / "step-00000030.tmp");
  EXPECT_EQ(CompleteCheckpoints(dir.string()).size(), 2u);
  EXPECT_TRUE(CompleteCheckpoints((dir / "absent").string()).empty());
  const FsSpace s = QueryFsSpace((dir / "not" / "made" / "yet").string());
  EXPECT_TRUE(s.known);
  EXPECT_GT(s.free_bytes, 0u);
  EXPECT_EQ(s.device, QueryFsSpace(dir.string()).device);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
