// Issue #14, a rank killed mid-run: `tencache-launch JOB.yaml` with
// checkpoints every 3 steps, one rank's worker sent SIGKILL while it computes
// step 6 (0-based: six steps done, the checkpoint of step 6 committed). The
// launcher must stop every rank and exit non-zero within 10 s naming the rank,
// and `tencache-launch JOB.yaml --resume RUN_DIR` must continue at step 6 with
// the uninterrupted run's losses bit for bit. The kill waits on the checkpoint
// folder, polled with a deadline, never on a timer. Nothing may be left under
// cache.nvme_path after the kill. The later cases (#40) let the launcher
// restart the run itself (cluster.max_restarts): after a SIGKILL, after a
// SIGTERM to a rank, and with the ranks stopped mid-checkpoint.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
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

const std::string kQuickstart = std::string(TENCACHE_SOURCE_DIR) + "/configs/examples/quickstart.yaml";
// Both runs (and the resume) train the same 10 steps, checkpointing every 3.
const std::string kJob = kQuickstart + " --steps 10 --set train.checkpoint_every=3 --progress-every 0";
constexpr int kSteps = 10;
constexpr int kKillStep = 6;  // killed while computing step 6: the checkpoint of step 6 is the newest
constexpr int kVictim = 0;    // rank 0: the one that writes the metrics and the checkpoint's manifest

std::string Launch() { return std::string(TENCACHE_LAUNCH_BIN); }

fs::path Runs() {
  static const fs::path dir = fs::temp_directory_path() / ("tencache_kill_resume_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json ReadJson(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in, nullptr, false);
}

// One metrics line: its step and its loss, exactly.
struct StepLoss {
  int step = -1;
  double loss = 0;
};
std::vector<StepLoss> Losses(const fs::path& metrics) {
  std::vector<StepLoss> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j.contains("loss")) {
      ADD_FAILURE() << metrics << ": not a metrics line: " << line;
      continue;
    }
    out.push_back({j["step"].get<int>(), j["loss"].get<double>()});
  }
  return out;
}

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

// `got`'s losses equal `want`'s at the same steps, bit for bit.
void ExpectSameLosses(const std::vector<StepLoss>& want, const std::vector<StepLoss>& got, const std::string& what) {
  for (const StepLoss& g : got) {
    ASSERT_TRUE(g.step >= 0 && g.step < int(want.size()) && want[g.step].step == g.step) << what << ": step " << g.step;
    char text[128];
    std::snprintf(text, sizeof text, "%.17g vs uninterrupted %.17g", g.loss, want[g.step].loss);
    EXPECT_EQ(Bits(g.loss), Bits(want[g.step].loss)) << what << ", step " << g.step << ": loss " << text;
  }
}

pid_t PidOfRank(const fs::path& run, int rank) {
  std::ifstream in(run / "logs" / ("rank-" + std::to_string(rank) + ".out"));
  std::string word;
  pid_t pid = -1;
  while (in >> word) {
    if (word == "TENCACHE_PID") {
      in >> pid;
      break;
    }
  }
  return pid;
}

// Still running (a zombie, left for init to reap, has stopped).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (pid <= 0 || !std::getline(stat, text)) return false;
  return text.substr(text.rfind(')') + 2, 1) != "Z";
}

// The running processes whose command line names `needle` (mpirun and the
// workers of one run name its job.resolved.yaml), as "PID: command".
std::vector<std::string> RunningWith(const std::string& needle) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = ReadText(e.path() / "cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos && Alive(pid_t(std::stol(name)))) found.push_back(name + ": " + cmd);
  }
  return found;
}

// The complete checkpoints (step-N, not step-N.tmp) in `dir`, as step numbers.
std::vector<int> CompleteCheckpoints(const fs::path& dir) {
  std::vector<int> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.find(".tmp") == std::string::npos) steps.push_back(std::stoi(name.substr(5)));
  }
  return steps;
}

