// One conformance suite run against every TierStore backend: simulated device,
// CUDA device (skipped without a GPU), pinned host, NVMe over io_uring, and NVMe
// over the pread/pwrite fallback.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "cachemgr/device_tier.h"
#include "cachemgr/host_tier.h"
#include "cachemgr/nvme_tier.h"
#include "test_util.h"

namespace tencache {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait(10000);

struct Backend {
  std::string name;
  Tier tier;
  // Returns the store, or a Status (Unavailable: skip).
  std::function<StatusOr<std::unique_ptr<TierStore>>(const std::string& dir)> make;
};

void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

std::unique_ptr<TierStore> Upcast(std::unique_ptr<NvmeTier> t) { return std::unique_ptr<TierStore>(t.release()); }

StatusOr<std::unique_ptr<TierStore>> MakeNvme(const std::string& dir, bool sync) {
  NvmeTierOptions o;
  o.dir = dir;
  o.block_size = 64 << 10;
  o.queue_depth = 4;
  o.force_sync_engine = sync;
  TC_ASSIGN_OR_RETURN(std::unique_ptr<NvmeTier> t, NvmeTier::Open(o));
  return Upcast(std::move(t));
}

std::vector<Backend> Backends() {
  return {
      {"device_simulated", Tier::kDevice, [](const std::string&) { return MakeDeviceTier(DeviceBackend::kSimulatedHost); }},
      {"device_cuda", Tier::kDevice, [](const std::string&) { return MakeDeviceTier(DeviceBackend::kCuda); }},
      {"host", Tier::kHost,
       [](const std::string&) -> StatusOr<std::unique_ptr<TierStore>> { return std::unique_ptr<TierStore>(new HostTier()); }},
      {"nvme_io_uring", Tier::kNvme, [](const std::string& d) { return MakeNvme(d, false); }},
      {"nvme_pread", Tier::kNvme, [](const std::string& d) { return MakeNvme(d, true); }},
  };
}

class TierConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto s = GetParam().make(dir_.path());
    if (s.status().code() == StatusCode::kUnavailable) GTEST_SKIP() << s.status().ToString();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  testing::TempDir dir_;
  std::unique_ptr<TierStore> store_;
};

TEST_P(TierConformanceTest, DescribesItselfAsItsTier) {
  EXPECT_EQ(store_->tier(), GetParam().tier);
  EXPECT_EQ(store_->Describe().rfind(TierName(GetParam().tier), 0), 0u) << store_->Describe();
  EXPECT_EQ(store_->allocations(), 0u);
  EXPECT_EQ(store_->reserved_bytes(), 0u);
}

TEST_P(TierConformanceTest, ReserveCountsOneAllocation) {
  auto base = store_->Reserve(1 << 20);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(store_->allocations(), 1u);
  EXPECT_GE(store_->reserved_bytes(), 1u << 20);
}

TEST_P(TierConformanceTest, RoundTripsAtSeveralOffsets) {
  auto base = store_->Reserve(1 << 20);
  ASSERT_TRUE(base.ok());
  for (uint64_t off : {0ul, 4096ul, 300ul * 1024, (1ul << 20) - 128 * 1024}) {
    const uint64_t len = 128 * 1024;
    auto out = testing::MakeAligned(len), in = testing::MakeAligned(len);
    testing::FillPattern(out.get(), len, static_cast<uint32_t>(off));
    ASSERT_TRUE(store_->Write(*base + off, out.get(), len, "t", kWait).ok()) << off;
    ASSERT_TRUE(store_->Read(*base + off, in.get(), len, "t", kWait).ok()) << off;
    EXPECT_TRUE(testing::CheckPattern(in.get(), len, static_cast<uint32_t>(off))) << off;
  }
}

TEST_P(TierConformanceTest, OutOfRangeIsInvalidArgumentNamingTheTensor) {
  auto base = store_->Reserve(64 * 1024);
  ASSERT_TRUE(base.ok());
  auto buf = testing::MakeAligned(8192);
  Status st = store_->Write(*base + 64 * 1024, buf.get(), 8192, "far.tensor", kWait);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("far.tensor"), std::string::npos) << st.ToString();
}

TEST_P(TierConformanceTest, ConcurrentCopiesToDisjointRanges) {
  auto base = store_->Reserve(1 << 20);
  ASSERT_TRUE(base.ok());
  constexpr int kThreads = 4;
  constexpr uint64_t kLen = 64 * 1024;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      auto out = testing::MakeAligned(kLen), in = testing::MakeAligned(kLen);
      for (int round = 0; round < 4; ++round) {
        const uint64_t off = *base + (i * 4 + round) * kLen;
        testing::FillPattern(out.get(), kLen, i * 10 + round);
        if (!store_->Write(off, out.get(), kLen, "c", kWait).ok()) return;
        if (!store_->Read(off, in.get(), kLen, "c", kWait).ok()) return;
        if (!testing::CheckPattern(in.get(), kLen, i * 10 + round)) return;
      }
      ok[i] = 1;
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(ok[i], 1) << "thread " << i;
}

INSTANTIATE_TEST_SUITE_P(AllBackends, TierConformanceTest, ::testing::ValuesIn(Backends()),
                         [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace tencache
