// The disk check before a run: what each place will hold (NVMe tier,
// checkpoints, final weights), demands on one file system added up, and a
// refusal that names every key with the numbers.
#include "launcher/disk_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

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
  const std::vector<DiskDemand> fresh = RunDiskDemands(job, 1000, 2, "/runs/r", 0);
  ASSERT_EQ(fresh.size(), 3u);
  EXPECT_EQ(fresh[0].key, "cache.nvme_path");
  EXPECT_EQ(fresh[0].bytes, 2000u);
  EXPECT_EQ(fresh[1].key, "train.checkpoint_dir");
  EXPECT_EQ(fresh[1].bytes, 3 * CheckpointBytes(job, 1));  // keep 2, and a third being written
  EXPECT_EQ(fresh[2].bytes, job.model.ParamCount() * 4);
  // Resuming beside two complete checkpoints: one more at a time.
  EXPECT_EQ(RunDiskDemands(job, 1000, 2, "/runs/r", 2)[1].bytes, CheckpointBytes(job, 1));
  // Nothing on NVMe, no checkpoints: the weights alone.
  const std::vector<DiskDemand> plain = RunDiskDemands(Job({"train.checkpoint_every=0"}), 0, 2, "/runs/r", 0);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].key, "--out");
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
  EXPECT_EQ(CountCheckpoints(dir.string()), 2);
  EXPECT_EQ(CountCheckpoints((dir / "absent").string()), 0);
  const FsSpace s = QueryFsSpace((dir / "not" / "made" / "yet").string());
  EXPECT_TRUE(s.known);
  EXPECT_GT(s.free_bytes, 0u);
  EXPECT_EQ(s.device, QueryFsSpace(dir.string()).device);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
