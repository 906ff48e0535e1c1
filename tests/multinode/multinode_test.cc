// Multi-node runs on one machine: `tencache-launch` with cluster.target hosts
// over "nodes" that are network namespaces (tests/multinode/netns-nodes.sh):
// each has its own hostname and interface, linked by veth through a bridge, with
// addresses from 192.0.2.0/24, and Open MPI reaches them through an rsh agent
// that enters a namespace in place of ssh. MPI runs over TCP between them.
// Not real machines: they share this kernel, disk and cores. Needs root and
// namespaces; skips with a message otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_runner.h"

namespace {

namespace fs = std::filesystem;
using tencache::testing::CommandResult;
using tencache::testing::RunCommand;

const std::string kNodes = std::string(TENCACHE_SOURCE_DIR) + "/tests/multinode/netns-nodes.sh";
// The job a user starts with: the quickstart, as it ships.
const std::string kQuickstart = std::string(TENCACHE_SOURCE_DIR) + "/configs/examples/quickstart.yaml";

std::vector<double> Losses(const fs::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class NamespaceNodes : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty()) {
      RunCommand(kNodes + " down " + dir_.string() + " 2>&1");
      fs::remove_all(dir_);
    }
  }
  // Makes `n` nodes (RATE: their links shaped with tc tbf); false: skip.
  bool Up(int n, const std::string& rate = "") {
    dir_ = fs::temp_directory_path() / ("tencache_multinode_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    CommandResult r = RunCommand(kNodes + " up " + dir_.string() + " " + std::to_string(n) + " " + rate + " 2>&1");
    if (r.code == 77) {
      skip_ = r.out;
      return false;
    }
    EXPECT_EQ(r.code, 0) << r.out;
    return r.code == 0;
  }
  std::string Hosts(int n, int slots) const {
    std::string list;
    for (int i = 1; i <= n; ++i) list += (i > 1 ? "," : "") + std::string("192.0.2.") + std::to_string(i) + ":" + std::to_string(slots);
    return "[" + list + "]";
  }
  // The quickstart on these nodes: its NVMe tier under the test's folder, and a
  // host budget below each rank's states (6.4 MiB on 2 ranks, 4.3 MiB on 3,
  // 3.2 MiB on 4) so that every node's ranks use their NVMe tier.
  std::string QuickstartSets(int ranks) const {
    return " --set cache.nvme_path=" + (dir_ / "nvme").string() + " --set cache.host_budget=" +
           (ranks <= 2 ? "3MiB" : ranks == 3 ? "2MiB" : "1600KiB") + batch_;
  }
  // tencache-launch from node 1, as a user on the first machine would.
  std::string LaunchCommand(int n, int slots, int steps, const std::string& out) const {
    return "nsenter -t $(cat " + (dir_ / "192.0.2.1.pid").string() + ") -n -u -- " + TENCACHE_LAUNCH_BIN + " " +
           kQuickstart + " --set cluster.target=hosts --set 'cluster.hosts=" + Hosts(n, slots) +
           "' --set cluster.rsh_agent=" + (dir_ / "rsh").string() + " --set cluster.network_interface=eth0" +
           QuickstartSets(n * slots) + " --steps " + std::to_string(steps) + " --out " + out;
  }
  // The quickstart on one rank, on this machine: the losses to match.
  std::vector<double> OneRank(int steps) {
    const fs::path metrics = dir_ / "one.jsonl";
    CommandResult r = RunCommand(std::string(TENCACHE_WORKER_BIN) + " --job " + kQuickstart +
                                 " --set train.micro_batch=1 --set cache.policy=none --set cache.nvme_path=" +
                                 (dir_ / "nvme-one").string() + batch_ + " --steps " + std::to_string(steps) +
                                 " --sample 0 --metrics " + metrics.string() + " 2>&1");
    EXPECT_EQ(r.code, 0) << r.out;
    return Losses(metrics);
  }
  void ExpectMatchesOneRank(int nodes, int slots, int steps) {
    const fs::path out = dir_ / "run";
    CommandResult r = RunCommand(LaunchCommand(nodes, slots, steps, out.string()) + " 2>&1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("--host " + Hosts(nodes, slots).substr(1, Hosts(nodes, slots).size() - 2)), std::string::npos)
        << r.out;
    std::vector<double> one = OneRank(steps), many = Losses(out / "metrics.jsonl");
    ASSERT_EQ(many.size(), size_t(steps));
    ASSERT_EQ(one.size(), size_t(steps));
    for (int s = 0; s < steps; ++s) EXPECT_LT(std::fabs(one[s] - many[s]) / one[s], 1e-4) << "step " << s;
    EXPECT_TRUE(fs::exists(out / "report.md"));
    // Per-node figures: one entry per node, each with its ranks' NVMe traffic.
    std::ifstream report_in(out / "report.json");
    const nlohmann::json report = nlohmann::json::parse(report_in);
    ASSERT_EQ(report["nodes"].size(), size_t(nodes)) << report["nodes"];
    for (int n = 0; n < nodes; ++n) {
      const nlohmann::json& node = report["nodes"][n];
      EXPECT_EQ(node["host"], "tcn" + std::to_string(n + 1)) << node;
      EXPECT_EQ(node["ranks"].size(), size_t(slots)) << node;
      EXPECT_GT(node["peak_nvme_bytes"].get<double>(), 0) << node;
      EXPECT_GT(node["step_time_s"].get<double>(), 0) << node;
    }
    std::ifstream md(out / "report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("## Per node"), std::string::npos);
    // Every rank's swap file is gone at the end of the run (each node's NVMe
    // use is in the report above), and the last rank ran on the last node (its
    // PID line names the node's hostname).
    std::error_code ec;
    for (const auto& f : fs::recursive_directory_iterator(dir_ / "nvme", ec))
      EXPECT_NE(f.path().extension(), ".tcnvme") << f.path() << " was left behind";
    std::ifstream logs(out / "logs" / ("rank-" + std::to_string(nodes * slots - 1) + ".out"));
    std::string all((std::istreambuf_iterator<char>(logs)), std::istreambuf_iterator<char>());
    EXPECT_NE(all.find(" tcn" + std::to_string(nodes)), std::string::npos) << all.substr(0, 400);
  }
  // Managed recovery: the uninterrupted run's losses (10 steps, a checkpoint
  // every 3) on `nodes` nodes; then the same with --max-restarts 1 started in
  // the background (its output in DIR/managed.out, exit code in
  // DIR/managed.rc), returning once its checkpoint of step 6 is written.
  std::vector<double> WholeThenManagedToStep6(int nodes, const fs::path& out) {
    const std::string every3 = " --set train.checkpoint_every=3";
    CommandResult whole = RunCommand(LaunchCommand(nodes, 1, 10, (dir_ / "whole").string()) + every3 + " 2>&1");
    EXPECT_EQ(whole.code, 0) << whole.out;
    RunCommand("(" + LaunchCommand(nodes, 1, 10, out.string()) + every3 +
               " --max-restarts 1 --set cluster.restart_backoff_s=0 >" + (dir_ / "managed.out").string() +
               " 2>&1; echo $? >" + (dir_ / "managed.rc").string() + ") >/dev/null 2>&1 &");
    const fs::path step6 = out / "checkpoints" / "step-00000006";
    const double deadline = Now() + 240;
    while (!fs::is_directory(step6) && Now() < deadline) usleep(2000);
    EXPECT_TRUE(fs::is_directory(step6)) << "no checkpoint of step 6";
    return Losses(dir_ / "whole" / "metrics.jsonl");
  }
  // The managed run's exit code once it ends (-1: not within `seconds`); *said: its output.
  int ManagedExit(double seconds, std::string* said) {
    const double deadline = Now() + seconds;
    int rc = -1;
    for (;;) {
      std::ifstream in(dir_ / "managed.rc");
      if (in >> rc || Now() >= deadline) break;
      usleep(10000);
    }
    std::ifstream said_in(dir_ / "managed.out");
    said->assign((std::istreambuf_iterator<char>(said_in)), std::istreambuf_iterator<char>());
    return rc;
  }
  fs::path dir_;
  std::string skip_;
  std::string batch_;  // --set train.global_batch=N where the quickstart's 8 does not divide over the ranks
};

#define NODES_OR_SKIP(...) \
  if (!Up(__VA_ARGS__)) GTEST_SKIP() << "network namespaces unavailable: " << skip_

TEST_F(NamespaceNodes, TwoNodesOfOneRankMatchOneRank) {
  NODES_OR_SKIP(2);
  ExpectMatchesOneRank(2, 1, 8);
}

TEST_F(NamespaceNodes, ThreeNodesOfOneRankMatchOneRank) {
  NODES_OR_SKIP(3);
  batch_ = " --set train.global_batch=12";
  ExpectMatchesOneRank(3, 1, 3);
}

TEST_F(NamespaceNodes, TwoNodesOfTwoRanksMatchOneRank) {
  NODES_OR_SKIP(2);
  ExpectMatchesOneRank(2, 2, 6);
}

TEST_F(NamespaceNodes, ALinkShapedToOneGigabitTrainsTheSame) {
  NODES_OR_SKIP(2, "1gbit");
  ExpectMatchesOneRank(2, 1, 4);
  // The shaping is part of the probe cache's key: a cached probe of the
  // unshaped link is not reused for it.
  std::ifstream in(dir_ / "run" / "machine.json");
  const nlohmann::json machine = nlohmann::json::parse(in);
  EXPECT_NE(machine["facts"]["links"].get<std::string>().find("tbf"), std::string::npos) << machine["facts"];
}

// A host that cannot be reached stops the launch before anything starts, named.
TEST_F(NamespaceNodes, AnUnreachableHostIsNamedBeforeTheRun) {
  NODES_OR_SKIP(2);
  std::string cmd = LaunchCommand(2, 1, 4, (dir_ / "run").string());
  cmd.replace(cmd.find("192.0.2.2:1"), 11, "192.0.2.9:1");
  CommandResult r = RunCommand(cmd + " 2>&1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot reach host '192.0.2.9' through"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "run" / "metrics.jsonl"));
}

// A node dies mid-run (every process in its namespace killed): the launcher
// stops the run, names the node, and exits non-zero.
TEST_F(NamespaceNodes, AKilledNodeIsNamed) {
  NODES_OR_SKIP(2);
  const fs::path out = dir_ / "run";
  // The launcher in the background; its third step (read from the metrics as
  // they are written) starts the kill.
  const std::string launch = "(" + LaunchCommand(2, 1, 100000, out.string()) + " >" + (dir_ / "launch.out").string() +
                             " 2>&1; echo $? >" + (dir_ / "launch.rc").string() + ") &";
  const std::string third_step = "timeout 300 tail -n +1 -F " + (out / "metrics.jsonl").string() +
                                 " 2>/dev/null | grep -q -m 3 '\"step\"'";
  const std::string wait_rc = "timeout 120 tail -n +1 -F " + (dir_ / "launch.rc").string() + " 2>/dev/null | grep -q -m 1 .";
  CommandResult r = RunCommand(launch + " " + third_step + " && " + kNodes + " kill " + dir_.string() +
                               " 192.0.2.2 && date +%s.%N && " + wait_rc + " && date +%s.%N");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream rc_in(dir_ / "launch.rc"), out_in(dir_ / "launch.out");
  int rc = 0;
  rc_in >> rc;
  std::string said((std::istreambuf_iterator<char>(out_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(rc, 0) << said;
  // The launcher's own failure line names the node (the command line it
  // printed names every host, so look at that line alone).
  std::string failure;
  std::istringstream lines(said);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("tencache-launch: ", 0) == 0 && line.find("failed") != std::string::npos) failure = line;
  }
  EXPECT_TRUE(failure.find("192.0.2.2") != std::string::npos || failure.find("tcn2") != std::string::npos)
      << "failure line: '" << failure << "'\n" << said;
  double killed = 0, ended = 0;
  std::istringstream times(r.out);
  times >> killed >> ended;
  EXPECT_LT(ended - killed, 30.0) << "the launcher took " << ended - killed << " s to stop after the node died";
}

// The PID rank `rank` reported (its TENCACHE_PID line in the run's logs); -1: none yet.
long RankPid(const fs::path& run, int rank) {
  std::ifstream in(run / "logs" / ("rank-" + std::to_string(rank) + ".out"));
  std::string word;
  while (in >> word) {
    if (word == "TENCACHE_PID") {
      long pid = -1;
      in >> pid;
      return pid;
    }
  }
  return -1;
}

// Issue #40, managed recovery on hosts: rank 1, on the second node, killed with
// SIGKILL once the checkpoint of step 6 is written; with `--max-restarts 1` the
// launcher starts both nodes' ranks again from that checkpoint and the run ends
// with the uninterrupted run's losses, bit for bit.
TEST_F(NamespaceNodes, WithMaxRestarts1AKilledRankIsRestartedAndEndsBitwiseAsTheUninterruptedRun) {
  NODES_OR_SKIP(2);
  const fs::path out = dir_ / "managed";
  const std::vector<double> want = WholeThenManagedToStep6(2, out);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_FALSE(HasFailure());
  const long victim = RankPid(out, 1);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(pid_t(victim), SIGKILL), 0);
  std::string said;
  EXPECT_EQ(ManagedExit(240, &said), 0) << said;
  EXPECT_NE(said.find("restart 1 of 1 in 0 s, from the checkpoint at step 6"), std::string::npos) << said;
  const std::vector<double> got = Losses(out / "metrics.jsonl");
  ASSERT_EQ(got.size(), 10u);
  for (size_t s = 0; s < got.size(); ++s) EXPECT_EQ(got[s], want[s]) << "step " << s << " (bitwise)";
  std::ifstream run_in(out / "run.json");
  const nlohmann::json run = nlohmann::json::parse(run_in);
  EXPECT_EQ(run["status"], "finished");
  EXPECT_EQ(run["attempts"].size(), 2u) << run.dump(2);
}

// Issue #40, a restart that plans again on the capacity left: of three nodes
// of one rank, the third is lost (every process in its namespace killed, its
// rsh entry gone) once the checkpoint of step 6 is written; with
// `--max-restarts 1` the launcher leaves it out, plans the job for the two
// left, and their two ranks resume the three ranks' checkpoint (resharded).
// Steps 0-5 are the uninterrupted three-node run's bit for bit, steps 6-9
// within 1e-5 relative (another reduction order), fp32.
TEST_F(NamespaceNodes, WithMaxRestarts1ALostNodeIsLeftOutAndTheRestResumeItsCheckpoint) {
  NODES_OR_SKIP(3);
  batch_ = " --set train.global_batch=12";
  const fs::path out = dir_ / "managed";
  const std::vector<double> want = WholeThenManagedToStep6(3, out);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_FALSE(HasFailure());
  CommandResult killed = RunCommand(kNodes + " kill " + dir_.string() + " 192.0.2.3 2>&1");
  ASSERT_EQ(killed.code, 0) << killed.out;
  std::string said;
  EXPECT_EQ(ManagedExit(300, &said), 0) << said;
  EXPECT_NE(said.find("tencache-launch: planned again without 192.0.2.3 ("), std::string::npos) << said;
  EXPECT_NE(said.find("): 2 host(s), 2 rank(s)"), std::string::npos) << said;
  EXPECT_NE(said.find("restart 1 of 1 in 0 s, from the checkpoint at step 6"), std::string::npos) << said;
  const std::vector<double> got = Losses(out / "metrics.jsonl");
  ASSERT_EQ(got.size(), 10u) << said;
  for (size_t s = 0; s < 6; ++s) EXPECT_EQ(got[s], want[s]) << "step " << s << " (bitwise, three ranks)";
  for (size_t s = 6; s < got.size(); ++s) {
    EXPECT_LT(std::fabs(got[s] - want[s]) / want[s], 1e-5) << "step " << s << " on two ranks";
  }
  std::ifstream run_in(out / "run.json");
  const nlohmann::json run = nlohmann::json::parse(run_in);
  EXPECT_EQ(run["status"], "finished");
  ASSERT_EQ(run["attempts"].size(), 2u) << run.dump(2);
  EXPECT_NE(run["attempts"][0].value("replanned", "").find("192.0.2.3"), std::string::npos) << run.dump(2);
  // The run folder's job is the one the second attempt ran: two hosts.
  std::ifstream job_in(out / "job.resolved.yaml");
  const std::string job((std::istreambuf_iterator<char>(job_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(job.find("hosts: [\"192.0.2.1:1\", \"192.0.2.2:1\"]  # planned again for the restart, without "
                     "192.0.2.3 ("),
            std::string::npos)
      << job;
  std::ifstream report_in(out / "report.json");
  EXPECT_EQ(nlohmann::json::parse(report_in)["run"]["nodes"], 2);
}

}  // namespace