// tencache-launch started in the background (arguments split at spaces), its
// stdout and stderr in `log`.
pid_t Start(const std::string& args, const fs::path& log) {
  std::vector<std::string> argv = {Launch()};
  std::istringstream words(args);
  for (std::string w; words >> w;) argv.push_back(w);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `timeout_s` for `pid` to exit; its exit code, or -1 (killed by a
// signal, or still running: then it is stopped here).
int WaitExit(pid_t pid, double timeout_s, bool* in_time) {
  const double deadline = Now() + timeout_s;
  int status = 0;
  *in_time = true;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (Now() > deadline) {
      *in_time = false;
      kill(pid, SIGTERM);  // the launcher stops its ranks
      waitpid(pid, &status, 0);
      return -1;
    }
    poll(nullptr, 0, 5);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(KillResume, ARankKilledAtStep6StopsTheRunWithin10sAndResumeGivesTheUninterruptedLossesBitwise) {
  // Every run's swap files under one folder of the test's own.
  const fs::path nvme = Runs() / "nvme";
  const std::string kJob = ::kJob + " --set cache.nvme_path=" + nvme.string();
  // 1. Uninterrupted.
  const fs::path whole = Runs() / "uninterrupted";
  CommandResult ref = tencache::testing::RunCommand(Launch() + " " + kJob + " --out " + whole.string() + " 2>&1");
  ASSERT_EQ(ref.code, 0) << ref.out;
  const std::vector<StepLoss> want = Losses(whole / "metrics.jsonl");
  ASSERT_EQ(int(want.size()), kSteps) << ReadText(whole / "metrics.jsonl");
  for (int s = 0; s < kSteps; ++s) ASSERT_EQ(want[s].step, s);

  // 2. The same job, one rank killed once the checkpoint of step 6 is committed
  // (the ranks are then computing step 6: a step takes about half a second here).
  const fs::path killed = Runs() / "killed";
  const fs::path log = Runs() / "killed.log";
  const pid_t launcher = Start(kJob + " --out " + killed.string(), log);
  ASSERT_GT(launcher, 0);
  const fs::path step6 = killed / "checkpoints" / "step-00000006";
  const double deadline = Now() + 180;
  int status = 0;
  bool launcher_gone = false;
  while (!fs::is_directory(step6) && Now() < deadline) {
    if (waitpid(launcher, &status, WNOHANG) == launcher) {
      launcher_gone = true;
      break;
    }
    poll(nullptr, 0, 2);
  }
  if (!fs::is_directory(step6)) {
    bool in_time = false;
    if (!launcher_gone) WaitExit(launcher, 0, &in_time);
    FAIL() << step6 << " never appeared\n" << ReadText(log);
  }
  const pid_t victim = PidOfRank(killed, kVictim), other = PidOfRank(killed, 1 - kVictim);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const double killed_at = Now();

  // 3. Every rank stopped, the launcher exited non-zero naming the rank, within 10 s.
  bool in_time = false;
  const int code = WaitExit(launcher, 60, &in_time);
  const double stop_s = Now() - killed_at;
  const std::string out = ReadText(log);
  ASSERT_TRUE(in_time) << "the launcher still ran 60 s after the kill\n" << out;
  std::printf("kill -9 of rank %d at step %d: the launcher exited %d after %.2f s\n", kVictim, kKillStep, code, stop_s);
  RecordProperty("stop_seconds", std::to_string(stop_s));
  EXPECT_LT(stop_s, 10.0) << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_EQ(code, 1) << out;  // a rank failed (LaunchRun's contract)
  const std::string named = "rank " + std::to_string(kVictim) + " failed";
  EXPECT_NE(out.find(named), std::string::npos) << out;
  EXPECT_NE(out.find("after " + std::to_string(kKillStep) + " step(s)"), std::string::npos) << out;
  EXPECT_FALSE(Alive(victim));
  EXPECT_FALSE(Alive(other)) << "rank " << 1 - kVictim << " outlived the run";
  const std::vector<std::string> left = RunningWith((killed / "job.resolved.yaml").string());
  EXPECT_TRUE(left.empty()) << "still running: " << left.front();
  // The killed ranks could not remove their swap folder: the launcher did.
  EXPECT_NE(out.find("Removed the swap folder the stopped ranks left: " + nvme.string() + "/"), std::string::npos) << out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(nvme, ec)) {
    ADD_FAILURE() << "left behind by the killed run: " << e.path();
  }
  const nlohmann::json run = ReadJson(killed / "run.json");
  ASSERT_TRUE(run.is_object()) << ReadText(killed / "run.json");
  EXPECT_EQ(run["status"], "failed");
  EXPECT_EQ(run["failed_rank"], kVictim);
  EXPECT_EQ(run["steps_done"], kKillStep);
  // The kill came mid-step 6: six steps reported, each as in the uninterrupted
  // run, and the checkpoint of step 6 the newest complete one.
  const std::vector<StepLoss> before = Losses(killed / "metrics.jsonl");
  EXPECT_EQ(int(before.size()), kKillStep);
  ExpectSameLosses(want, before, "the killed run");
  const std::vector<int> ckpts = CompleteCheckpoints(killed / "checkpoints");
  ASSERT_FALSE(ckpts.empty());
  EXPECT_EQ(*std::max_element(ckpts.begin(), ckpts.end()), kKillStep);

  // 4. --resume RUN_DIR continues at step 6 with the uninterrupted losses, bitwise.
  const fs::path resumed = Runs() / "resumed";
  CommandResult again = tencache::testing::RunCommand(Launch() + " " + kJob + " --resume " + killed.string() +
                                                      " --out " + resumed.string() + " 2>&1");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(ReadText(resumed / "logs" / "rank-0.out")
                .find("resumed from " + fs::absolute(step6).string() + ": the next step is 6"),
            std::string::npos)
      << ReadText(resumed / "logs" / "rank-0.out");
  const std::vector<StepLoss> after = Losses(resumed / "metrics.jsonl");
  ASSERT_EQ(int(after.size()), kSteps - kKillStep) << ReadText(resumed / "metrics.jsonl");
  for (int i = 0; i < int(after.size()); ++i) EXPECT_EQ(after[i].step, kKillStep + i);
  ExpectSameLosses(want, after, "the resumed run");
  EXPECT_EQ(ReadJson(resumed / "report.json")["status"], "finished");
  if (!HasFailure()) fs::remove_all(Runs());  // kept for a look when the case failed
}

// ---- Issue #40, managed recovery: the launcher restarts the run itself.

// The uninterrupted run of `job` (a launch's arguments) in Runs()/NAME: its
// losses, one per step.
std::vector<StepLoss> Uninterrupted(const std::string& job, const std::string& name) {
  CommandResult ref = tencache::testing::RunCommand(Launch() + " " + job + " --out " + (Runs() / name).string() + " 2>&1");
  EXPECT_EQ(ref.code, 0) << ref.out;
  std::vector<StepLoss> want = Losses(Runs() / name / "metrics.jsonl");
  EXPECT_EQ(int(want.size()), kSteps);
  return want;
}

// `job` started in the background with `--max-restarts 1` and no backoff, into
// Runs()/NAME (its output in NAME.log).
pid_t StartRestarting(const std::string& job, const std::string& name) {
  return Start(job + " --max-restarts 1 --set cluster.restart_backoff_s=0 --out " + (Runs() / name).string(),
               Runs() / (name + ".log"));
}

// Waits while `launcher` runs, 180 s at most, for `path` to exist; false (the
// launcher stopped) when it never did.
bool WaitFor(const fs::path& path, pid_t launcher) {
  const double deadline = Now() + 180;
  int status = 0;
  while (!fs::exists(path) && Now() < deadline) {
    if (waitpid(launcher, &status, WNOHANG) == launcher) return fs::exists(path);
    poll(nullptr, 0, 2);
  }
  if (fs::exists(path)) return true;
  bool in_time = false;
  WaitExit(launcher, 0, &in_time);
  return false;
}

// Waits for the restarting launch NAME to end: exit 0, finished after one
// restart, every step reported once with the loss of `want`, bitwise, and no
// torn checkpoint left. Its run.json.
nlohmann::json ExpectRestartedRunEndsBitwise(pid_t launcher, const std::string& name,
                                             const std::vector<StepLoss>& want) {
  const fs::path dir = Runs() / name;
  bool in_time = false;
  const int code = WaitExit(launcher, 180, &in_time);
  const std::string out = ReadText(Runs() / (name + ".log"));
  EXPECT_TRUE(in_time) << "the launcher still ran 180 s later\n" << out;
  EXPECT_EQ(code, 0) << out;
  nlohmann::json run = ReadJson(dir / "run.json");
  if (!run.is_object()) {
    ADD_FAILURE() << ReadText(dir / "run.json") << out;
    return nlohmann::json::object();
  }
  EXPECT_EQ(run["status"], "finished");
  EXPECT_EQ(run["restarts"], 1);
  EXPECT_EQ(run["attempts"].size(), 2u) << run.dump(2);
  const std::vector<StepLoss> got = Losses(dir / "metrics.jsonl");
  EXPECT_EQ(int(got.size()), kSteps) << ReadText(dir / "metrics.jsonl");
  for (int s = 0; s < int(got.size()); ++s) EXPECT_EQ(got[s].step, s);
  ExpectSameLosses(want, got, name);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir / "checkpoints", ec)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "a torn checkpoint left: " << e.path();
  }
  return run.contains("attempts") && run["attempts"].size() == 2 ? run : nlohmann::json::object();
}

