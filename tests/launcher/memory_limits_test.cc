// The host memory limits, read from a fake /proc and /sys made under a
// temporary folder: MemTotal, cgroup v2 and v1 limits, RLIMIT_MEMLOCK (given
// in place of getrlimit) and which of them bounds the host memory.
#include "launcher/memory_limits.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr uint64_t kMiB = uint64_t(1) << 20;
const char* const kV1NoLimit = "9223372036854771712\n";  // what cgroup v1 writes for none

class FakeRoot {
 public:
  FakeRoot() {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tencache_memory_limits_" + std::string(t->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FakeRoot() { fs::remove_all(dir_); }

  void Write(const std::string& rel, const std::string& text) const {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void Meminfo(uint64_t total_kib, uint64_t available_kib) const {
    Write("proc/meminfo", "MemTotal:       " + std::to_string(total_kib) + " kB\nMemFree:         1024 kB\n" +
                              "MemAvailable:   " + std::to_string(available_kib) + " kB\n");
  }
  // Reads the fake tree with RLIMIT_MEMLOCK `memlock` (RLIM_INFINITY: none).
  MemoryLimits Read(bool pins = false, rlim_t memlock = 8 * kMiB) const {
    MemoryLimitsOptions o;
    o.root = dir_.string();
    o.pins_host_memory = pins;
    o.get_memlock = [memlock](struct rlimit* r) {
      r->rlim_cur = r->rlim_max = memlock;
      return 0;
    };
    return ReadMemoryLimits(o);
  }

 private:
  fs::path dir_;
};

TEST(MemoryLimits, CgroupV2LimitBindsBelowMemTotal) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 12 * kGiB / 1024);
  root.Write("proc/self/cgroup", "0::/kubepods/pod1/c1\n");
  root.Write("sys/fs/cgroup/kubepods/pod1/c1/memory.max", "4294967296\n");
  const MemoryLimits l = root.Read();
  EXPECT_EQ(*l.mem_total.bytes, 16 * kGiB);
  EXPECT_EQ(*l.mem_available.bytes, 12 * kGiB);
  EXPECT_EQ(l.usable_bytes(), 4 * kGiB);
  EXPECT_EQ(l.bound_by(), "cgroup v2 memory.max (/sys/fs/cgroup/kubepods/pod1/c1/memory.max)");
  EXPECT_FALSE(l.cgroup_v1.known);
  EXPECT_EQ(l.Describe(),
            "4.00 GiB usable (bound by cgroup v2 memory.max (/sys/fs/cgroup/kubepods/pod1/c1/memory.max); "
            "MemTotal 16.0 GiB, MemAvailable 12.0 GiB, memlock 8.00 MiB: not needed, no GPU pinning)");
}

TEST(MemoryLimits, CgroupV2MaxTakesTheSmallestParentLimit) {
  FakeRoot root;
  root.Meminfo(64 * kGiB / 1024, 60 * kGiB / 1024);
  root.Write("proc/self/cgroup", "0::/kubepods.slice/pod/c\n");
  root.Write("sys/fs/cgroup/kubepods.slice/pod/c/memory.max", "max\n");
  root.Write("sys/fs/cgroup/kubepods.slice/pod/memory.max", "2147483648\n");
  root.Write("sys/fs/cgroup/kubepods.slice/memory.max", "8589934592\n");
  const MemoryLimits l = root.Read();
  EXPECT_EQ(l.usable_bytes(), 2 * kGiB);
  EXPECT_EQ(l.cgroup_v2.source, "/sys/fs/cgroup/kubepods.slice/pod/memory.max");
}

TEST(MemoryLimits, CgroupV2MaxEverywhereIsNoLimit) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  root.Write("proc/self/cgroup", "0::/user.slice\n");
  root.Write("sys/fs/cgroup/user.slice/memory.max", "max\n");
  const MemoryLimits l = root.Read();
  EXPECT_TRUE(l.cgroup_v2.known);
  EXPECT_FALSE(l.cgroup_v2.bytes);
  EXPECT_EQ(l.bound_by(), "MemTotal");
  EXPECT_NE(l.Describe().find("cgroup none"), std::string::npos) << l.Describe();
}

// A cgroup outside the namespace shows as "/../x": only the namespace's root
// is visible, and a folder of the same name below it is another cgroup.
TEST(MemoryLimits, CgroupOutsideTheNamespaceReadsItsRootOnly) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  root.Write("proc/self/cgroup", "0::/../../other\n");
  root.Write("sys/fs/cgroup/memory.max", "5368709120\n");
  root.Write("sys/fs/cgroup/other/memory.max", "1073741824\n");
  const MemoryLimits l = root.Read();
  EXPECT_EQ(l.usable_bytes(), 5 * kGiB);
  EXPECT_EQ(l.cgroup_v2.source, "/sys/fs/cgroup/memory.max");
}

