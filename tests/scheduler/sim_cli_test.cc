#include "scheduler/sim_cli.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tencache {
namespace {

int RunCli(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::ostringstream o, e;
  const int code = SimMain(args, o, e);
  *out = o.str();
  *err = e.str();
  return code;
}

TEST(SimCliTest, JsonHasEveryFieldForEveryPolicy) {
  std::string out, err;
  ASSERT_EQ(RunCli({"--model", "tiny", "--device-budget", "1MiB", "--host-budget", "1GiB",
                 "--policy", "tencache,belady", "--json"}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["policy"], "tencache");
  for (const char* key : {"device_hit_rate", "host_hit_rate", "bytes_h2d", "bytes_d2h",
                          "bytes_nvme_read", "bytes_nvme_write", "stall_s", "step_time_s"}) {
    EXPECT_TRUE(j["results"][1].contains(key)) << key;
  }
}

TEST(SimCliTest, TableListsAllPoliciesByDefault) {
  std::string out, err;
  ASSERT_EQ(RunCli({"--model=gpt2", "--device-budget=100MiB", "--host-budget=8GiB"}, &out, &err), 0)
      << err;
  for (const char* p : {"POLICY", "tencache", "zero-infinity", "10cache-window", "lru", "belady"}) {
    EXPECT_NE(out.find(p), std::string::npos) << p;
  }
}

TEST(SimCliTest, BadInputExitsTwoNamingTheFlag) {
  struct Case { std::vector<std::string> args; const char* needle; };
  const std::vector<std::string> base = {"--device-budget", "1GiB", "--host-budget", "8GiB"};
  std::vector<Case> cases = {
      {{"--model", "opt-7b"}, "opt-7b"},
      {{"--model", "tiny", "--policy", "belady,lfu"}, "--policy: unknown policy 'lfu'"},
      {{"--model", "tiny", "--bogus", "1"}, "--bogus"},
      {{"--trace", "/nonexistent.jsonl"}, "/nonexistent.jsonl"},
      {{"--model", "tiny", "--ranks", "zero"}, "--ranks: got 'zero'"},
      {{"--model", "tiny", "--h2d-gbps", "-1"}, "--h2d-gbps"},
      {{"--model", "tiny", "--dtype", "int8"}, "bf16, fp16 or fp32"},
      {{"--model", "tiny", "--trace", "x"}, "exactly one of --model"},
  };
  for (Case& c : cases) {
    c.args.insert(c.args.end(), base.begin(), base.end());
    std::string out, err;
    EXPECT_EQ(RunCli(c.args, &out, &err), 2) << c.needle;
    EXPECT_NE(err.find(c.needle), std::string::npos) << err;
  }
  std::string out, err;
  EXPECT_EQ(RunCli({"--model", "tiny", "--device-budget", "lots", "--host-budget", "8GiB"}, &out, &err), 2);
  EXPECT_NE(err.find("--device-budget"), std::string::npos) << err;
  EXPECT_EQ(RunCli({"--model", "tiny", "--device-budget", "1GiB"}, &out, &err), 2);
  EXPECT_NE(err.find("--host-budget"), std::string::npos) << err;
  EXPECT_EQ(RunCli({"--model", "gpt2", "--device-budget", "1KiB", "--host-budget", "1KiB"}, &out, &err), 2);
}

TEST(SimCliTest, EachLinkHasItsSpeedFlag) {
  const std::vector<std::string> base = {"--model", "tiny", "--device-budget", "1GiB", "--host-budget", "8GiB"};
  struct Case { const char* flag; Link link; };
  for (const Case& c : {Case{"--h2d-gbps", Link::kH2D}, Case{"--d2h-gbps", Link::kD2H},
                        Case{"--nvme-read-gbps", Link::kNvmeRead}, Case{"--nvme-write-gbps", Link::kNvmeWrite}}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {c.flag, "7.5"});
    SimCliOptions o;
    std::ostringstream out, err;
    ASSERT_EQ(ParseSimArgs(args, &o, out, err), -1) << c.flag << ": " << err.str();
    for (Link l : kLinks) {
      EXPECT_EQ(o.sim.links.Bps(l), l == c.link ? 7.5e9 : LinkSpeeds().Bps(l)) << c.flag << " " << LinkName(l);
    }
  }
}

TEST(SimCliTest, FlagEqualsValueMeansTheSameAsTwoWords) {
  std::string spaced, joined, err;
  ASSERT_EQ(RunCli({"--model", "tiny", "--device-budget", "1MiB", "--host-budget", "1GiB", "--ranks", "2",
                 "--h2d-gbps", "12", "--policy", "lru", "--json"}, &spaced, &err), 0) << err;
  ASSERT_EQ(RunCli({"--model=tiny", "--device-budget=1MiB", "--host-budget=1GiB", "--ranks=2", "--h2d-gbps=12",
                 "--policy=lru", "--json"}, &joined, &err), 0) << err;
  EXPECT_EQ(spaced, joined);
  EXPECT_EQ(nlohmann::json::parse(joined)["results"].size(), 1u);
  std::string last;  // a repeated flag: the last value wins
  ASSERT_EQ(RunCli({"--model=tiny", "--device-budget=1MiB", "--host-budget=1GiB", "--ranks=2", "--h2d-gbps=12",
                 "--policy=belady", "--policy=lru", "--json"}, &last, &err), 0) << err;
  EXPECT_EQ(last, joined);
}

TEST(SimCliTest, VersionAndHelpExitZero) {
  std::string out, err;
  EXPECT_EQ(RunCli({"--version"}, &out, &err), 0);
  EXPECT_EQ(out, std::string("tencache-sim ") + TENCACHE_VERSION + "\n");  // "tencache-sim 0.1.0"
  EXPECT_EQ(err, "");
  for (const char* help : {"--help", "-h"}) {
    EXPECT_EQ(RunCli({help}, &out, &err), 0) << help;  // no budgets needed for help
    for (const char* flag : {"--device-budget SIZE", "--policy", "--separate-pcie", "--write-trace"}) {
      EXPECT_NE(out.find(flag), std::string::npos) << flag << "\n" << out;
    }
    EXPECT_EQ(out.find("e+"), std::string::npos) << out;  // defaults as people write them
  }
}

TEST(SimCliTest, UnknownFlagOrBadValueIsOneLineNamingTheFlag) {
  const std::vector<std::string> base = {"--model", "tiny", "--device-budget", "1GiB", "--host-budget", "8GiB"};
  struct Case { std::vector<std::string> extra; std::vector<const char*> needles; };
  const std::vector<Case> cases = {
      {{"--devce-budget=2GiB"}, {"--devce-budget", "not expected"}},
      {{"--steps=0"}, {"--steps: got '0', expected a whole number from 1 to"}},
      {{"--net-gbps", "fast"}, {"--net-gbps: got 'fast', expected a positive number"}},
      {{"--nvme-budget=lots"}, {"--nvme-budget: 'lots' is not a byte size"}},
      {{"--device-budget=0"}, {"--device-budget: got '0', expected a size of more than 0"}},
      {{"--json=maybe"}, {"--json"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    std::string out, err;
    EXPECT_EQ(RunCli(args, &out, &err), 2) << c.extra[0];
    EXPECT_EQ(out, "");
    for (const char* needle : c.needles) EXPECT_NE(err.find(needle), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << err;  // one line
    EXPECT_EQ(err.rfind("tencache-sim: ", 0), 0u) << err;
  }
}

// --optimizer-overlap on runs the synthesised updates on the optimizer lane:
// the written trace marks them, and the table gains the training thread's wait
// for the lane (the JSON always has it); off, the default, is the table as it was.
TEST(SimCliTest, OptimizerOverlapRunsUpdatesOnTheLane) {
  const std::string path = ::testing::TempDir() + "/sim_cli_test_lane.jsonl";
  const std::vector<std::string> base = {"--model", "tiny", "--device-budget", "1MiB", "--host-budget", "1GiB"};
  std::string off, on, err;
  ASSERT_EQ(RunCli(base, &off, &err), 0) << err;
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--optimizer-overlap", "on", "--write-trace", path});
  ASSERT_EQ(RunCli(args, &on, &err), 0) << err;
  EXPECT_EQ(off.find("OPT_WAIT_S"), std::string::npos) << off;
  EXPECT_NE(on.find("OPT_WAIT_S"), std::string::npos) << on;
  StatusOr<Trace> trace = ReadTraceFile(path);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  for (const TraceEvent& e : trace->events) {
    EXPECT_EQ(e.optimizer_lane, e.kind == EventKind::kAccess && e.phase == Phase::kOptimizer);
  }
  std::remove(path.c_str());
  args = base;
  args.insert(args.end(), {"--json"});
  ASSERT_EQ(RunCli(args, &off, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(off)["results"][0]["optimizer_wait_s"], 0.0);
  args.insert(args.end(), {"--optimizer-overlap", "maybe"});
  EXPECT_EQ(RunCli(args, &off, &err), 2);
  EXPECT_NE(err.find("--optimizer-overlap"), std::string::npos) << err;
}

TEST(SimCliTest, WrittenTraceReplaysToTheSameResults) {
  const std::string path = ::testing::TempDir() + "/sim_cli_test_trace.jsonl";
  std::string from_model, from_trace, err;
  ASSERT_EQ(RunCli({"--model", "gpt2", "--ranks", "2", "--device-budget", "150MiB",
                 "--host-budget", "8GiB", "--json", "--write-trace", path}, &from_model, &err), 0)
      << err;
  ASSERT_EQ(RunCli({"--trace", path, "--device-budget", "150MiB", "--host-budget", "8GiB", "--json"},
                &from_trace, &err), 0) << err;
  EXPECT_EQ(from_model, from_trace);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tencache
