// Checkpoint and resume (worker/checkpoint.h): a run stopped after step 6 and
// resumed from its checkpoint gives the uninterrupted run's losses bit for bit
// (1 rank through the NVMe tier in fp32, bf16 and fp16; 2 ranks in fp32); one
// resumed on another world size continues within 1e-5 of it (fp32); and a
// checkpoint that cannot continue the job is refused with the reason.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "trainer_fixture.h"
#include "worker/checkpoint.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

std::string CkptDir(const std::string& tag) {
  return (fs::temp_directory_path() / ("tencache_ckpt_test_" + std::to_string(getpid()) + "_" + tag)).string();
}

JobSpec CkptJob(const std::string& policy, const std::string& tag, std::vector<std::string> extra = {}) {
  extra.push_back("train.checkpoint_dir=" + CkptDir(tag));
  return SmallJob(policy, tag, extra);
}

// Steps [first, last) of `job` on `comm`: resumed when first > 0, with a
// checkpoint after step `save_at` (when > 0).
std::vector<StepMetrics> Run(const JobSpec& job, Communicator* comm, int first, int last, int save_at) {
  std::vector<StepMetrics> out;
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comm, Corpus(), [](const std::string&) {});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return out;
  if (first > 0) {
    Status s = (*t)->Resume();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return out;
    EXPECT_EQ((*t)->step(), first);
  }
  for (int s = first; s < last; ++s) {
    StatusOr<StepMetrics> m = (*t)->Step();
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) break;
    out.push_back(*m);
    if (s + 1 == save_at) {
      Status saved = (*t)->SaveCheckpoint();
      EXPECT_TRUE(saved.ok()) << saved.ToString();
    }
  }
  return out;
}

std::vector<StepMetrics> RunOnRanks(const JobSpec& job, int ranks, int first, int last, int save_at) {
  auto comms = MakeThreadCommunicators(ranks, 120000);
  std::vector<std::vector<StepMetrics>> per(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { per[r] = Run(job, comms[r].get(), first, last, save_at); });
  }
  for (auto& t : threads) t.join();
  return per[0];
}

void ExpectResumedBitwise(const JobSpec& job, int ranks, const std::string& what) {
  fs::remove_all(job.train.checkpoint_dir);
  const std::vector<StepMetrics> whole = RunOnRanks(job, ranks, 0, 10, 0);
  const std::vector<StepMetrics> before = RunOnRanks(job, ranks, 0, 6, 6);
  const std::vector<StepMetrics> after = RunOnRanks(job, ranks, 6, 10, 0);
  ASSERT_EQ(whole.size(), 10u) << what;
  ASSERT_EQ(before.size(), 6u) << what;
  ASSERT_EQ(after.size(), 4u) << what;
  for (int s = 0; s < 6; ++s) EXPECT_EQ(before[s].loss, whole[s].loss) << what << ", step " << s;
  for (int s = 6; s < 10; ++s) {
    EXPECT_EQ(after[s - 6].step, s) << what;
    EXPECT_EQ(after[s - 6].loss, whole[s].loss) << what << ", step " << s;  // bitwise
    EXPECT_EQ(after[s - 6].loss_scale, whole[s].loss_scale) << what;
  }
}

TEST(Checkpoint, ResumedRunsEqualTheUninterruptedRunBitwise) {
  const std::vector<std::string> nvme = {"cache.device_budget=320KiB", "cache.host_budget=1536KiB"};
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    std::vector<std::string> sets = nvme;
    sets.push_back(std::string("model.dtype=") + dtype);
    sets.push_back("train.loss_scale_window=4");  // fp16: the scale grows across the checkpoint
    const JobSpec job = CkptJob("tencache", std::string("one-") + dtype, sets);
    ExpectResumedBitwise(job, 1, std::string("1 rank, ") + dtype);
    fs::remove_all(job.train.checkpoint_dir);
    fs::remove_all(NvmeDir(std::string("one-") + dtype));
  }
  // An embedding cut into pieces (vocab 4096: six pieces of its fp32 states),
  // through NVMe: each shard's pieces are one record of the checkpoint.
  const JobSpec pieces = CkptJob("tencache", "pieces", {"model.vocab=4096", "model.dtype=bf16",
                                                        "cache.device_budget=2MiB", "cache.host_budget=3MiB"});
  ExpectResumedBitwise(pieces, 1, "1 rank, bf16, an embedding in pieces");
  fs::remove_all(pieces.train.checkpoint_dir);
  fs::remove_all(NvmeDir("pieces"));
  const JobSpec two = CkptJob("none", "two");
  ExpectResumedBitwise(two, 2, "2 ranks, fp32");
  fs::remove_all(two.train.checkpoint_dir);
}

