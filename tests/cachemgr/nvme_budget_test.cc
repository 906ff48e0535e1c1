// The NVMe budget: extents assigned on a tensor's first write-back within
// TensorCacheOptions::nvme_budget, a clear ResourceExhausted (and no lost data)
// when a write-back would exceed it, budget 0 = no file, the check at Create,
// and extents past 4 GiB (a sparse file).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cache_fixture.h"
#include "cachemgr/nvme_extents.h"
#include "cachemgr/tensor_cache.h"
#include "sparse_file_env.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
using testing::MakeCache;
using testing::UniformSpecs;
constexpr milliseconds kWait(10000);
constexpr uint64_t kBytes = 64 << 10;

TensorCacheOptions Budgets(uint64_t device_slots, uint64_t host_slots, std::optional<uint64_t> nvme_bytes) {
  TensorCacheOptions o;
  o.device_budget = device_slots * kBytes;
  o.host_budget = host_slots * kBytes;
  o.nvme_budget = nvme_bytes;
  o.nvme_budget_key = "cache.nvme_budget";
  o.host_budget_key = "cache.host_budget";
  return o;
}

void WriteTensor(TensorCache* c, TensorId id, uint32_t seed, Tier tier) {
  testing::WriteTensor(c, id, seed, tier, kWait);
}
bool ReadMatches(TensorCache* c, TensorId id, uint32_t seed, Tier tier) {
  return testing::ReadMatches(c, id, seed, tier, kWait);
}

bool ReadsZeros(TensorCache* c, TensorId id, Tier tier) {
  auto h = c->Acquire(id, tier, AccessMode::kRead, kWait);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  if (!h.ok()) return false;
  const auto* p = static_cast<const uint8_t*>(h->data());
  for (uint64_t i = 0; i < h->bytes(); ++i)
    if (p[i] != 0) return false;
  return true;
}

// The budget error names the tensor, the key, the budget, the bytes on NVMe and the bytes needed.
void ExpectBudgetError(const Status& s, const std::string& tensor, const std::string& budget,
                       const std::string& used) {
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  const std::string parts[] = {"tensor '" + tensor + "'", "cache.nvme_budget " + budget + " is exceeded",
                               used + " already on NVMe", "64.0 KiB more needed",
                               "raise cache.nvme_budget or cache.host_budget"};
  for (const std::string& part : parts)
    EXPECT_NE(s.message().find(part), std::string::npos) << "missing \"" << part << "\" in " << s.ToString();
}

class NvmeBudgetTest : public ::testing::Test {
 protected:
  uint64_t FileBytes() const {
    std::error_code ec;
    const uint64_t n = std::filesystem::file_size(testing::NvmeFile(dir_), ec);
    return ec ? 0 : n;
  }
  bool FileExists() const { return std::filesystem::exists(testing::NvmeFile(dir_)); }
  testing::TempDir dir_;
};

TEST_F(NvmeBudgetTest, WriteBackBeyondTheBudgetFailsTheAcquireAndKeepsTheDirtyCopy) {
  auto c = MakeCache(dir_, Budgets(1, 2, kBytes), UniformSpecs(4, kBytes));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(FileBytes(), kBytes);  // min(budget, every tensor's extent)
  WriteTensor(c.get(), 0, 10, Tier::kHost);
  WriteTensor(c.get(), 1, 11, Tier::kHost);
  WriteTensor(c.get(), 2, 12, Tier::kHost);  // 0 goes to NVMe: the one extent the budget holds
  ASSERT_TRUE(c->IsResident(0, Tier::kNvme));
  // 3 needs a host slot; both holders (1, 2) are dirty and NVMe has no room.
  Status s = c->Acquire(3, Tier::kHost, AccessMode::kWrite, kWait).status();
  ExpectBudgetError(s, "t1", "64.0 KiB", "64.0 KiB");
  ExpectBudgetError(c->Prefetch(3, Tier::kHost).Wait(kWait), "t1", "64.0 KiB", "64.0 KiB");
  ExpectBudgetError(c->Discard(1, Tier::kHost).status(), "t1", "64.0 KiB", "64.0 KiB");
  ExpectBudgetError(c->Prefetch(2, Tier::kNvme).Wait(kWait), "t2", "64.0 KiB", "64.0 KiB");
  // Nothing was lost: the dirty copies are where they were, and read back right.
  EXPECT_TRUE(c->IsResident(1, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c.get(), 1, 11, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c.get(), 1, 11, Tier::kDevice));
  EXPECT_TRUE(ReadMatches(c.get(), 2, 12, Tier::kHost));
  // Dropping 2 frees a slot: 0 comes back from NVMe intact.
  ASSERT_TRUE(c->Invalidate(2).ok());
  EXPECT_TRUE(ReadMatches(c.get(), 0, 10, Tier::kHost));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kNvme).used_bytes, kBytes);
  EXPECT_EQ(m.tier(Tier::kNvme).peak_used_bytes, kBytes);
  EXPECT_EQ(m.tier(Tier::kNvme).reserved_bytes, kBytes);
  EXPECT_EQ(m.link(Link::kNvmeWrite).bytes, kBytes);
  EXPECT_EQ(m.allocations_after_setup, 0u);  // a budget failure never grows the pool
  EXPECT_NE(c->Describe().find("cache.nvme_budget 64.0 KiB, file 64.0 KiB"), std::string::npos) << c->Describe();
}

