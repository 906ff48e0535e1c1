// Faults under training: an NVMe tier that fails (EIO, ENOSPC, a short read, a
// checksum mismatch) stops the step with an error naming the swap file and the
// offset, and no checkpoint is written from the damaged state; a disk that
// fills while checkpointing leaves the previous checkpoint intact, and resuming
// from it gives the uninterrupted run's losses bit for bit; a policy's eviction
// of a device victim whose write-back fails stops the step naming the block.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>

#include "cachemgr/fault_injection_file_env.h"
#include "scheduler/plan.h"
#include "scheduler/profiler.h"
#include "trainer_fixture.h"
#include "worker/checkpoint.h"
#include "worker/link_calibrator.h"
#include "worker/prefetch_driver.h"

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

// A policy's device victims (the tencache plan's, zero-infinity's released
// blocks) leave through the prefetch driver's eviction. On this build the
// device tier is host memory: the victim's copy down to the host cannot fail
// itself, and a parameter's device copy is usually clean (nothing to write).
// The eviction writes back when the device holds the only copy (the host's was
// evicted while it was on the device, or it was written there) and then needs
// a host slot; with the host tier full of dirty shards that slot's write-back
// to NVMe is where the eviction fails. It must fail the driver's hook, and so
// the step, naming the victim block and the swap file.
class PlannedEvictionFaultTest : public ::testing::Test {
 protected:
  static constexpr int kBlocks = 6;
  static constexpr size_t kElems = 4096;  // 16 KiB fp32 shards: every kind one size class
  static constexpr uint64_t kShard = kElems * 4;

