// The conditions a probe ran under, and when a cached probe is measured again:
// a load per core beyond kReprobeLoadPerCore away from the probe's, another
// CPU, other cores, another build, or a cache that recorded none of them.
#include "launcher/probe_conditions.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/local_machine.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

fs::path Scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tencache_probe_conditions_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void Write(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
}

// A probe taken on two cores at load 2.40, as the busy machine had it.
ProbeConditions BusyProbe() { return {1000, 2.40, 2, "AMD EPYC 7B13", "tencache 0.1.0, /w (10 bytes, modified 5)"}; }

TEST(ProbeConditions, TheSameMachineReusesItsProbe) {
  ProbeConditions now = BusyProbe();
  now.at += 7200;
  EXPECT_EQ(ReprobeReason(BusyProbe(), now), "");
  now.load1 = 2.40 + 0.99;  // 0.495 per core: within the threshold
  EXPECT_EQ(ReprobeReason(BusyProbe(), now), "");
}

TEST(ProbeConditions, ALoadBeyondTheThresholdReprobesAndSaysWhy) {
  ProbeConditions now = BusyProbe();
  now.load1 = 0.40;  // 1.00 per core less than at the probe
  const std::string why = ReprobeReason(BusyProbe(), now);
  EXPECT_NE(why.find("the load differs"), std::string::npos) << why;
  EXPECT_NE(why.find("2.40 at the probe, 0.40 now, on 2 cores: 1.00 per core, beyond 0.50"), std::string::npos) << why;
}

TEST(ProbeConditions, AnotherCpuCoresOrBuildReprobes) {
  ProbeConditions now = BusyProbe();
  now.cpu_model = "Intel Xeon";
  EXPECT_NE(ReprobeReason(BusyProbe(), now).find("the CPU differs (probed on 'AMD EPYC 7B13', now 'Intel Xeon')"),
            std::string::npos);
  now = BusyProbe();
  now.cores = 4;
  now.load1 = 4.8;  // the same load per core
  EXPECT_NE(ReprobeReason(BusyProbe(), now).find("the cores differ (probed on 2, now 4)"), std::string::npos);
  now = BusyProbe();
  now.build = "tencache 0.1.0, /w (11 bytes, modified 6)";
  EXPECT_NE(ReprobeReason(BusyProbe(), now).find("the build differs"), std::string::npos);
  // A cache written before the conditions were kept says nothing of them.
  EXPECT_NE(ReprobeReason(ProbeConditions(), BusyProbe()).find("does not record"), std::string::npos);
}

TEST(ProbeConditions, ReadsLoadCpuAndBuildFromFiles) {
  const fs::path dir = Scratch("files");
  Write(dir / "loadavg", "2.41 1.87 1.02 3/412 12345\n");
  EXPECT_DOUBLE_EQ(ReadLoadAverage((dir / "loadavg").string()), 2.41);
  EXPECT_EQ(ReadLoadAverage((dir / "missing").string()), -1);
  Write(dir / "cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n");
  EXPECT_EQ(ReadCpuModel((dir / "cpuinfo").string()), "AMD EPYC 7B13");
  EXPECT_EQ(ReadCpuModel((dir / "missing").string()), "");
  Write(dir / "worker", "one");
  const std::string before = WorkerBuild((dir / "worker").string());
  Write(dir / "worker", "rebuilt");
  EXPECT_NE(WorkerBuild((dir / "worker").string()), before);  // a rebuilt worker reads differently
  EXPECT_NE(WorkerBuild((dir / "missing").string()).find("(not found)"), std::string::npos);
  fs::remove_all(dir);
}

TEST(ProbeConditions, DescribedWithAgeAndBothLoads) {
  ProbeConditions now = BusyProbe();
  now.at += 2 * 3600;
  now.load1 = 0.40;
  const std::string d = DescribeProbeConditions(BusyProbe(), now);
  EXPECT_NE(d.find("probe taken 2 h 0 min before this launch (1970-01-01 00:16 UTC) at load 2.40 on 2 cores; load now 0.40"),
            std::string::npos) << d;
}

// The cache keeps the conditions with the probe, and machine.json with the facts.
TEST(ProbeConditions, KeptInTheProbeCacheAndTheFacts) {
  const fs::path dir = Scratch("cache");
  LocalProbes p;
  p.disk = {1.5, 0.5, 4096, "engine"};
  p.conditions = BusyProbe();
  ASSERT_TRUE(WriteProbeCache((dir / "probes.json").string(), "k", p).ok());
  StatusOr<LocalProbes> back = ReadProbeCache((dir / "probes.json").string(), "k");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->conditions.load1, 2.40);
  EXPECT_EQ(back->conditions.cpu_model, "AMD EPYC 7B13");
  EXPECT_EQ(ReprobeReason(back->conditions, BusyProbe()), "");
  MachineFacts f = ReadMachineFacts("/tmp");
  EXPECT_GT(f.read_at, 0);
  f.build = "b";
  StatusOr<MachineFacts> facts = MachineFacts::FromJson(f.ToJson());
  ASSERT_TRUE(facts.ok());
  EXPECT_EQ(facts->Conditions().load1, f.load1);
  EXPECT_EQ(facts->Conditions().build, "b");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