TEST_F(NvmeBudgetTest, DeviceWriteBackBlockedByTheBudgetReachesTheAcquire) {
  auto c = MakeCache(dir_, Budgets(1, 2, kBytes), UniformSpecs(4, kBytes));
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 0, 20, Tier::kHost);
  WriteTensor(c.get(), 1, 21, Tier::kHost);
  WriteTensor(c.get(), 2, 22, Tier::kHost);  // 0 to NVMe: the budget is spent
  {
    auto h = c->Acquire(3, Tier::kDevice, AccessMode::kOverwrite, kWait);  // a device slot, no host slot
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    testing::FillPattern(static_cast<uint8_t*>(h->data()), h->bytes(), 23);
  }
  // Bringing 1 to the device evicts 3, whose write-back needs a host slot, whose
  // holder (2) needs NVMe room.
  ExpectBudgetError(c->Acquire(1, Tier::kDevice, AccessMode::kRead, kWait).status(), "t2", "64.0 KiB", "64.0 KiB");
  EXPECT_TRUE(c->IsResident(3, Tier::kDevice));
  EXPECT_TRUE(ReadMatches(c.get(), 3, 23, Tier::kDevice));
  EXPECT_TRUE(ReadMatches(c.get(), 1, 21, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c.get(), 2, 22, Tier::kHost));
}

TEST_F(NvmeBudgetTest, EvictionPrefersAVictimWhoseWriteBackFits) {
  auto c = MakeCache(dir_, Budgets(1, 3, kBytes), UniformSpecs(4, kBytes));
  ASSERT_NE(c, nullptr);
  WriteTensor(c.get(), 0, 30, Tier::kHost);
  WriteTensor(c.get(), 1, 31, Tier::kHost);
  EXPECT_TRUE(ReadsZeros(c.get(), 3, Tier::kHost));  // never written: clean
  WriteTensor(c.get(), 2, 32, Tier::kHost);          // 0 (least recent) to NVMe
  // 1 is the least recently used, but dirty with no room on NVMe: 3 goes instead.
  EXPECT_TRUE(ReadMatches(c.get(), 0, 30, Tier::kHost));
  EXPECT_TRUE(c->IsResident(1, Tier::kHost));
  EXPECT_FALSE(c->IsResident(3, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c.get(), 1, 31, Tier::kHost));
  EXPECT_EQ(c->Snapshot().tier(Tier::kNvme).used_bytes, kBytes);  // 3's zeros were not saved
}

TEST_F(NvmeBudgetTest, JustLargeEnoughBudgetHoldsExactlyTheTensorsWrittenBack) {
  // Six tensors, four written; two host slots. The written ones all pass through
  // NVMe, the never-written ones (4, 5) never do: four extents are enough.
  auto c = MakeCache(dir_, Budgets(1, 2, 4 * kBytes), UniformSpecs(6, kBytes));
  ASSERT_NE(c, nullptr);
  for (TensorId i = 0; i < 4; ++i) WriteTensor(c.get(), i, 40 + i, Tier::kHost);
  EXPECT_TRUE(ReadsZeros(c.get(), 4, Tier::kHost));  // evicts 2: written back
  EXPECT_TRUE(ReadsZeros(c.get(), 5, Tier::kDevice));  // evicts 3: written back
  for (TensorId i = 0; i < 4; ++i) EXPECT_TRUE(ReadMatches(c.get(), i, 40 + i, Tier::kDevice)) << i;
  EXPECT_TRUE(ReadsZeros(c.get(), 4, Tier::kDevice));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kNvme).used_bytes, 4 * kBytes);
  EXPECT_EQ(m.tier(Tier::kNvme).reserved_bytes, 4 * kBytes);
  EXPECT_EQ(m.link(Link::kNvmeWrite).bytes, 4 * kBytes);
  EXPECT_EQ(FileBytes(), 4 * kBytes);
}

