// Faults under training (issue #14): an NVMe tier that fails (EIO, ENOSPC, a
// short read, a checksum mismatch) stops the step with an error naming the swap
// file and the offset, and no checkpoint is written from the damaged state; a
// disk that fills while checkpointing leaves the previous checkpoint intact, and
// resuming from it gives the uninterrupted run's losses bit for bit.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>

#include "cachemgr/fault_injection_file_env.h"
#include "trainer_fixture.h"
#include "worker/checkpoint.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

std::string Scratch(const std::string& tag) {
  return (fs::temp_directory_path() / ("tencache_fault_test_" + std::to_string(getpid()) + "_" + tag)).string();
}

// Small budgets: every step reads and writes shards on NVMe.
JobSpec FaultJob(const std::string& tag, const std::string& ckpt_dir, const std::string& host = "1536KiB") {
  return SmallJob("tencache", tag,
                  {"cache.device_budget=320KiB", "cache.host_budget=" + host, "train.checkpoint_dir=" + ckpt_dir,
                   "train.keep_checkpoints=2"});
}

std::unique_ptr<Trainer> MakeTrainer(const JobSpec& job, Communicator* comm, FileEnv* env = nullptr) {
  StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::Create(job, comm, Corpus(), [](const std::string&) {}, ComputeDevice{}, env);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

void ExpectNamesSwapFileAndOffset(const Status& s) {
  EXPECT_NE(s.message().find(".tcnvme"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset "), std::string::npos) << s.ToString();
}

struct FaultCase {
  const char* name;
  FaultRule rule;
  StatusCode code;
  const char* words;
};

class NvmeFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(NvmeFaultTest, StopsTheStepNamingFileAndOffsetAndNoCheckpointFollows) {
  const FaultCase& c = GetParam();
  const std::string ckpt = Scratch(std::string("ckpt-") + c.name);
  fs::remove_all(ckpt);
  const JobSpec job = FaultJob(std::string("fault-") + c.name, ckpt);
  FaultInjectionFileEnv faulty(PosixFileEnv());
  auto comms = MakeThreadCommunicators(1, 60000);
  std::unique_ptr<Trainer> t = MakeTrainer(job, comms[0].get(), &faulty);
  ASSERT_NE(t, nullptr);
  for (int s = 0; s < 2; ++s) ASSERT_TRUE(t->Step().ok());
  ASSERT_TRUE(t->SaveCheckpoint().ok());

  faulty.AddFault(c.rule);
  StatusOr<StepMetrics> m = t->Step();
  ASSERT_FALSE(m.ok()) << "the fault never reached the step";
  EXPECT_GT(faulty.faults_injected(), 0u);
  EXPECT_EQ(m.status().code(), c.code) << m.status().ToString();
  EXPECT_NE(m.status().message().find(c.words), std::string::npos) << m.status().ToString();
  ExpectNamesSwapFileAndOffset(m.status());

  faulty.ClearFaults();  // the disk is well again; the state is not
  Status saved = t->SaveCheckpoint();
  EXPECT_EQ(saved.code(), StatusCode::kFailedPrecondition) << saved.ToString();
  EXPECT_EQ(t->Step().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(CompleteCheckpoints(ckpt), std::vector<int64_t>{2});
  EXPECT_FALSE(fs::exists(CheckpointFolder(ckpt, 3) + ".tmp"));
  t.reset();
  fs::remove_all(ckpt);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, NvmeFaultTest,
    ::testing::Values(FaultCase{"eio", {FaultKind::kEio, IoOp::kRead}, StatusCode::kIoError, "Input/output error"},
                      FaultCase{"enospc", {FaultKind::kNoSpace, IoOp::kWrite}, StatusCode::kIoError,
                                "No space left on device"},
                      FaultCase{"short", {FaultKind::kShortIo, IoOp::kRead}, StatusCode::kIoError, "short I/O"},
                      FaultCase{"checksum", {FaultKind::kCorruptRead, IoOp::kRead}, StatusCode::kCorruption,
                                "checksum mismatch"}),
    [](const ::testing::TestParamInfo<FaultCase>& i) { return std::string(i.param.name); });

// The checkpoint reads shards that live on NVMe: a fault there fails it with
// the file and offset, and the previous checkpoint stays the newest.
TEST(CheckpointFaults, AFaultReadingShardsForACheckpointCommitsNothing) {
  for (FaultKind kind : {FaultKind::kEio, FaultKind::kCorruptRead}) {
    const std::string tag = std::string("ckread-") + FaultKindName(kind)[0];
    const std::string ckpt = Scratch(tag);
    fs::remove_all(ckpt);
    const JobSpec job = FaultJob(tag, ckpt, "1024KiB");  // near the least: most states live on NVMe
    FaultInjectionFileEnv faulty(PosixFileEnv());
    auto comms = MakeThreadCommunicators(1, 60000);
    std::unique_ptr<Trainer> t = MakeTrainer(job, comms[0].get(), &faulty);
    ASSERT_NE(t, nullptr);
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(t->Step().ok());
    ASSERT_TRUE(t->SaveCheckpoint().ok());
    for (int s = 2; s < 4; ++s) ASSERT_TRUE(t->Step().ok());
    faulty.AddFault({kind, IoOp::kRead});
    Status saved = t->SaveCheckpoint();
    ASSERT_FALSE(saved.ok()) << FaultKindName(kind) << ": no shard of the checkpoint was on NVMe";
    ExpectNamesSwapFileAndOffset(saved);
    EXPECT_EQ(CompleteCheckpoints(ckpt), std::vector<int64_t>{2}) << FaultKindName(kind);
    EXPECT_FALSE(fs::exists(CheckpointFolder(ckpt, 4) + ".tmp")) << FaultKindName(kind);
    t.reset();
    fs::remove_all(ckpt);
  }
}

// A small tmpfs as train.checkpoint_dir: the checkpoint after step 2 fits, the
// one after step 4 does not. Needs root (mount); skipped without.
TEST(CheckpointFaults, ADiskThatFillsWhileCheckpointingKeepsThePreviousOneAndResumesFromIt) {
  const std::string probe_dir = Scratch("full-probe"), mnt = Scratch("full");
  fs::remove_all(probe_dir);
  fs::create_directories(mnt);
  // One checkpoint's size, measured.
  uint64_t one = 0;
  {
    const JobSpec job = FaultJob("full-a", probe_dir);
    auto comms = MakeThreadCommunicators(1, 60000);
    std::unique_ptr<Trainer> t = MakeTrainer(job, comms[0].get());
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->Step().ok());
    ASSERT_TRUE(t->SaveCheckpoint().ok());
    for (const auto& f : fs::recursive_directory_iterator(probe_dir)) {
      if (f.is_regular_file()) one += f.file_size();
    }
    fs::remove_all(probe_dir);
  }
  const std::string size = "size=" + std::to_string((one * 3 / 2 + 4095) / 4096 * 4096);
  if (::mount("tencache-full", mnt.c_str(), "tmpfs", 0, size.c_str()) != 0) {
    fs::remove_all(mnt);
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << "); needs root";
  }
  struct Unmount {
    std::string at;
    ~Unmount() {
      ::umount(at.c_str());
      std::error_code ec;
      fs::remove_all(at, ec);
    }
  } unmount{mnt};

  const JobSpec job = FaultJob("full-b", mnt);
  std::vector<double> whole;
  {
    const JobSpec free_job = FaultJob("full-c", Scratch("full-free"));
    auto comms = MakeThreadCommunicators(1, 60000);
    std::unique_ptr<Trainer> t = MakeTrainer(free_job, comms[0].get());
    ASSERT_NE(t, nullptr);
    for (int s = 0; s < 6; ++s) whole.push_back(t->Step()->loss);
  }
  {
    auto comms = MakeThreadCommunicators(1, 60000);
    std::unique_ptr<Trainer> t = MakeTrainer(job, comms[0].get());
    ASSERT_NE(t, nullptr);
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(t->Step().ok());
    ASSERT_TRUE(t->SaveCheckpoint().ok());
    for (int s = 2; s < 4; ++s) ASSERT_TRUE(t->Step().ok());
    Status full = t->SaveCheckpoint();
    ASSERT_FALSE(full.ok()) << "the second checkpoint fit in " << size;
    EXPECT_NE(full.message().find("No space left on device"), std::string::npos) << full.ToString();
    EXPECT_NE(full.message().find(mnt), std::string::npos) << full.ToString();
    EXPECT_EQ(CompleteCheckpoints(mnt), std::vector<int64_t>{2});
    EXPECT_FALSE(fs::exists(CheckpointFolder(mnt, 4) + ".tmp")) << "a failed attempt's files take the space";
  }
  auto comms = MakeThreadCommunicators(1, 60000);
  std::unique_ptr<Trainer> t = MakeTrainer(job, comms[0].get());
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Resume().ok());
  ASSERT_EQ(t->step(), 2);
  for (int s = 2; s < 6; ++s) {
    StatusOr<StepMetrics> m = t->Step();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->loss, whole[size_t(s)]) << "step " << s;  // bitwise
  }
}

}  // namespace
}  // namespace tencache