// The same kill with `--max-restarts 1`: the launcher itself starts the job
// again from the checkpoint of step 6 and the run ends with every step's loss
// as in the uninterrupted run, bit for bit; run.json, report.json and the
// pictures show both attempts.
TEST(KillResume, WithMaxRestarts1TheLauncherRestartsAKilledRankFromItsCheckpointAndEndsBitwiseAsTheUninterrupted) {
  const fs::path nvme = Runs() / "nvme";
  const std::string job = kJob + " --set cache.nvme_path=" + nvme.string();
  const std::vector<StepLoss> want = Uninterrupted(job, "uninterrupted");
  ASSERT_EQ(int(want.size()), kSteps);
  const pid_t launcher = StartRestarting(job, "managed");
  ASSERT_GT(launcher, 0);
  const fs::path managed = Runs() / "managed", step6 = managed / "checkpoints" / "step-00000006";
  ASSERT_TRUE(WaitFor(step6, launcher)) << step6 << " never appeared\n" << ReadText(Runs() / "managed.log");
  const pid_t victim = PidOfRank(managed, kVictim);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);

  const nlohmann::json run = ExpectRestartedRunEndsBitwise(launcher, "managed", want);
  ASSERT_TRUE(run.contains("attempts"));
  const std::string out = ReadText(Runs() / "managed.log");
  EXPECT_NE(out.find("restart 1 of 1 in 0 s, from the checkpoint at step 6"), std::string::npos) << out;
  EXPECT_NE(ReadText(managed / "logs" / "rank-0.out")
                .find("resumed from " + fs::absolute(step6).string() + ": the next step is 6"),
            std::string::npos)
      << ReadText(managed / "logs" / "rank-0.out");
  EXPECT_TRUE(fs::exists(managed / "logs.attempt-1" / "rank-0.out")) << "the failed attempt's logs are kept";
  const nlohmann::json& first = run["attempts"][0];
  EXPECT_EQ(first["status"], "failed");
  EXPECT_EQ(first["failed_rank"], kVictim);
  EXPECT_EQ(first["resumed_at_step"], kKillStep);
  EXPECT_EQ(first["steps_lost"], first["steps_done"].get<int>() - kKillStep) << first.dump();
  ASSERT_TRUE(first["recover_seconds"].is_number()) << first.dump();
  std::printf("kill -9 of rank %d after the checkpoint of step %d: %d step(s) lost, recovered in %.2f s\n", kVictim,
              kKillStep, first["steps_lost"].get<int>(), first["recover_seconds"].get<double>());
  RecordProperty("recover_seconds", std::to_string(first["recover_seconds"].get<double>()));
  EXPECT_EQ(run["attempts"][1]["status"], "finished");
  EXPECT_EQ(run["attempts"][1]["first_step"], kKillStep);
  const nlohmann::json report = ReadJson(managed / "report.json");
  EXPECT_EQ(report["status"], "finished");
  EXPECT_EQ(report["attempts"], run["attempts"]);
  EXPECT_NE(ReadText(managed / "report.md").find("## Attempts"), std::string::npos);
  // `tencache-launch report` rebuilds the same attempts from run.json.
  CommandResult rebuilt = tencache::testing::RunCommand(Launch() + " report " + managed.string() + " 2>&1");
  EXPECT_EQ(rebuilt.code, 0) << rebuilt.out;
  EXPECT_EQ(ReadJson(managed / "report.json")["attempts"], run["attempts"]);
  if (fs::exists(managed / "plots" / "loss_step_time.gp")) {  // drawn where gnuplot is installed
    EXPECT_NE(ReadText(managed / "plots" / "loss_step_time.gp").find("set arrow from first 6, graph 0"),
              std::string::npos);
  }
  const std::vector<std::string> left = RunningWith((managed / "job.resolved.yaml").string());
  EXPECT_TRUE(left.empty()) << "still running: " << left.front();
  std::error_code ec;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(nvme, ec)) {
    ADD_FAILURE() << "left behind by the restarted run: " << e.path();
  }
  if (!HasFailure()) fs::remove_all(Runs());
}