// Issue #40, elastic resume: 10 steps on `from` ranks with a checkpoint after
// step 6, and steps 6..9 resumed from it on `to` ranks (the global batch the
// same: the same samples): the losses within `tolerance` (relative) of the
// uninterrupted run's, as the reductions' order differs.
void ExpectElasticResume(const JobSpec& job, int from, int to, double tolerance, const std::string& what) {
  fs::remove_all(job.train.checkpoint_dir);
  const std::vector<StepMetrics> whole = RunOnRanks(job, from, 0, 10, 6);
  const std::vector<StepMetrics> after = RunOnRanks(job, to, 6, 10, 0);
  ASSERT_EQ(whole.size(), 10u) << what;
  ASSERT_EQ(after.size(), 4u) << what;
  double worst = 0;
  for (int s = 6; s < 10; ++s) {
    EXPECT_EQ(after[s - 6].step, s) << what;
    const double rel = std::fabs(after[s - 6].loss - whole[s].loss) / std::fabs(whole[s].loss);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, tolerance) << what << ", step " << s << ": " << after[s - 6].loss << " vs uninterrupted "
                              << whole[s].loss;
  }
  std::printf("%s: worst relative loss difference over steps 6..9: %.3g\n", what.c_str(), worst);
  fs::remove_all(job.train.checkpoint_dir);
}

TEST(Checkpoint, AnotherWorldSizeResumesWithTheUninterruptedLossesWithin1e5) {
  // 12 sequences a step, one per micro-batch: 12, 6, 4 or 3 micro-batches a rank.
  const std::vector<std::string> batch = {"train.global_batch=12", "train.micro_batch=1"};
  std::vector<std::string> nvme = batch;
  for (const char* v : {"cache.device_budget=320KiB", "cache.host_budget=1536KiB"}) nvme.push_back(v);
  ExpectElasticResume(CkptJob("tencache", "elastic-2-1", nvme), 2, 1, 1e-5, "fp32, 2 -> 1 ranks, through NVMe");
  fs::remove_all(NvmeDir("elastic-2-1"));
  ExpectElasticResume(CkptJob("none", "elastic-1-3", batch), 1, 3, 1e-5, "fp32, 1 -> 3 ranks");
  ExpectElasticResume(CkptJob("none", "elastic-4-2", batch), 4, 2, 1e-5, "fp32, 4 -> 2 ranks");
  // Mixed precision: the 16-bit parameters rounded from the resharded masters
  // (a master a rounding step apart rounds apart: a looser bound).
  std::vector<std::string> bf16 = batch;
  bf16.push_back("model.dtype=bf16");
  ExpectElasticResume(CkptJob("none", "elastic-bf16", bf16), 2, 3, 1e-3, "bf16, 2 -> 3 ranks");
}

