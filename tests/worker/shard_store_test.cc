// The cached shard store enforces the job's NVMe budget (cache.nvme_budget):
// budget 0 with too small a host budget fails at creation naming both keys,
// budget 0 with room on the host runs without an NVMe file, and a write-back
// beyond a small budget fails the Acquire naming the key, losing nothing.
#include "worker/shard_store.h"

#include "common/shard_bytes.h"
#include "launcher/resource_model.h"
#include "scheduler/plan.h"
#include "worker/decoder_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
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
    TC_ASSIGN_OR_RETURN(ShardRef r, s->Acquire(block, kind, 0, Tier::kHost, AccessMode::kWrite));
    for (size_t i = 0; i < r.count(); ++i) r.f32()[i] = value;
    return Status::Ok();
  }
  static bool Holds(ShardStore* s, int block, ShardKind kind, float value) {
    StatusOr<ShardRef> r = s->Acquire(block, kind, 0, Tier::kHost, AccessMode::kRead);
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
  EXPECT_EQ(m.link(Link::kNvmeWrite).bytes, 0u);
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

// One accounting of bytes: for every model preset, dtype and rank count, the
// planner's bytes of each state class (Candidate::states), the simulator's
// host placement of them (scheduler/plan.h PlaceOnHost) and the resolved
// budgets' shards (common/shard_bytes.h) are what the worker's layout reserves,
// per rank with each block padded to ceil(block / ranks) elements; its cache
// tensors are the same bytes, cut into the same pieces; and the planner's GPU
// holds the state classes the worker's device tier holds (DeviceTierHolds), and
// no other bytes, however large the GPU.
TEST(ShardBytes, ThePlannerCountsWhatTheWorkersLayoutReserves) {
  InstanceSpec inst;
  inst.type = "test";
  GpuSpec gpu;
  for (const std::string& preset : PresetNames()) {
    const ModelShape m = FindPreset(preset).value();
    // The worker's blocks: its decoder's where it runs the preset, else the shape's.
    std::vector<uint64_t> numel = m.BlockParamCounts();
    if (CheckWorkerSupports(m).ok()) {
      const DecoderModel model(m);
      ASSERT_EQ(model.num_blocks(), int(numel.size())) << preset;
      for (int b = 0; b < model.num_blocks(); ++b) numel[size_t(b)] = uint64_t(model.layout(b).numel);
    }
    for (DType dtype : {DType::kFp32, DType::kBf16, DType::kFp16}) {
      JobSpec job;
      job.model = m;
      job.dtype = dtype;
      job.train.micro_batch = 1;
      job.train.global_batch = 8 * 7 * 5 * 3;  // a multiple of every rank count
      for (int ranks = 1; ranks <= 8; ++ranks) {
        SCOPED_TRACE(preset + " " + DTypeName(dtype) + " ranks " + std::to_string(ranks));
        const ShardLayout layout = MakeShardLayout(numel, m.layers, dtype, ranks);
        std::array<uint64_t, kNumStateClasses> reserved{};
        std::vector<uint64_t> tensors, params;
        uint64_t on_device = 0;
        for (int b = 0; b < int(layout.num_blocks()); ++b) {
          for (ShardKind k : layout.Kinds()) {
            reserved[size_t(ShardKindClass(k))] += layout.Bytes(b, k);
            if (DeviceTierHolds(ShardKindClass(k))) on_device += layout.Bytes(b, k);
            for (int i = 0; i < layout.Pieces(b, k); ++i) tensors.push_back(layout.PieceCount(b, k, i) * layout.ElementBytes(k));
          }
          params.push_back(layout.Bytes(b, ShardKind::kParam));
        }
        inst.gpu_count = ranks;
        const Candidate planned = EvaluateCandidate(job, inst, gpu, 1, ModelAssumptions());
        const ShardBytes shards = ShardBytesPerRank(m, dtype, ranks);
        const HostPlacement host = PlaceOnHost(params, dtype, UINT64_MAX);
        for (int c = 0; c < kNumStateClasses; ++c) {
          EXPECT_EQ(planned.states.bytes[c], reserved[c]) << StateClassName(c);
          EXPECT_EQ(shards.bytes[c], reserved[c]) << StateClassName(c);
          EXPECT_EQ(host.host[c], reserved[c]) << StateClassName(c);
          EXPECT_EQ(host.nvme[c], 0u) << StateClassName(c);
        }
        const Placement gpu = PlaceStates(planned.states, {UINT64_MAX / 4, UINT64_MAX / 4, UINT64_MAX / 4});
        EXPECT_EQ(gpu.bytes[kGpu], on_device);
        for (int c = 0; c < kNumStateClasses; ++c) {
          if (reserved[c] == 0) continue;
          EXPECT_EQ(gpu.fraction[c][kGpu], DeviceTierHolds(c) ? 1.0 : 0.0) << StateClassName(c);
        }
        EXPECT_EQ(shards.tensors, layout.num_tensors());
        std::vector<uint64_t> all = ShardTensorBytes(m, dtype, ranks).all;
        std::sort(all.begin(), all.end());
        std::sort(tensors.begin(), tensors.end());
        EXPECT_EQ(all, tensors);
        EXPECT_EQ(ShardTensorBytes(m, dtype, ranks).params, params);
      }
    }
  }
}

// GPT-2's tied embedding (38.6M of its 124M parameters, one block) is five and
// a half layers: its fp32 states are cut into six pieces no larger than a
// layer's, so the host's mandatory slots no longer hold three whole embedding
// states. Two pieces would match the 16-bit parameter's size in mixed
// precision: three then.
TEST(ShardBytes, StatePiecesCutABlockLargerThanALayerIntoLayerSizedPieces) {
  const ModelShape gpt2 = FindPreset("gpt2").value();
  std::vector<uint64_t> counts = gpt2.BlockParamCounts();
  const std::vector<int> pieces = StatePieces(counts, gpt2.layers, DType::kBf16);
  ASSERT_EQ(pieces.size(), counts.size());
  EXPECT_EQ(pieces[0], 6);
  for (size_t b = 1; b < pieces.size(); ++b) EXPECT_EQ(pieces[b], 1) << "block " << b;
  const uint64_t layer = 100000;
  EXPECT_EQ(StatePieces({150000, layer, layer, 10}, 2, DType::kFp32), (std::vector<int>{2, 1, 1, 1}));
  EXPECT_EQ(StatePieces({150000, layer, layer, 10}, 2, DType::kBf16), (std::vector<int>{3, 1, 1, 1}));
  EXPECT_EQ(StatePieces({300001, layer, layer, 10}, 2, DType::kBf16), (std::vector<int>{4, 1, 1, 1}));
  // Small layers: pieces no smaller than kMinStatePieceElements (64 KiB of fp32).
  EXPECT_EQ(StatePieces({5000, 1000, 1000}, 1, DType::kBf16), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(StatePieces({4 * kMinStatePieceElements, 1000, 1000}, 1, DType::kBf16), (std::vector<int>{4, 1, 1}));
}

// Pieces are near-equal slices of the shard, in order, each its own tensor id;
// the memory store's pieces are the slices of one shard, the cached store's
// each their own cache tensor, and both hand back what was written.
TEST(ShardLayout, PiecesSliceTheShardAndEachIsItsOwnTensor) {
  ShardLayout layout;
  layout.mixed = true;
  layout.counts = {1000, 400, 401};
  layout.pieces = {3, 1, 1};
  EXPECT_EQ(layout.Pieces(0, ShardKind::kParam), 1);  // computed with whole
  EXPECT_EQ(layout.Pieces(0, ShardKind::kMaster), 3);
  EXPECT_EQ(layout.PieceBegin(0, ShardKind::kAdamM, 1), 334u);
  EXPECT_EQ(layout.PieceCount(0, ShardKind::kAdamM, 0), 334u);
  EXPECT_EQ(layout.PieceCount(0, ShardKind::kAdamM, 2), 333u);
  EXPECT_EQ(layout.PieceBegin(0, ShardKind::kAdamM, 2) + layout.PieceCount(0, ShardKind::kAdamM, 2), 1000u);
  std::vector<bool> seen(layout.num_tensors(), false);
  for (int b = 0; b < 3; ++b) {
    for (ShardKind k : layout.Kinds()) {
      for (int i = 0; i < layout.Pieces(b, k); ++i) {
        const TensorId id = layout.Id(b, k, i);
        ASSERT_LT(id, seen.size());
        EXPECT_FALSE(seen[id]) << "block " << b << " " << ShardKindName(k) << " piece " << i;
        seen[id] = true;
      }
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), int64_t(seen.size()));
  EXPECT_EQ(layout.Id(0, ShardKind::kGrad, 0), ShardTensorId(0, ShardKind::kGrad));

  const std::string dir = (fs::temp_directory_path() / ("tencache_pieces_test_" + std::to_string(::getpid()))).string();
  CachedStoreOptions o;
  o.device_budget = 4096;
  o.host_budget = 64 * 4096;
  o.nvme_dir = dir;
  std::unique_ptr<ShardStore> memory = MakeMemoryShardStore(layout);
  StatusOr<std::unique_ptr<ShardStore>> cached = MakeCachedShardStore(layout, o);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  for (ShardStore* s : {memory.get(), cached->get()}) {
    for (int i = 0; i < 3; ++i) {
      StatusOr<ShardRef> r = s->Acquire(0, ShardKind::kAdamV, i, Tier::kHost, AccessMode::kOverwrite);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->count(), layout.PieceCount(0, ShardKind::kAdamV, i));
      for (size_t j = 0; j < r->count(); ++j) r->f32()[j] = float(layout.PieceBegin(0, ShardKind::kAdamV, i) + j);
    }
    for (int i = 0; i < 3; ++i) {
      StatusOr<ShardRef> r = s->Acquire(0, ShardKind::kAdamV, i, Tier::kHost, AccessMode::kRead);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      for (size_t j = 0; j < r->count(); ++j) {
        ASSERT_EQ(r->f32()[j], float(layout.PieceBegin(0, ShardKind::kAdamV, i) + j)) << "piece " << i << " at " << j;
      }
    }
  }
  // The memory store's pieces are one shard: piece 1 starts where piece 0 ends.
  StatusOr<ShardRef> first = memory->Acquire(0, ShardKind::kAdamV, 0, Tier::kHost, AccessMode::kRead);
  StatusOr<ShardRef> second = memory->Acquire(0, ShardKind::kAdamV, 1, Tier::kHost, AccessMode::kRead);
  EXPECT_EQ(first->f32() + first->count(), second->f32());
  cached->reset();
  fs::remove_all(dir);
}

// The worker's device tier takes exactly the cache tensors of the classes
// DeviceTierHolds names (the planner's GPU fill reads the same predicate), in
// every dtype: a parameter shard is acquired on the device, and a gradient,
// master or moment cannot be.
TEST(ShardLayout, TheDeviceTierHoldsTheClassesThePlannerPutsOnTheGpu) {
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const ShardLayout layout = MakeShardLayout({4096, 1024, 1024, 512}, 2, dtype, 1);
    const std::string dir =
        (fs::temp_directory_path() / ("tencache_device_tier_test_" + std::to_string(::getpid()))).string();
    CachedStoreOptions o;
    o.device_budget = 64 * 4096;
    o.host_budget = 256 * 4096;
    o.nvme_dir = dir;
    StatusOr<std::unique_ptr<ShardStore>> cached = MakeCachedShardStore(layout, o);
    ASSERT_TRUE(cached.ok()) << cached.status().ToString();
    TensorCache* cache = (*cached)->cache();
    ASSERT_NE(cache, nullptr);
    for (int b = 0; b < int(layout.num_blocks()); ++b) {
      for (ShardKind k : layout.Kinds()) {
        for (int i = 0; i < layout.Pieces(b, k); ++i) {
          EXPECT_EQ(cache->spec(layout.Id(b, k, i)).device, DeviceTierHolds(ShardKindClass(k)))
              << "block " << b << " " << ShardKindName(k) << " piece " << i;
        }
      }
    }
    EXPECT_TRUE((*cached)->Acquire(1, ShardKind::kParam, 0, Tier::kDevice, AccessMode::kRead).ok());
    EXPECT_FALSE((*cached)->Acquire(1, ShardKind::kGrad, 0, Tier::kDevice, AccessMode::kRead).ok());
    cached->reset();
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace tencache