// A preempted machine's SIGTERM reaches a rank, not the launcher: the ranks
// finish the step, write a checkpoint and exit; with `--max-restarts 1` the
// launcher resumes from that checkpoint, losing no step, and the run ends with
// the uninterrupted losses bit for bit.
TEST(KillResume, WithMaxRestarts1ARankSigtermedMidRunIsResumedFromItsStopCheckpointLosingNoStep) {
  const std::string job = kJob + " --set cache.nvme_path=" + (Runs() / "nvme").string();
  const std::vector<StepLoss> want = Uninterrupted(job, "uninterrupted");
  ASSERT_EQ(int(want.size()), kSteps);
  const pid_t launcher = StartRestarting(job, "preempted");
  ASSERT_GT(launcher, 0);
  const fs::path run_dir = Runs() / "preempted";
  ASSERT_TRUE(WaitFor(run_dir / "checkpoints" / "step-00000003", launcher)) << ReadText(Runs() / "preempted.log");
  const pid_t rank1 = PidOfRank(run_dir, 1);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGTERM), 0);

  const nlohmann::json run = ExpectRestartedRunEndsBitwise(launcher, "preempted", want);
  ASSERT_TRUE(run.contains("attempts"));
  const nlohmann::json& first = run["attempts"][0];
  const int stopped_at = first["steps_done"].get<int>();
  EXPECT_GT(stopped_at, 3);
  EXPECT_LT(stopped_at, kSteps) << "the stop came before the last step";
  EXPECT_EQ(first["resumed_at_step"], stopped_at) << "the stop's own checkpoint: " << first.dump();
  EXPECT_EQ(first["steps_lost"], 0);
  EXPECT_NE(ReadText(run_dir / "logs.attempt-1" / "rank-0.out").find("stopped after step " + std::to_string(stopped_at)),
            std::string::npos);
  if (!HasFailure()) fs::remove_all(Runs());
}

