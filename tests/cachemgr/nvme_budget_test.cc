// The NVMe budget: extents assigned on a tensor's first write-back within
// TensorCacheOptions::nvme_budget, a clear ResourceExhausted (and no lost data)
// when a write-back would exceed it, budget 0 = no file, and the check at Create.
#include <gtest/gtest.h>

#include <filesystem>

#include "cache_fixture.h"
#include "cachemgr/tensor_cache.h"

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
  ExpectBudgetError(c->Discard(1, Tier::kHost), "t1", "64.0 KiB", "64.0 KiB");
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
  EXPECT_EQ(m.bytes_host_to_nvme, kBytes);
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
  EXPECT_EQ(m.bytes_host_to_nvme, 4 * kBytes);
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
  ExpectBudgetError(c->Discard(0, Tier::kHost), "t0", "0 B", "0 B");  // the only copy: nowhere to go
  EXPECT_TRUE(ReadMatches(c.get(), 0, 60, Tier::kHost));
  CacheMetrics m = c->EndStep();
  EXPECT_EQ(m.tier(Tier::kNvme).reserved_bytes, 0u);
  EXPECT_EQ(m.tier(Tier::kNvme).used_bytes, 0u);
  EXPECT_EQ(m.bytes_host_to_nvme, 0u);
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

}  // namespace
}  // namespace tencache