TEST(Checkpoint, FilesAreAtomicPrivateAndPruned) {
  const JobSpec job = CkptJob("none", "files", {"train.keep_checkpoints=2"});
  const std::string dir = job.train.checkpoint_dir;
  fs::remove_all(dir);
  auto solo = MakeSoloCommunicator();
  StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, solo.get(), Corpus(), [](const std::string&) {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int s = 0; s < 6; ++s) {
    ASSERT_TRUE((*t)->Step().ok());
    if ((s + 1) % 2 == 0) {
      ASSERT_TRUE((*t)->SaveCheckpoint().ok());
    }
  }
  EXPECT_EQ(CompleteCheckpoints(dir), (std::vector<int64_t>{6, 4}));  // step 2 pruned
  const std::string folder = CheckpointFolder(dir, 6);
  EXPECT_FALSE(fs::exists(folder + ".tmp"));
  struct stat st;
  ASSERT_EQ(::stat((folder + "/" + RankFileName(0)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  StatusOr<CheckpointManifest> m = ReadManifest(folder);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 6);
  EXPECT_EQ(m->world_size, 1);
  EXPECT_EQ(m->ranks[0].bytes, uint64_t(fs::file_size(folder + "/" + RankFileName(0))));
  fs::remove_all(dir);
}

Status ResumeStatus(const JobSpec& job, int ranks = 1) {
  auto comms = MakeThreadCommunicators(ranks, 120000);
  std::vector<Status> out(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(job, comms[r].get(), Corpus(), [](const std::string&) {});
      out[r] = t.ok() ? (*t)->Resume() : t.status();
    });
  }
  for (auto& t : threads) t.join();
  return out[0];
}

TEST(Checkpoint, ACheckpointThatCannotContinueTheJobIsRefusedWithTheReason) {
  const JobSpec job = CkptJob("none", "refuse");
  const std::string dir = job.train.checkpoint_dir;
  fs::remove_all(dir);
  Status none = ResumeStatus(job);
  EXPECT_EQ(ExitCodeFor(none), 2) << none.ToString();
  EXPECT_NE(none.message().find("no complete checkpoint"), std::string::npos) << none.message();

  RunOnRanks(job, 1, 0, 3, 3);
  // Another job: another seed.
  JobSpec other = job;
  other.train.seed = 99;
  Status s = ResumeStatus(other);
  EXPECT_EQ(ExitCodeFor(s), 2) << s.ToString();
  EXPECT_NE(s.message().find("another job"), std::string::npos) << s.message();
  // Another world size is resharded (Checkpoint.AnotherWorldSizeResumes...), not refused.
  s = ResumeStatus(job, 2);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // A flipped byte: the file and the offset are named.
  const std::string file = CheckpointFolder(dir, 3) + "/" + RankFileName(0);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    char c = 0;
    f.read(&c, 1);
    f.seekp(1000);
    c = char(c ^ 0x40);
    f.write(&c, 1);
  }
  s = ResumeStatus(job);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("checksum mismatch at offset 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(file), std::string::npos) << s.message();
  // Truncated.
  fs::resize_file(file, 100);
  s = ResumeStatus(job);
  EXPECT_EQ(ExitCodeFor(s), 2) << s.ToString();
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  // A checkpoint folder that is a symbolic link is not followed.
  fs::remove_all(dir);
  fs::create_directories(dir + "-real");
  fs::create_symlink(dir + "-real", dir);
  s = ResumeStatus(job);
  EXPECT_EQ(ExitCodeFor(s), 2) << s.ToString();
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
  fs::remove(dir);
  fs::remove_all(dir + "-real");
}

// A rank file of a 2B-parameter run passes 4 GiB (its shards back to back):
// its size and every CRC32C, to 0xffffffff, come back from the manifest exact.
TEST(Checkpoint, AManifestKeepsRankFilesPastFourGibAndFull32BitChecksums) {
  const std::string folder = CkptDir("manifest-past-4gib");
  fs::remove_all(folder);
  fs::create_directories(folder);
  CheckpointManifest m;
  m.step = 12;
  m.world_size = 2;
  m.identity = "model custom";
  m.optimizer_steps = 12;
  m.ranks = {{30'000'000'123ull, {0xffffffffu, 0x80000000u, 0u}},
             {(uint64_t{1} << 32) + 4096, {1u, 0xdeadbeefu, 0x7fffffffu}}};
  ASSERT_TRUE(WriteManifest(folder, m).ok());
  StatusOr<CheckpointManifest> back = ReadManifest(folder);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->ranks.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(back->ranks[r].bytes, m.ranks[r].bytes) << r;
    EXPECT_EQ(back->ranks[r].shard_crc, m.ranks[r].shard_crc) << r;
  }
  fs::remove_all(folder);
}

}  // namespace
}  // namespace tencache