// A checkpoint caught mid-write: a step-N.tmp folder of `run` (N >= 3, so that
// complete ones precede it) whose step-N is not there while both ranks are
// stopped (SIGSTOP); *step is N. A checkpoint that completes before the ranks
// stop is let go (SIGCONT) and the next one tried. false: none caught before
// the launcher ended or 180 s passed.
bool FreezeMidCheckpoint(const fs::path& run, pid_t launcher, const pid_t ranks[2], int* step) {
  const fs::path dir = run / "checkpoints";
  std::vector<std::string> tried;
  const double deadline = Now() + 180;
  int status = 0;
  while (Now() < deadline && waitpid(launcher, &status, WNOHANG) == 0) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      const size_t dot = name.find(".tmp");
      if (name.rfind("step-", 0) != 0 || dot == std::string::npos || std::stoi(name.substr(5, dot - 5)) < 3 ||
          std::find(tried.begin(), tried.end(), name) != tried.end()) {
        continue;
      }
      tried.push_back(name);
      for (int r = 0; r < 2; ++r) kill(ranks[r], SIGSTOP);
      if (fs::is_directory(e.path()) && !fs::exists(dir / name.substr(0, dot))) {
        *step = std::stoi(name.substr(5, dot - 5));
        return true;
      }
      for (int r = 0; r < 2; ++r) kill(ranks[r], SIGCONT);
    }
    poll(nullptr, 0, 1);
  }
  return false;
}

