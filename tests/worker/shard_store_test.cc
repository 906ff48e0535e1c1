// The cached shard store enforces the job's NVMe budget (cache.nvme_budget):
// budget 0 with too small a host budget fails at creation naming both keys,
// budget 0 with room on the host runs without an NVMe file, and a write-back
// beyond a small budget fails the Acquire naming the key, losing nothing.
#include "worker/shard_store.h"

#include "common/shard_bytes.h"
#include "worker/decoder_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace tencache {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kShardBytes = 64 << 10;

class ShardStoreBudgetTest : public ::testing::Test {
 protected:
  ShardStoreBudgetTest()
      : dir_((fs::temp_directory_path() / ("tencache_shard_store_test_" + std::to_string(::getpid()))).string()) {
    layout_.counts = {kShardBytes / 4, kShardBytes / 4};  // two blocks of fp32 shards: 8 shards of 64 KiB
  }
  ~ShardStoreBudgetTest() override { fs::remove_all(dir_); }

  StatusOr<std::unique_ptr<ShardStore>> Make(uint64_t host_shards, std::optional<uint64_t> nvme_budget) {
    CachedStoreOptions o;
    o.device_budget = kShardBytes;
    o.host_budget = host_shards * kShardBytes;
    o.nvme_budget = nvme_budget;
    o.nvme_dir = dir_;
    return MakeCachedShardStore(layout_, o);
  }
  static Status Write(ShardStore* s, int block, ShardKind kind, float value) {
    TC_ASSIGN_OR_RETURN(ShardRef r, s->Acquire(block, kind, Tier::kHost, AccessMode::kWrite));
    for (size_t i = 0; i < r.count(); ++i) r.f32()[i] = value;
    return Status::Ok();
  }
  static bool Holds(ShardStore* s, int block, ShardKind kind, float value) {
    StatusOr<ShardRef> r = s->Acquire(block, kind, Tier::kHost, AccessMode::kRead);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return false;
    for (size_t i = 0; i < r->count(); ++i)
      if (r->f32()[i] != value) return false;
    return true;
  }
  bool FileExists() const { return fs::exists(dir_ + "/rank-0.tcnvme"); }

  std::string dir_;
  ShardLayout layout_;
};

TEST_F(ShardStoreBudgetTest, ZeroNvmeBudgetWithTooSmallAHostBudgetFailsNamingBothKeys) {
  Status s = Make(3, 0).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (const char* part : {"rank 0's shards", "need 512 KiB", "cache.host_budget 192 KiB", "cache.nvme_budget is 0"})
    EXPECT_NE(s.message().find(part), std::string::npos) << "missing \"" << part << "\" in " << s.ToString();
}

TEST_F(ShardStoreBudgetTest, ZeroNvmeBudgetWithRoomOnTheHostRunsWithoutAFile) {
  auto store = Make(8, 0);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ShardStore* s = store->get();
  for (int b = 0; b < 2; ++b)
    for (ShardKind k : layout_.Kinds()) ASSERT_TRUE(Write(s, b, k, float(b * 10 + int(k))).ok());
  for (int b = 0; b < 2; ++b)
    for (ShardKind k : layout_.Kinds()) EXPECT_TRUE(Holds(s, b, k, float(b * 10 + int(k))));
  CacheMetrics m = s->EndStep();
  EXPECT_EQ(m.tier(Tier::kNvme).reserved_bytes, 0u);
  EXPECT_EQ(m.bytes_host_to_nvme, 0u);
  EXPECT_FALSE(FileExists());
  EXPECT_NE(s->Describe().find("cache.nvme_budget 0 B"), std::string::npos) << s->Describe();
}

TEST_F(ShardStoreBudgetTest, WriteBackBeyondTheNvmeBudgetFailsTheAcquireNamingTheKey) {
  auto store = Make(3, kShardBytes);  // three host slots, one shard's room on NVMe
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ShardStore* s = store->get();
  ASSERT_TRUE(Write(s, 0, ShardKind::kParam, 1.0f).ok());
  ASSERT_TRUE(Write(s, 0, ShardKind::kGrad, 2.0f).ok());
  ASSERT_TRUE(Write(s, 0, ShardKind::kAdamM, 3.0f).ok());
  ASSERT_TRUE(Write(s, 0, ShardKind::kAdamV, 4.0f).ok());  // block0.param goes to NVMe: the budget is spent
  Status full = Write(s, 1, ShardKind::kParam, 5.0f);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted) << full.ToString();
  for (const char* part : {"cache.nvme_budget 64.0 KiB is exceeded", "64.0 KiB already on NVMe",
                           "raise cache.nvme_budget or cache.host_budget"})
    EXPECT_NE(full.message().find(part), std::string::npos) << "missing \"" << part << "\" in " << full.ToString();
  for (ShardKind k : {ShardKind::kGrad, ShardKind::kAdamM, ShardKind::kAdamV})
    EXPECT_TRUE(Holds(s, 0, k, float(int(k) + 1)));
  EXPECT_EQ(s->EndStep().tier(Tier::kNvme).used_bytes, kShardBytes);
}

// The launcher sizes a run's budgets with common/shard_bytes.h; the worker
// holds ShardLayout's shards. They must be the same bytes.
TEST(ShardBytes, AgreeWithTheWorkersLayout) {
  for (const char* preset : {"tiny", "gpt2"}) {
    ModelShape m = FindPreset(preset).value();
    DecoderModel model(m);
    for (DType dtype : {DType::kBf16, DType::kFp32}) {
      for (int ranks : {1, 2, 3, 8}) {
        ShardLayout layout;
        layout.mixed = dtype == DType::kBf16;
        for (int b = 0; b < model.num_blocks(); ++b) layout.counts.push_back((size_t(model.layout(b).numel) + ranks - 1) / ranks);
        uint64_t bytes = 0, params = 0;
        for (int b = 0; b < int(layout.num_blocks()); ++b) {
          for (ShardKind k : layout.Kinds()) bytes += layout.Bytes(b, k);
          params += layout.Bytes(b, ShardKind::kParam);
        }
        const ShardBytes s = ShardBytesPerRank(m, dtype, ranks);
        EXPECT_EQ(s.total(), bytes) << preset << " " << DTypeName(dtype) << " ranks " << ranks;
        EXPECT_EQ(s.param, params);
        EXPECT_EQ(s.tensors, layout.num_tensors());
      }
    }
  }
}

}  // namespace
}  // namespace tencache
