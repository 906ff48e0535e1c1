#include "cachemgr/device_tier.h"

#include <gtest/gtest.h>

#include "test_util.h"

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
  HostTierOptions ho;
  ho.pinner = CudaHostPinner();
  ho.pinner_name = "cudaHostRegister";
  HostTier host(ho);
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

}  // namespace
}  // namespace tencache