TEST_F(NvmeBudgetTest, UnsetBudgetReservesRoomForEveryTensorButUsesOnlyWhatIsWritten) {
  auto c = MakeCache(dir_, Budgets(1, 2, std::nullopt), UniformSpecs(5, kBytes));
  ASSERT_NE(c, nullptr);
  for (TensorId i = 0; i < 3; ++i) WriteTensor(c.get(), i, 50 + i, Tier::kHost);
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kNvme).reserved_bytes, 5 * kBytes);
  EXPECT_EQ(m.tier(Tier::kNvme).used_bytes, kBytes);
  EXPECT_TRUE(ReadMatches(c.get(), 0, 50, Tier::kHost));
  EXPECT_NE(c->Describe().find("cache.nvme_budget unset"), std::string::npos) << c->Describe();
}

TEST_F(NvmeBudgetTest, ZeroBudgetWithRoomOnTheHostHasNoFile) {
  auto c = MakeCache(dir_, Budgets(1, 4, 0), UniformSpecs(4, kBytes));
  ASSERT_NE(c, nullptr);
  for (TensorId i = 0; i < 4; ++i) WriteTensor(c.get(), i, 60 + i, Tier::kDevice);  // device evictions land on the host
  for (TensorId i = 0; i < 4; ++i) EXPECT_TRUE(ReadMatches(c.get(), i, 60 + i, Tier::kDevice)) << i;
  ExpectBudgetError(c->Discard(0, Tier::kHost).status(), "t0", "0 B", "0 B");  // the only copy: nowhere to go
  EXPECT_TRUE(ReadMatches(c.get(), 0, 60, Tier::kHost));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kNvme).reserved_bytes, 0u);
  EXPECT_EQ(m.tier(Tier::kNvme).used_bytes, 0u);
  EXPECT_EQ(m.link(Link::kNvmeWrite).bytes, 0u);
  EXPECT_FALSE(FileExists());
  EXPECT_NE(c->Describe().find("nvme(no file: cache.nvme_budget 0 B)"), std::string::npos) << c->Describe();
}

TEST_F(NvmeBudgetTest, ZeroBudgetWithTooSmallAHostBudgetFailsAtCreate) {
  Status s = testing::TryMakeCache(dir_, Budgets(1, 3, 0), UniformSpecs(4, kBytes)).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (const char* part : {"need 256 KiB of host slots", "cache.host_budget 192 KiB holds 192 KiB",
                           "cache.nvme_budget is 0", "raise cache.host_budget to at least 256 KiB"})
    EXPECT_NE(s.message().find(part), std::string::npos) << "missing \"" << part << "\" in " << s.ToString();
  EXPECT_FALSE(FileExists());
  // A budget below one 4 KiB extent is no file either.
  s = testing::TryMakeCache(dir_, Budgets(1, 3, 1024), UniformSpecs(4, kBytes)).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("cache.nvme_budget 1.00 KiB holds not one 4 KiB extent"), std::string::npos)
      << s.ToString();
}

constexpr uint64_t kFourGib = uint64_t{1} << 32;

