// The local runner against stand-in programs that print what mpirun prints:
// rank-tagged lines, metrics, a rank's error, Open MPI's death notice. Signals
// are raised from the metrics callback, so nothing waits on a timer.
#include "launcher/local_runner.h"
#include "launcher/run_follower.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tencache {
namespace {

namespace fs = std::filesystem;

fs::path Scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tencache_local_runner_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  return p;
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

RunOptions Options(const fs::path& dir, const std::string& script) {
  RunOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.log_dir = (dir / "logs").string();
  o.metrics_path = (dir / "metrics.jsonl").string();
  o.total_steps = 2;
  o.progress_every_s = 0;
  return o;
}

TEST(LocalRunner, MpirunCommandIsAnArgumentVector) {
  MpirunSpec s;
  s.worker = "/w/tencache-worker";
  s.job = "/run/job resolved.yaml";  // a space stays inside one argument
  s.ranks = 3;
  s.steps = 7;
  s.as_root = true;
  const std::vector<std::string> argv = MpirunCommand(s);
  const std::vector<std::string> expect = {"mpirun", "--allow-run-as-root", "--oversubscribe", "--tag-output", "-n", "3",
                                           "/w/tencache-worker", "--job", "/run/job resolved.yaml", "--report-lines",
                                           "--steps", "7"};
  EXPECT_EQ(argv, expect);
}

TEST(LocalRunner, FilesEachRanksLinesAndRankZerosMetrics) {
  const fs::path dir = Scratch("ok");
  StatusOr<RunOutcome> r = RunLocal(Options(dir,
      "echo '[1,0]<stdout>:TENCACHE_PID 11 host'; echo '[1,1]<stdout>:TENCACHE_PID 12 host';"
      "echo '[1,0]<stdout>:TENCACHE_METRICS {\"step\":0,\"loss\":5.5,\"step_time_s\":0.1}';"
      "echo '[1,1]<stderr>:a warning' ;"
      "echo '[1,0]<stdout>:TENCACHE_METRICS {\"step\":1,\"loss\":5.0,\"step_time_s\":0.1}'"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->steps_done, 2);
  EXPECT_EQ(r->failed_rank, -1);
  EXPECT_EQ(Read(dir / "logs" / "rank-1.err"), "a warning\n");
  EXPECT_NE(Read(dir / "logs" / "rank-0.out").find("TENCACHE_PID 11"), std::string::npos);
  const std::string metrics = Read(dir / "metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 2);
  fs::remove_all(dir);
}

// Open MPI tags every chunk of about 1 KiB it forwards: a long metrics line
// arrives with its tag again in the middle. It is read whole; a line that is
// not JSON is said, and counted, not dropped in silence.
TEST(LocalRunner, LongMetricsLinesSplitByOpenMpisTagsAreReadWhole) {
  const fs::path dir = Scratch("long");
  FollowerOptions o;
  o.log_dir = (dir / "logs").string();
  o.metrics_path = (dir / "metrics.jsonl").string();
  o.total_steps = 3;
  o.progress_every_s = 0;
  RunFollower f(o);
  ASSERT_TRUE(f.Open().ok());
  const std::string pad(1500, 'x');
  f.Line("[1,0]<stdout>:TENCACHE_METRICS {\"step\":0,\"loss\":5.5,\"pad\":\"" + pad.substr(0, 990) +
             "[1,0]<stdout>:" + pad.substr(990) + "\",\"step_time_s\":0.1}",
         false);
  f.Line("[1,0]<stdout>:TENCACHE_METRICS {\"step\":1,\"loss\":5.0,\"step_time_s\":0.1}", false);
  f.Line("[1,0]<stdout>:TENCACHE_METRICS {\"step\":2,\"loss\":", false);
  EXPECT_EQ(f.steps_done(), 2);
  EXPECT_EQ(f.unreadable_metrics(), 1);
  const std::string metrics = Read(dir / "metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 2);
  EXPECT_NE(metrics.find("\"pad\":\"" + pad + "\""), std::string::npos);
  fs::remove_all(dir);
}

TEST(LocalRunner, ADeadRankIsNamedWithItsLastStderrLines) {
  const fs::path dir = Scratch("dead");
  StatusOr<RunOutcome> r = RunLocal(Options(dir,
      "echo '[1,1]<stderr>:loading'; echo '[1,1]<stderr>:tencache-worker (rank 1): tensor x: EIO' ;"
      "echo 'MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD' >&2; exit 5"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 5);
  EXPECT_EQ(r->failed_rank, 1);
  EXPECT_EQ(r->failure, "tensor x: EIO");
  ASSERT_EQ(r->last_stderr.size(), 2u);
  EXPECT_EQ(r->last_stderr[0], "loading");
  EXPECT_NE(Read(dir / "logs" / "mpirun.err").find("MPI_ABORT"), std::string::npos);
  fs::remove_all(dir);
}

TEST(LocalRunner, OpenMpisDeathNoticeNamesTheRank) {
  const fs::path dir = Scratch("signal");
  StatusOr<RunOutcome> r = RunLocal(Options(dir,
      "echo 'mpirun noticed that process rank 1 with PID 4242 on node vm exited on signal 9 (Killed).' >&2; exit 137"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->failed_rank, 1);
  EXPECT_EQ(r->failure, "killed by signal 9 (Killed) on vm");
  EXPECT_NE(r->exit_code, 0);
  fs::remove_all(dir);
}

TEST(LocalRunner, HostsGoToMpirunWithTheAgentAndInterface) {
  MpirunSpec s;
  s.worker = "w";
  s.job = "j";
  s.ranks = 4;
  s.oversubscribe = false;
  s.hosts = {{"node1", 2}, {"10.0.0.2", 2}};
  s.rsh_agent = "ssh -p 2222";
  s.network_interface = "eth1";
  const std::vector<std::string> expect = {"mpirun", "--host", "node1:2,10.0.0.2:2", "--mca", "plm_rsh_agent",
                                           "ssh -p 2222", "--mca", "btl_tcp_if_include", "eth1", "--mca",
                                           "oob_tcp_if_include", "eth1", "--tag-output", "-n", "4", "w", "--job", "j",
                                           "--report-lines"};
  EXPECT_EQ(MpirunCommand(s), expect);
}

// A node lost mid-run: Open MPI's generic daemon notice, then the peer notice
// that names the node (as Open MPI 4.1 prints them).
TEST(LocalRunner, ALostNodeIsNamed) {
  const fs::path dir = Scratch("lost");
  StatusOr<RunOutcome> r = RunLocal(Options(dir,
      "echo '[1,0]<stdout>:TENCACHE_PID 1 othernode' ; "
      "printf 'ORTE was unable to reliably start one or more daemons.\n  Local host: tcn1\n  Peer host:  192.0.2.2\n' >&2; "
      "exit 1"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->failed_host, "192.0.2.2");
  EXPECT_EQ(r->failure, "the connection to 192.0.2.2 was lost: its rank or its Open MPI daemon died");
  EXPECT_NE(r->exit_code, 0);
  fs::remove_all(dir);
}

// mpirun's stand-in with `traps`: it reports one step, then waits for a
// signal; the first metrics line raises SIGTERM here, as if the user pressed
// Ctrl-C then.
StatusOr<RunOutcome> RunInterrupted(const fs::path& dir, const std::string& traps, double grace_s) {
  RunOptions o = Options(dir, traps +
      "echo '[1,0]<stdout>:TENCACHE_METRICS {\"step\":0,\"loss\":5.5,\"step_time_s\":0.1}';"
      "while :; do sleep 0.05; done");
  o.stop_grace_s = grace_s;
  o.on_metrics = [](const nlohmann::json&) { raise(SIGTERM); };
  return RunLocal(o);
}

TEST(LocalRunner, SigtermIsForwardedAndTheRunStops) {
  const fs::path dir = Scratch("term");
  StatusOr<RunOutcome> r = RunInterrupted(dir, "trap 'echo stopped >&2; exit 143' TERM;", 0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->interrupted);
  EXPECT_NE(r->exit_code, 0);
  EXPECT_LT(r->stop_seconds, 10.0);
  EXPECT_EQ(Read(dir / "logs" / "mpirun.err"), "stopped\n");
  fs::remove_all(dir);
}

// SIGUSR1 (forwarded to the ranks) ends the stand-in after its "checkpoint";
// SIGTERM would be Open MPI killing the ranks mid-way.
TEST(LocalRunner, AFirstSignalLetsTheRanksFinishTheirStepAndCheckpoint) {
  const fs::path dir = Scratch("grace");
  StatusOr<RunOutcome> r = RunInterrupted(
      dir, "trap 'echo usr1 >&2; echo checkpoint written >&2; exit 1' USR1; trap 'echo term >&2; exit 143' TERM;", 60);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->interrupted);
  EXPECT_FALSE(r->forced);
  EXPECT_EQ(Read(dir / "logs" / "mpirun.err"), "usr1\ncheckpoint written\n");
  fs::remove_all(dir);
}

TEST(LocalRunner, RanksThatDoNotStopWithinTheGraceAreStopped) {
  const fs::path dir = Scratch("grace-over");
  StatusOr<RunOutcome> r = RunInterrupted(dir, "trap 'echo usr1 >&2' USR1; trap 'echo term >&2; exit 143' TERM;", 0.5);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->interrupted);
  EXPECT_TRUE(r->forced);
  EXPECT_LT(r->stop_seconds, 10.0);
  EXPECT_EQ(Read(dir / "logs" / "mpirun.err"), "usr1\nterm\n");
  fs::remove_all(dir);
}

TEST(LocalRunner, CaptureOutputReportsFailures) {
  StatusOr<std::string> ok = CaptureOutput({"/bin/sh", "-c", "echo hello"}, {{"X", "1"}}, 30);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "hello\n");
  StatusOr<std::string> bad = CaptureOutput({"/bin/sh", "-c", "echo oops >&2; exit 3"}, {}, 30);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("oops"), std::string::npos);
  EXPECT_FALSE(CaptureOutput({"/nonexistent/program"}, {}, 30).ok());
}

}  // namespace
}  // namespace tencache