  PlannedEvictionFaultTest() : dir_(Scratch("eviction")), faulty_(PosixFileEnv()) {
    fs::create_directories(dir_);
    layout_.counts.assign(kBlocks, kElems);
    CachedStoreOptions o;
    o.device_budget = 3 * kShard;  // the plan evicts: the parameters do not all fit
    o.host_budget = 6 * kShard;    // a fraction of the 24 shards
    o.nvme_dir = dir_;
    o.file_env = &faulty_;
    auto store = MakeCachedShardStore(layout_, o);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (store.ok()) store_ = std::move(*store);
  }
  ~PlannedEvictionFaultTest() override {
    driver_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  static TraceHeader Fp32Header() {
    TraceHeader h;
    h.dtype = "fp32";
    return h;
  }
  // The step every run repeats: forward over the blocks, backward back.
  Trace Step() const {
    Trace t;
    t.header = Fp32Header();
    double now = 0;
    auto access = [&](int b, Phase phase) {
      TraceEvent e;
      e.id = TensorId(b);
      e.name = "block" + std::to_string(b);
      e.phase = phase;
      e.block = b;
      e.bytes = kShard;
      e.start_s = now;
      e.end_s = now += 1e-3;
      t.events.push_back(e);
    };
    for (int b = 0; b < kBlocks; ++b) access(b, Phase::kForward);
    for (int b = kBlocks - 1; b >= 0; --b) access(b, Phase::kBackward);
    return t;
  }

  std::unique_ptr<PrefetchDriver> MakeDriver(CachePolicy policy) {
    job_.cache.policy = policy;
    PrefetchDriverContext c;
    c.job = &job_;
    c.store = store_.get();
    c.layout = &layout_;
    c.profiler = &profiler_;
    c.calibrator = &calibrator_;
    c.reads_stored_gradient.assign(kBlocks, false);
    c.state_bytes = 4 * kBlocks * kShard;
    c.log = [](const std::string&) {};
    return MakePrefetchDriver(std::move(c));
  }

  // `victim`'s parameters only on the device (written there), then every other
  // shard written on the host: the host tier ends full of shards whose only
  // copy it holds.
  void OnlyOnTheDeviceWithTheHostFullOfDirtyShards(int victim) {
    ASSERT_TRUE(store_->Acquire(victim, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kOverwrite).ok());
    for (int b = 0; b < kBlocks; ++b) {
      for (ShardKind kind : {ShardKind::kParam, ShardKind::kGrad, ShardKind::kAdamM, ShardKind::kAdamV}) {
        if (b == victim && kind == ShardKind::kParam) continue;
        StatusOr<ShardRef> r = store_->Acquire(b, kind, 0, Tier::kHost, AccessMode::kOverwrite);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
      }
    }
    ASSERT_TRUE(store_->cache()->IsResident(ShardTensorId(victim, ShardKind::kParam), Tier::kDevice));
    ASSERT_FALSE(store_->cache()->IsResident(ShardTensorId(victim, ShardKind::kParam), Tier::kHost));
  }

  void ExpectFailureNamingBlockAndFile(const Status& s, int victim) {
    EXPECT_FALSE(s.ok()) << "the failed eviction of block " << victim << " was swallowed";
    EXPECT_GT(faulty_.faults_injected(), 0u);
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_NE(s.message().find("evicting block " + std::to_string(victim) + "'s parameters"), std::string::npos)
        << s.ToString();
    ExpectNamesSwapFileAndOffset(s);
    // Nothing lost: the victim's only copy stays on the device.
    EXPECT_TRUE(store_->cache()->IsResident(ShardTensorId(victim, ShardKind::kParam), Tier::kDevice));
  }

  const std::string dir_;
  FaultInjectionFileEnv faulty_;
  ShardLayout layout_;
  std::unique_ptr<ShardStore> store_;
  JobSpec job_;
  Profiler profiler_{Fp32Header(), [](const std::string&) {}};
  LinkCalibrator calibrator_;
  std::unique_ptr<PrefetchDriver> driver_;
};

TEST_F(PlannedEvictionFaultTest, TencacheFailsTheAccessNamingThePlansVictim) {
  ASSERT_NE(store_, nullptr);
  driver_ = MakeDriver(CachePolicy::kTencache);
  // The profiled step, and the plan built from it.
  const Trace step = Step();
  std::vector<TensorId> acquires;
  for (const TraceEvent& e : step.events) {
    AccessRecord a;
    a.id = e.id;
    a.name = e.name;
    a.phase = e.phase;
    a.block = e.block;
    a.bytes = e.bytes;
    a.start_s = e.start_s;
    a.end_s = e.end_s;
    profiler_.RecordAccess(a);
    acquires.push_back(ShardTensorId(e.block, ShardKind::kParam));
  }
  ASSERT_TRUE(profiler_.EndStep().ok());
  const CacheMetrics metrics = store_->EndStep();
  ASSERT_TRUE(driver_->OnNewProfile({profiler_.profile(), metrics, acquires}).ok());
  ASSERT_TRUE(profiler_.following());
  StatusOr<PrefetchPlan> plan = PrefetchPlan::Build(profiler_.profile(), calibrator_.links(), calibrator_.budgets());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // The first access before which the plan evicts, and its first victim.
  int64_t access = -1;
  int victim = -1;
  for (uint64_t k = 0; k < plan->sequence().size() && victim < 0; ++k) {
    for (const PlannedFetch* f : plan->FetchesBefore(DeviceAccessIndex(k))) {
      if (f->evict.empty()) continue;
      access = int64_t(k);
      victim = int(f->evict.front());
      break;
    }
  }
  ASSERT_GE(victim, 0) << "the plan evicts nothing";
  OnlyOnTheDeviceWithTheHostFullOfDirtyShards(victim);

  faulty_.AddFault({FaultKind::kEio, IoOp::kWrite});
  driver_->BeginStep();
  ExpectFailureNamingBlockAndFile(driver_->BeforeAccess(DeviceAccessIndex(uint64_t(access))), victim);
}

TEST_F(PlannedEvictionFaultTest, ZeroInfinityFailsTheAccessNamingTheReleasedBlock) {
  ASSERT_NE(store_, nullptr);
  driver_ = MakeDriver(CachePolicy::kZeroInfinity);
  const int victim = 0;
  OnlyOnTheDeviceWithTheHostFullOfDirtyShards(victim);

  faulty_.AddFault({FaultKind::kEio, IoOp::kWrite});
  driver_->BeginStep();  // the first step: every block is released after its use
  ASSERT_TRUE(driver_->BeforeAccess(DeviceAccessIndex(0)).ok());
  ASSERT_TRUE(driver_->OnAccess(DeviceAccessIndex(0), victim).ok());
  ExpectFailureNamingBlockAndFile(driver_->AfterAccess(DeviceAccessIndex(0), victim), victim);
}

}  // namespace
}  // namespace tencache
