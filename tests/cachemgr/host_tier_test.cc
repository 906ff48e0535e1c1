#include "cachemgr/host_tier.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tencache {
namespace {

TEST(HostTierTest, PinsWithMlockOrReportsWhy) {
  HostTier tier;
  ASSERT_TRUE(tier.Reserve(1 << 20).ok());
  if (tier.pinned()) {
    EXPECT_EQ(tier.Describe(), "host(pinned: mlock)");
  } else {
    EXPECT_NE(tier.Describe().find("unpinned"), std::string::npos);
    EXPECT_NE(tier.pin_failure().find("RLIMIT_MEMLOCK"), std::string::npos);
  }
}

TEST(HostTierTest, FallsBackToPageableWithOneWarningWhenPinningIsRefused) {
  int calls = 0;
  HostTierOptions o;
  o.pinner = [&](void*, uint64_t bytes) {
    ++calls;
    return Status::ResourceExhausted("mlock of " + std::to_string(bytes) + ": refused (RLIMIT_MEMLOCK 8.00 MiB)");
  };
  o.pinner_name = "test-pinner";
  HostTier tier(o);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(tier.Reserve(1 << 20).ok());
  ASSERT_TRUE(tier.Reserve(1 << 20).ok());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(tier.pinned());
  EXPECT_NE(tier.Describe().find("unpinned fallback"), std::string::npos) << tier.Describe();
  EXPECT_NE(tier.pin_failure().find("RLIMIT_MEMLOCK"), std::string::npos);
  // Exactly one warning for the two refused regions.
  const size_t first = err.find("warning");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("warning", first + 1), std::string::npos) << err;
  // Still usable.
  auto buf = testing::MakeAligned(4096);
  testing::FillPattern(buf.get(), 4096, 1);
  ASSERT_TRUE(tier.Write(RegionBase(1), buf.get(), 4096, "x", std::chrono::milliseconds(100)).ok());
  EXPECT_TRUE(testing::CheckPattern(static_cast<uint8_t*>(tier.Address(RegionBase(1))), 4096, 1));
}

TEST(HostTierTest, PinningDisabledIsReported) {
  HostTierOptions o;
  o.pin = false;
  HostTier tier(o);
  ASSERT_TRUE(tier.Reserve(4096).ok());
  EXPECT_FALSE(tier.pinned());
  EXPECT_EQ(tier.Describe(), "host(unpinned: pinning disabled)");
}

TEST(HostTierTest, AddressesArePageAligned) {
  HostTier tier;
  auto base = tier.Reserve(10000);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tier.Address(*base)) % 4096, 0u);
  EXPECT_EQ(tier.reserved_bytes(), 12288u);
}

}  // namespace
}  // namespace tencache