TEST(MemoryLimits, CgroupV1Limit) {
  FakeRoot root;
  root.Meminfo(32 * kGiB / 1024, 30 * kGiB / 1024);
  root.Write("proc/self/cgroup", "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n");
  root.Write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "3221225472\n");
  root.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", kV1NoLimit);
  const MemoryLimits l = root.Read();
  EXPECT_EQ(l.usable_bytes(), 3 * kGiB);
  EXPECT_EQ(l.bound_by(), "cgroup v1 memory.limit_in_bytes (/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes)");
  EXPECT_FALSE(l.cgroup_v2.known);
}

TEST(MemoryLimits, CgroupV1ControllersMountedTogether) {
  FakeRoot root;
  root.Meminfo(32 * kGiB / 1024, 30 * kGiB / 1024);
  root.Write("proc/self/cgroup", "3:cpuset,memory:/job\n");
  root.Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1073741824");
  EXPECT_EQ(root.Read().usable_bytes(), kGiB);
}

// Inside a container's namespace the host's path is not there: the limit is
// the mounted hierarchy's root.
TEST(MemoryLimits, CgroupV1FallsBackToTheNamespaceRoot) {
  FakeRoot root;
  root.Meminfo(32 * kGiB / 1024, 30 * kGiB / 1024);
  root.Write("proc/self/cgroup", "4:memory:/kubepods/burstable/pod7/c9\n");
  root.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
  const MemoryLimits l = root.Read();
  EXPECT_EQ(l.usable_bytes(), kGiB);
  EXPECT_EQ(l.cgroup_v1.source, "/sys/fs/cgroup/memory/memory.limit_in_bytes");
}

TEST(MemoryLimits, CgroupV1NearTwoToTheSixtyThreeIsNoLimit) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  root.Write("proc/self/cgroup", "4:memory:/\n");
  root.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", kV1NoLimit);
  const MemoryLimits l = root.Read();
  EXPECT_TRUE(l.cgroup_v1.known);
  EXPECT_FALSE(l.cgroup_v1.bytes);
  EXPECT_EQ(l.usable_bytes(), 16 * kGiB);
}

TEST(MemoryLimits, NoCgroupFilesAtAll) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  const MemoryLimits l = root.Read();
  EXPECT_FALSE(l.cgroup_v2.known);
  EXPECT_FALSE(l.cgroup_v1.known);
  EXPECT_EQ(l.usable_bytes(), 16 * kGiB);
  EXPECT_EQ(l.bound_by(), "MemTotal");
  EXPECT_EQ(l.Describe(),
            "16.0 GiB usable (bound by MemTotal; MemAvailable 8.00 GiB, cgroup unknown, "
            "memlock 8.00 MiB: not needed, no GPU pinning)");
}

TEST(MemoryLimits, MemTotalBindsBelowALargerCgroupLimit) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  root.Write("proc/self/cgroup", "0::/big\n");
  root.Write("sys/fs/cgroup/big/memory.max", std::to_string(64 * kGiB));
  const MemoryLimits l = root.Read();
  EXPECT_EQ(l.usable_bytes(), 16 * kGiB);
  EXPECT_EQ(l.bound_by(), "MemTotal");
  EXPECT_NE(l.Describe().find("cgroup v2 64.0 GiB (/sys/fs/cgroup/big/memory.max)"), std::string::npos)
      << l.Describe();
}

TEST(MemoryLimits, MalformedFilesLeaveTheirLimitUnknown) {
  FakeRoot root;
  root.Write("proc/meminfo", "MemTotal: lots kB\nMemAvailable: 12\n");
  root.Write("proc/self/cgroup", "garbage\n7\n0::relative\n0::/a\n4:memory:\n");
  root.Write("sys/fs/cgroup/a/memory.max", "12abc\n");
  root.Write("sys/fs/cgroup/memory.max", "-5\n");
  root.Write("proc/self/status", "CapEff:\tzz\n");
  const MemoryLimits l = root.Read(true);
  EXPECT_FALSE(l.mem_total.known);
  EXPECT_FALSE(l.mem_available.known);
  EXPECT_FALSE(l.cgroup_v2.known);
  EXPECT_FALSE(l.cgroup_v1.known);
  EXPECT_FALSE(l.ipc_lock);
  // Only the injected memlock is left, and it bounds: the host tier pins.
  EXPECT_EQ(l.usable_bytes(), 8 * kMiB);
  EXPECT_EQ(l.bound_by(), "RLIMIT_MEMLOCK");
  EXPECT_EQ(root.Read(false).usable_bytes(), 0u);
  EXPECT_EQ(root.Read(false).bound_by(), "nothing readable");
  EXPECT_EQ(root.Read(false).Describe().rfind("unknown (nothing readable; MemTotal unknown", 0), 0u)
      << root.Read(false).Describe();
}