// A preemption mid-checkpoint, with `--max-restarts 1` and a checkpoint after
// every step: both ranks are stopped while a checkpoint is half written, then
// either rank 0 is killed (SIGKILL: the torn step-N.tmp is never used; the
// restart resumes from step N-1's) or rank 1 gets SIGTERM (the checkpoint
// completes, the ranks stop after the next step with another). Either way the
// run ends with the uninterrupted losses bit for bit and no torn checkpoint left.
void ExpectMidCheckpointPreemptionRecovers(int signal_number, const std::string& tag) {
  const std::string job = kQuickstart + " --steps 10 --set train.checkpoint_every=1 --progress-every 0" +
                          " --set cache.nvme_path=" + (Runs() / ("nvme-" + tag)).string();
  const std::vector<StepLoss> want = Uninterrupted(job, "uninterrupted-" + tag);
  ASSERT_EQ(int(want.size()), kSteps);
  const pid_t launcher = StartRestarting(job, tag);
  ASSERT_GT(launcher, 0);
  const fs::path run_dir = Runs() / tag;
  ASSERT_TRUE(WaitFor(run_dir / "logs" / "rank-1.out", launcher)) << ReadText(Runs() / (tag + ".log"));
  pid_t ranks[2] = {-1, -1};
  const double deadline = Now() + 180;
  while ((ranks[0] <= 0 || ranks[1] <= 0) && Now() < deadline) {
    ranks[0] = PidOfRank(run_dir, 0);
    ranks[1] = PidOfRank(run_dir, 1);
    poll(nullptr, 0, 2);
  }
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  int step = -1;
  if (!FreezeMidCheckpoint(run_dir, launcher, ranks, &step)) {
    bool in_time = false;
    WaitExit(launcher, 0, &in_time);
    FAIL() << "no checkpoint was caught mid-write\n" << ReadText(Runs() / (tag + ".log"));
  }
  std::printf("%s: both ranks stopped while the checkpoint of step %d was being written\n", tag.c_str(), step);
  if (signal_number == SIGKILL) {
    kill(ranks[0], SIGKILL);
    kill(ranks[1], SIGCONT);
  } else {
    kill(ranks[1], signal_number);
    for (pid_t p : ranks) kill(p, SIGCONT);
  }
  const nlohmann::json run = ExpectRestartedRunEndsBitwise(launcher, tag, want);
  ASSERT_TRUE(run.contains("attempts"));
  const nlohmann::json& first = run["attempts"][0];
  if (signal_number == SIGKILL) {
    EXPECT_EQ(first["resumed_at_step"], step - 1) << "the previous complete checkpoint: " << first.dump();
  } else {
    EXPECT_GT(first["resumed_at_step"].get<int>(), step) << "the stop's own checkpoint: " << first.dump();
    EXPECT_EQ(first["steps_lost"], 0) << first.dump();
  }
}

TEST(KillResume, WithMaxRestarts1ARankKilledMidCheckpointResumesFromThePreviousOneBitwise) {
  ExpectMidCheckpointPreemptionRecovers(SIGKILL, "mid-checkpoint-kill");
  if (!HasFailure()) fs::remove_all(Runs());
}

TEST(KillResume, WithMaxRestarts1ASigtermMidCheckpointCompletesItAndResumesBitwise) {
  ExpectMidCheckpointPreemptionRecovers(SIGTERM, "mid-checkpoint-term");
  if (!HasFailure()) fs::remove_all(Runs());
}

}  // namespace
