#include "cachemgr/host_tier.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cachemgr/host_arena.h"

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

TEST(HostTierTest, ARequiredPinThatIsRefusedFailsNamingTheLimit) {
  HostTierOptions o;
  o.pinner = [](void*, uint64_t) { return Status::ResourceExhausted("mlock: refused (RLIMIT_MEMLOCK 8.00 MiB)"); };
  o.require_pin = true;
  HostTier tier(o);
  StatusOr<uint64_t> r = tier.Reserve(1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("RLIMIT_MEMLOCK 8.00 MiB"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("ulimit -l unlimited"), std::string::npos) << r.status().message();
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

// The VmFlags of the mapping that contains `p` in /proc/self/smaps ("" if none).
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool HasFlag(const std::string& vmflags, const std::string& flag) {
  return (vmflags + " ").find(" " + flag + " ") != std::string::npos;
}

TEST(HostArenaTest, LargeRegionsAreHugePageAlignedAndAdvised) {
  HostArena arena;
  void* big = nullptr;
  void* small = nullptr;
  ASSERT_TRUE(arena.Reserve(5 * HostArena::kHugePageBytes + 4096, &big).ok());
  ASSERT_TRUE(arena.Reserve(1 << 20, &small).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % HostArena::kHugePageBytes, 0u);
  EXPECT_EQ(arena.reserved_bytes(), 5 * HostArena::kHugePageBytes + 4096 + (1 << 20));
  // The whole region is usable, first byte to last.
  static_cast<uint8_t*>(big)[0] = 1;
  static_cast<uint8_t*>(big)[5 * HostArena::kHugePageBytes + 4095] = 2;
  const std::string flags = VmFlagsOf(big);
  ASSERT_FALSE(flags.empty());
  if (arena.huge_pages()) {
    EXPECT_TRUE(HasFlag(flags, "hg")) << flags;  // MADV_HUGEPAGE
  } else {
    GTEST_SKIP() << "this kernel refuses MADV_HUGEPAGE (no transparent huge pages)";
  }
  const std::string small_flags = VmFlagsOf(small);
  ASSERT_FALSE(small_flags.empty());
  EXPECT_FALSE(HasFlag(small_flags, "hg")) << "a region under 2 MiB is not advised: " << small_flags;
}

TEST(HostArenaTest, WithoutHugePagesNothingIsAdvised) {
  HostArena arena(/*huge_pages=*/false);
  void* big = nullptr;
  ASSERT_TRUE(arena.Reserve(4 * HostArena::kHugePageBytes, &big).ok());
  EXPECT_FALSE(arena.huge_pages());
  EXPECT_FALSE(HasFlag(VmFlagsOf(big), "hg")) << VmFlagsOf(big);
  HostTierOptions o;
  o.pin = false;
  o.huge_pages = false;
  HostTier tier(o);
  ASSERT_TRUE(tier.Reserve(4 * HostArena::kHugePageBytes).ok());
  EXPECT_EQ(tier.Describe(), "host(unpinned: pinning disabled)");
}

}  // namespace
}  // namespace tencache