TEST(MemoryLimits, OverflowingNumbersAreMalformed) {
  FakeRoot root;
  root.Write("proc/meminfo", "MemTotal: 99999999999999999999 kB\nMemAvailable: 18014398509481984 kB\n");
  root.Write("proc/self/cgroup", "0::/a\n");
  root.Write("sys/fs/cgroup/a/memory.max", "99999999999999999999\n");
  root.Write("sys/fs/cgroup/memory.max", "1073741824\n");  // a good parent still counts
  const MemoryLimits l = root.Read();
  EXPECT_FALSE(l.mem_total.known);
  EXPECT_FALSE(l.mem_available.known);  // 2^54 KiB is 2^64 bytes
  EXPECT_EQ(l.usable_bytes(), kGiB);
  EXPECT_EQ(l.cgroup_v2.source, "/sys/fs/cgroup/memory.max");
}

TEST(MemoryLimits, NoSuchRootLeavesOnlyMemlock) {
  MemoryLimitsOptions o;
  o.root = "/tmp/tencache/no/such/root";
  o.get_memlock = [](struct rlimit*) { return -1; };
  const MemoryLimits l = ReadMemoryLimits(o);
  EXPECT_FALSE(l.mem_total.known);
  EXPECT_FALSE(l.memlock.known);
  EXPECT_EQ(l.usable_bytes(), 0u);
  EXPECT_NE(l.Describe().find("memlock unknown"), std::string::npos) << l.Describe();
}

TEST(MemoryLimits, MemlockBoundsOnlyWhereTheHostTierPins) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  const MemoryLimits cpu = root.Read(false, 8 * kMiB);
  EXPECT_EQ(*cpu.memlock.bytes, 8 * kMiB);
  EXPECT_FALSE(cpu.memlock_bounds());
  EXPECT_EQ(cpu.usable_bytes(), 16 * kGiB);

  const MemoryLimits gpu = root.Read(true, 8 * kMiB);
  EXPECT_TRUE(gpu.memlock_bounds());
  EXPECT_EQ(gpu.usable_bytes(), 8 * kMiB);
  EXPECT_EQ(gpu.Describe(),
            "8.00 MiB usable (bound by RLIMIT_MEMLOCK: the host tier is pinned for the GPU; MemTotal 16.0 GiB, "
            "MemAvailable 8.00 GiB, cgroup unknown)");

  const MemoryLimits large = root.Read(true, 64 * kGiB);
  EXPECT_EQ(large.bound_by(), "MemTotal");
  EXPECT_NE(large.Describe().find("memlock 64.0 GiB)"), std::string::npos) << large.Describe();

  const MemoryLimits unlimited = root.Read(true, RLIM_INFINITY);
  EXPECT_FALSE(unlimited.memlock.bytes);
  EXPECT_EQ(unlimited.usable_bytes(), 16 * kGiB);
  EXPECT_NE(unlimited.Describe().find("memlock unlimited"), std::string::npos) << unlimited.Describe();
}

// As root, CAP_IPC_LOCK lets mlock pass the limit (docs/cachemgr.md).
TEST(MemoryLimits, CapIpcLockLiftsMemlock) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  root.Write("proc/self/status", "Name:\ttest\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n");
  const MemoryLimits l = root.Read(true, 8 * kMiB);
  EXPECT_TRUE(l.ipc_lock);
  EXPECT_FALSE(l.memlock_bounds());
  EXPECT_EQ(l.usable_bytes(), 16 * kGiB);
  EXPECT_NE(l.Describe().find("memlock 8.00 MiB: lifted by CAP_IPC_LOCK"), std::string::npos) << l.Describe();
  root.Write("proc/self/status", "CapEff:\t0000000000003000\n");  // bits 12, 13: not 14
  EXPECT_TRUE(root.Read(true, 8 * kMiB).memlock_bounds());
}

TEST(MemoryLimits, JsonRoundTrips) {
  FakeRoot root;
  root.Meminfo(16 * kGiB / 1024, 8 * kGiB / 1024);
  root.Write("proc/self/cgroup", "0::/a\n4:memory:/\n");
  root.Write("sys/fs/cgroup/a/memory.max", "4294967296\n");
  root.Write("sys/fs/cgroup/memory/memory.limit_in_bytes", kV1NoLimit);
  const MemoryLimits l = root.Read(true, 64 * kGiB);
  const nlohmann::ordered_json j = l.ToJson();
  EXPECT_EQ(j["usable_bytes"], 4 * kGiB);
  EXPECT_EQ(j["bound_by"], l.bound_by());
  StatusOr<MemoryLimits> back = MemoryLimits::FromJson(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->Describe(), l.Describe());

  nlohmann::json missing = nlohmann::json::parse(j.dump());
  missing.erase("memlock");
  StatusOr<MemoryLimits> bad = MemoryLimits::FromJson(missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("memlock"), std::string::npos) << bad.status().message();
}

TEST(MemoryLimits, ThisMachine) {
  const MemoryLimits l = ReadMemoryLimits();
  ASSERT_TRUE(l.mem_total.known);
  EXPECT_GT(l.usable_bytes(), 0u);
  EXPECT_LE(l.usable_bytes(), *l.mem_total.bytes);
  EXPECT_TRUE(l.memlock.known);  // getrlimit answers
}

}  // namespace
}  // namespace tencache
