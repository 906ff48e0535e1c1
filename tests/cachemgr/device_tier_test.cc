#include "cachemgr/device_tier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_util.h"

#if TENCACHE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tencache {
namespace {

TEST(DeviceTierTest, SimulatedBackendSaysItIsSimulated) {
  auto t = MakeDeviceTier(DeviceBackend::kSimulatedHost);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Describe(), "device(simulated-host)");
  EXPECT_EQ((*t)->tier(), Tier::kDevice);
  EXPECT_STREQ(DeviceBackendName(DeviceBackend::kSimulatedHost), "simulated-host");
}

TEST(DeviceTierTest, CudaBackendIsUnavailableWithoutAGpu) {
  auto t = MakeDeviceTier(DeviceBackend::kCuda);
  if (CudaDeviceCount() > 0) {
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ((*t)->Describe().rfind("device(cuda:", 0), 0u);
  } else {
    EXPECT_EQ(t.status().code(), StatusCode::kUnavailable) << t.status().ToString();
  }
}

TEST(DeviceTierTest, CudaRoundTripThroughPinnedHost) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto dev = MakeDeviceTier(DeviceBackend::kCuda);
  ASSERT_TRUE(dev.ok());
  HostTier host(CudaPinnedHostTierOptions());
  auto hb = host.Reserve(1 << 20);
  auto db = (*dev)->Reserve(1 << 20);
  ASSERT_TRUE(hb.ok() && db.ok());
  auto* p = static_cast<uint8_t*>(host.Address(*hb));
  testing::FillPattern(p, 1 << 20, 5);
  ASSERT_TRUE((*dev)->Write(*db, p, 1 << 20, "t", std::chrono::milliseconds(5000)).ok());
  std::memset(p, 0, 1 << 20);
  ASSERT_TRUE((*dev)->Read(*db, p, 1 << 20, "t", std::chrono::milliseconds(5000)).ok());
  EXPECT_TRUE(testing::CheckPattern(p, 1 << 20, 5));
}

#if TENCACHE_HAVE_CUDA
// A consumer writes a slot on the compute stream (the legacy default stream)
// and releases it; the tier's read-back of the slot, on its own non-blocking
// stream, must see what the consumer wrote, however long that takes.
TEST(DeviceTierTest, CudaCopiesWaitForTheComputeThatUsedTheSlot) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto dev = MakeDeviceTier(DeviceBackend::kCuda);
  ASSERT_TRUE(dev.ok());
  HostTier host(CudaPinnedHostTierOptions());
  const uint64_t big = 512ull << 20, slot = 4096;
  auto hb = host.Reserve(big);
  auto db = (*dev)->Reserve(big);
  ASSERT_TRUE(hb.ok() && db.ok());
  auto* p = static_cast<uint8_t*>(host.Address(*hb));
  auto* d = static_cast<uint8_t*>((*dev)->Address(*db));
  for (int round = 0; round < 20; ++round) {
    const uint8_t value = uint8_t(round + 1);
    std::memset(p, value, big);
    // Compute's work: a long copy across the whole region, ending in the slot.
    ASSERT_EQ(cudaMemcpyAsync(d, p, big, cudaMemcpyHostToDevice, cudaStreamLegacy), cudaSuccess);
    (*dev)->ConsumerReleased(d + big - slot);
    std::vector<uint8_t> back(slot, 0);
    ASSERT_TRUE((*dev)->Read(*db + big - slot, back.data(), slot, "t", std::chrono::milliseconds(10000)).ok());
    EXPECT_EQ(back[0], value) << "round " << round;
    EXPECT_EQ(back[slot - 1], value) << "round " << round;
  }
}
#endif

}  // namespace
}  // namespace tencache