TEST(NvmeExtents, BudgetsAndOffsetsPastFourGibKeepAll64Bits) {
  // A 30 GB file as a 2B-parameter run's: the budget floored to 4 KiB, extents
  // bump-allocated past 2^32 from the file's base.
  const uint64_t budget = 30'000'000'123;
  NvmeExtents e(budget, uint64_t{40} << 30, "cache.nvme_budget", "cache.host_budget");
  EXPECT_EQ(e.capacity(), budget / 4096 * 4096);
  const uint64_t base = uint64_t{3} << 20;
  e.set_base(base);
  EXPECT_EQ(*e.Assign("embed.tokens", (uint64_t{5} << 30) + 4096), base);
  EXPECT_EQ(*e.Assign("layers.0", kBytes), base + (uint64_t{5} << 30) + 4096);
  EXPECT_EQ(e.used(), (uint64_t{5} << 30) + 4096 + kBytes);
  const uint64_t left = e.capacity() - e.used();
  EXPECT_TRUE(e.Fits(left));
  EXPECT_FALSE(e.Fits(left + 4096));
  EXPECT_FALSE(e.Fits(left + kFourGib)) << "a 32-bit sum would fit";
  const Status over = e.Assign("layers.1", left + kBytes).status();
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("cache.nvme_budget 27.9 GiB is exceeded: 5.00 GiB already on NVMe, 22.9 GiB more"),
            std::string::npos)
      << over.ToString();
  const uint64_t next = base + e.used();
  EXPECT_EQ(*e.Assign("layers.1", left), next);
  EXPECT_EQ(e.used(), e.capacity());
}

// A write-back whose write fails (here: every write below 4 GiB, injected, so
// no disk is used) keeps its extent, as any first write-back does; the next
// tensor's extent then starts at 4 GiB, and its bytes go there and come back.
TEST_F(NvmeBudgetTest, ATensorPastTheFirstFourGibOfTheFileIsWrittenThereAndReadBack) {
  const std::string why = testing::SparseFilesUnsupported(dir_.path());
  if (!why.empty()) GTEST_SKIP() << why;
  testing::SparseFileEnv sparse;
  FaultInjectionFileEnv faulty(&sparse);
  faulty.AddFault({FaultKind::kEio, IoOp::kWrite, 0, kFourGib});
  std::vector<TensorSpec> specs = {{0, "embed.tokens", kFourGib, ElementType::kBFloat16, Tier::kNvme, false},
                                   {1, "layers.0.attn.q.weight", kBytes, ElementType::kBFloat16, Tier::kNvme, false}};
  TierSet tiers;
  tiers.device = std::move(MakeDeviceTier(DeviceBackend::kSimulatedHost).value());
  HostTierOptions ho;
  ho.pin = false;  // 4 GiB of address space; only the 64 KiB tensor is ever touched
  tiers.host = std::make_unique<HostTier>(ho);
  NvmeTierOptions no;
  no.dir = dir_.path();
  no.block_size = kBytes;
  no.force_sync_engine = true;  // io_uring would pin the 4 GiB host region as fixed buffers
  no.env = &faulty;
  tiers.nvme = std::move(NvmeTier::Open(no).value());
  TensorCacheOptions o = Budgets(0, 1, std::nullopt);
  o.host_budget += kFourGib;  // one slot of each size
  StatusOr<std::unique_ptr<TensorCache>> made = TensorCache::Create(o, std::move(specs), std::move(tiers));
  if (!made.ok() && made.status().message().find("host arena: mmap") != std::string::npos)
    GTEST_SKIP() << "no 4 GiB of address space for the host tier: " << made.status().ToString();
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  TensorCache* c = made->get();
  ASSERT_EQ(c->Snapshot().tier(Tier::kNvme).reserved_bytes, kFourGib + kBytes);

  {
    auto h = c->Acquire(0, Tier::kHost, AccessMode::kOverwrite, kWait);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
  }
  Status st = c->Discard(0, Tier::kHost).status();
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(c->Snapshot().tier(Tier::kNvme).used_bytes, kFourGib);

  WriteTensor(c, 1, 70, Tier::kHost);
  ASSERT_TRUE(c->Discard(1, Tier::kHost).ok());
  EXPECT_FALSE(c->IsResident(1, Tier::kHost));
  EXPECT_TRUE(ReadMatches(c, 1, 70, Tier::kHost));  // from NVMe, at 4 GiB
  EXPECT_EQ(c->Snapshot().tier(Tier::kNvme).used_bytes, kFourGib + kBytes);
  std::vector<uint8_t> file(kBytes);
  const int fd = ::open(testing::NvmeFile(dir_).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, file.data(), kBytes, static_cast<off_t>(kFourGib)), ssize_t(kBytes));
  ::close(fd);
  EXPECT_TRUE(testing::CheckPattern(file.data(), kBytes, 70)) << "the tensor's bytes are not at 4 GiB in the file";
}

}  // namespace
}  // namespace tencache
