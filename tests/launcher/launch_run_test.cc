// Runs `tencache-launch JOB.yaml` end to end on this machine as a user would:
// the plan with this machine measured, the resolved job driving two worker
// ranks under mpirun, progress, the report with its pictures, and what happens
// when a rank is killed or the launcher is interrupted. Each case waits on
// what the launcher prints (line by line), never on a timer.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "common/job_spec.h"

namespace {

namespace fs = std::filesystem;
using tencache::testing::CommandResult;

const std::string kQuickstart = std::string(TENCACHE_SOURCE_DIR) + "/configs/examples/quickstart.yaml";

std::string Launch() { return std::string(TENCACHE_LAUNCH_BIN); }

// One folder for the whole suite, so that this machine is probed once;
// removed when the suite ends.
fs::path Runs() {
  static const fs::path dir = fs::temp_directory_path() / ("tencache_launch_run_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

class RemoveRuns : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("tencache_launch_run_" + std::to_string(getpid())), ec);
  }
};
const ::testing::Environment* const kRemoveRuns = ::testing::AddGlobalTestEnvironment(new RemoveRuns);

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

nlohmann::json ReadJson(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// A launcher started in the background (arguments split at spaces) whose
// stdout and stderr are read line by line.
class Background {
 public:
  explicit Background(const std::string& args) {
    std::vector<std::string> argv = {Launch()};
    std::istringstream words(args);
    for (std::string w; words >> w;) argv.push_back(w);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      std::vector<char*> cargv;
      for (std::string& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    close(fds[1]);
    out_file_ = fdopen(fds[0], "r");
  }
  ~Background() {
    if (out_file_ != nullptr) Finish();
  }
  pid_t pid() const { return pid_; }
  // Reads lines until one contains `needle`; false at end of output.
  bool WaitFor(const std::string& needle) {
    char buf[4096];
    while (out_file_ != nullptr && std::fgets(buf, sizeof buf, out_file_) != nullptr) {
      out_ += buf;
      if (std::string(buf).find(needle) != std::string::npos) return true;
    }
    return false;
  }
  // Reads to the end; returns the exit code.
  int Finish() {
    WaitFor("\x01never\x01");
    if (out_file_ != nullptr) std::fclose(out_file_);
    out_file_ = nullptr;
    int status = 0;
    waitpid(pid_, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& out() const { return out_; }

 private:
  pid_t pid_ = -1;
  FILE* out_file_ = nullptr;
  std::string out_;
};

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

TEST(LaunchRun, DryRunPrintsTheResolvedJobAndStartsNothing) {
  const fs::path out = Runs() / "dry";
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --dry-run --out " + out.string() + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(fs::exists(out)) << "a dry run wrote " << out;
  const size_t begin = r.out.find("--- " + out.string() + "/job.resolved.yaml ---");
  const size_t end = r.out.find("--- command ---");
  ASSERT_NE(begin, std::string::npos) << r.out;
  ASSERT_NE(end, std::string::npos) << r.out;
  const std::string yaml = r.out.substr(r.out.find('\n', begin) + 1, end - r.out.find('\n', begin) - 1);
  tencache::StatusOr<tencache::JobSpec> job = tencache::ParseJobText(yaml, "printed");
  ASSERT_TRUE(job.ok()) << job.status().message() << "\n" << yaml;
  EXPECT_EQ(job->cluster.nodes, 1);
  EXPECT_EQ(job->cluster.ranks_per_node * job->cluster.nodes, 2);
  EXPECT_TRUE(job->cache.device_budget && job->cache.host_budget && job->cache.nvme_budget);
  EXPECT_NE(yaml.find("# planned:"), std::string::npos) << yaml;
  EXPECT_NE(r.out.find("mpirun"), std::string::npos);
  EXPECT_NE(r.out.find("--tag-output -n 2"), std::string::npos) << r.out;
}

// Data the model cannot train on is refused before anything is probed or
// started, in a dry run too, naming the key and what the model needs.
TEST(LaunchRun, DataBeyondTheVocabularyIsRefusedBeforeTheProbe) {
  const fs::path out = Runs() / "vocab";
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --dry-run --set model.vocab=64 --out " +
                                                  out.string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("key 'model.vocab'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("beyond the vocabulary of 64; expected model.vocab of at least"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Probing"), std::string::npos) << r.out;
  r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --dry-run --set model.seq_len=100000 --set model.max_positions=100000 --out " +
                                    out.string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("fewer than one sequence of 100001"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// An earlier run's folder is never replaced unasked: --out naming it is
// refused before anything is probed or written, and --overwrite replaces its
// results whole (no stale report or metrics line survives).
TEST(LaunchRun, AnEarlierRunFolderIsRefusedUnlessOverwritten) {
  const fs::path out = Runs() / "earlier";
  fs::create_directories(out / "weights");
  std::ofstream(out / "metrics.jsonl") << "{\"step\": 0, \"earlier\": true}\n";
  std::ofstream(out / "report.md") << "# the earlier run's report\n";
  const double t0 = Now();
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --steps 2 --out " + out.string() +
                                                  " --progress-every 0 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_LT(Now() - t0, 10.0);  // refused before the machine is probed
  EXPECT_NE(r.out.find("holds an earlier run (metrics.jsonl, report.md, weights)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(ReadText(out / "report.md"), "# the earlier run's report\n");
  EXPECT_FALSE(fs::exists(out / "plan.json"));
  // A file is no run folder.
  std::ofstream(Runs() / "a-file") << "x";
  r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --out " + (Runs() / "a-file").string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a folder"), std::string::npos) << r.out;
  r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --steps 2 --overwrite --out " + out.string() +
                                    " --progress-every 0 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(ReadText(out / "metrics.jsonl").find("earlier"), std::string::npos);
  EXPECT_EQ(ReadText(out / "report.md").find("the earlier run's report"), std::string::npos);
}

// A missing mpirun is the job's error, named before anything starts (it was
// "a rank failed after 0 step(s)", exit 1).
TEST(LaunchRun, AMissingMpirunIsNamed) {
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --mpirun /nonexistent/mpirun --out " +
                                                  (Runs() / "no-mpirun").string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--mpirun /nonexistent/mpirun: not an executable file"), std::string::npos) << r.out;
  r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --mpirun no-such-mpirun-here --out " +
                                    (Runs() / "no-mpirun").string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no such program on PATH"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(Runs() / "no-mpirun"));
}

// --resume with no complete checkpoint where it looks is refused before
// anything starts, naming the folder it looked in; no run folder is left.
TEST(LaunchRun, ResumeWithoutACheckpointIsRefusedBeforeAnythingStarts) {
  const fs::path none = Runs() / "never-checkpointed", out = Runs() / "resumed-nothing";
  fs::create_directories(none / "checkpoints" / "step-00000003.tmp");  // unfinished: not a checkpoint
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --resume " + none.string() +
                                                  " --out " + out.string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no complete checkpoint (a step-N folder) in " + (none / "checkpoints").string()),
            std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  // --resume alone continues --out's own run: a new folder has none.
  r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --resume --out " + out.string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--resume without a folder continues --out's own run"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(LaunchRun, QuickstartTrainsAndReports) {
  const fs::path out = Runs() / "quickstart";
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --steps 6 --out " + out.string() +
                                                  " --progress-every 0 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step 6/6"), std::string::npos) << r.out;
  // The workers read the resolved job: explicit budgets, no auto.
  tencache::StatusOr<tencache::JobSpec> job = tencache::LoadJobFile((out / "job.resolved.yaml").string());
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(*job->cache.nvme_budget, 0u);  // every shard fits the host budget
  EXPECT_GT(*job->cache.device_budget, 0u);
  const nlohmann::json report = ReadJson(out / "report.json");
  EXPECT_EQ(report["status"], "finished");
  EXPECT_EQ(report["measured"]["steps"], 6);
  EXPECT_GT(report["measured"]["step_time_s"].get<double>(), 0);
  EXPECT_LT(report["measured"]["loss_last"].get<double>(), report["measured"]["loss_first"].get<double>());
  EXPECT_TRUE(report["prediction_error"].is_number());
  EXPECT_EQ(report["measured"]["peak_bytes"]["nvme"].get<double>(), 0.0);
  int priced = 0;
  for (const auto& c : report["cost_per_epoch"]) {
    if (!c["feasible"].get<bool>()) continue;
    ++priced;
    const double expect = 6 * c["step_time_s"].get<double>() / 3600 * c["price_per_hour_usd"].get<double>();
    EXPECT_NEAR(c["job_cost_usd"].get<double>(), expect, 1e-12 + 1e-9 * expect) << c;
    EXPECT_TRUE(c.contains("calibrated")) << c;
  }
  EXPECT_GE(priced, 10);
  EXPECT_TRUE(fs::exists(out / "report.md"));
  {
    // The machine rows come from what the launcher itself wrote in report.json.
    std::ifstream md_in(out / "report.md");
    const std::string md((std::istreambuf_iterator<char>(md_in)), std::istreambuf_iterator<char>());
    EXPECT_NE(md.find("| machine | "), std::string::npos) << md;
    EXPECT_NE(md.find("| device tier | simulated in host memory (no GPU) |"), std::string::npos) << md;
  }
  EXPECT_TRUE(fs::exists(out / "logs" / "rank-0.out") && fs::exists(out / "logs" / "rank-1.out"));
  std::ifstream metrics(out / "metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(metrics, l);) ++lines;
  EXPECT_EQ(lines, 6);
  if (tencache::testing::RunCommand("command -v gnuplot >/dev/null").code == 0) {
    for (const char* png : {"loss_step_time.png", "stall_bytes.png", "cost_per_epoch.png"}) {
      EXPECT_TRUE(fs::exists(out / png)) << png;
    }
  }
  // The weights the run ended with, in transformers' layout, exported in bf16.
  EXPECT_TRUE(fs::exists(out / "weights" / "model.safetensors"));
  CommandResult exported = tencache::testing::RunCommand(Launch() + " export " + out.string() +
                                                         " --format safetensors --dtype bf16 --out " +
                                                         (out / "hf").string() + " 2>&1");
  EXPECT_EQ(exported.code, 0) << exported.out;
  EXPECT_EQ(ReadJson(out / "hf" / "config.json")["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(ReadJson(out / "hf" / "config.json")["torch_dtype"], "bfloat16");
  // bf16 is half the fp32 file's data.
  EXPECT_LT(fs::file_size(out / "hf" / "model.safetensors"), fs::file_size(out / "weights" / "model.safetensors") * 6 / 10);
  // Past --max-shard-size, shards and their index, as save_pretrained writes them.
  CommandResult sharded = tencache::testing::RunCommand(Launch() + " export " + out.string() +
                                                        " --max-shard-size 64KiB --out " + (out / "hf-shards").string() + " 2>&1");
  EXPECT_EQ(sharded.code, 0) << sharded.out;
  const nlohmann::json index = ReadJson(out / "hf-shards" / "model.safetensors.index.json");
  std::set<std::string> shard_files;
  for (const auto& [tensor, file] : index["weight_map"].items()) shard_files.insert(file.get<std::string>());
  EXPECT_GE(shard_files.size(), 2u) << index;
  uint64_t shard_bytes = 0;
  for (const std::string& f : shard_files) shard_bytes += fs::file_size(out / "hf-shards" / f);
  EXPECT_GT(shard_bytes, index["metadata"]["total_size"].get<uint64_t>());  // data and each shard's header
  EXPECT_FALSE(fs::exists(out / "hf-shards" / "model.safetensors"));
  CommandResult bad = tencache::testing::RunCommand(Launch() + " export " + out.string() + " --format onnx --out " +
                                                    (out / "x").string() + " 2>&1");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--format 'onnx': expected safetensors"), std::string::npos) << bad.out;
  // `report DIR` rebuilds the same report from the folder.
  fs::remove(out / "report.json");
  CommandResult again = tencache::testing::RunCommand(Launch() + " report " + out.string() + " 2>&1");
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(ReadJson(out / "report.json")["measured"]["steps"], 6);
}

TEST(LaunchRun, AKilledRankIsNamedAndEveryRankStopsWithin10s) {
  const fs::path out = Runs() / "killed";
  Background run(kQuickstart + " --steps 100000 --out " + out.string() + " --progress-every 0");
  ASSERT_TRUE(run.WaitFor("step 3/")) << run.out();
  const pid_t victim = PidOfRank(out, 1), other = PidOfRank(out, 0);
  ASSERT_GT(victim, 0);
  const double killed_at = Now();
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const int code = run.Finish();
  EXPECT_LT(Now() - killed_at, 10.0);
  EXPECT_NE(code, 0) << run.out();
  EXPECT_NE(run.out().find("rank 1 failed"), std::string::npos) << run.out();
  EXPECT_FALSE(Alive(other)) << "rank 0 outlived the run";
  EXPECT_EQ(ReadJson(out / "run.json")["failed_rank"], 1);
}

TEST(LaunchRun, SigtermStopsEveryRankWithin10s) {
  const fs::path out = Runs() / "interrupted";
  Background run(kQuickstart + " --steps 100000 --out " + out.string() + " --progress-every 0");
  ASSERT_TRUE(run.WaitFor("step 2/")) << run.out();
  const pid_t rank0 = PidOfRank(out, 0), rank1 = PidOfRank(out, 1);
  const double sent_at = Now();
  ASSERT_EQ(kill(run.pid(), SIGTERM), 0);
  const int code = run.Finish();
  EXPECT_LT(Now() - sent_at, 10.0);
  EXPECT_EQ(code, 130) << run.out();
  EXPECT_NE(run.out().find("interrupted"), std::string::npos) << run.out();
  EXPECT_FALSE(Alive(rank0));
  EXPECT_FALSE(Alive(rank1));
  EXPECT_EQ(ReadJson(out / "report.json")["status"], "interrupted");
}

// Ctrl-C, three times: each stop writes whole metrics lines only, a report
// and a checkpoint of the same step, and a run.json that says what the
// launcher exited with.
TEST(LaunchRun, AnInterruptLeavesWholeMetricsAndACheckpointOfTheSameStep) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const fs::path out = Runs() / ("ctrl-c-" + std::to_string(attempt));
    Background run(kQuickstart + " --steps 100000 --out " + out.string() + " --progress-every 0");
    ASSERT_TRUE(run.WaitFor("step " + std::to_string(2 + attempt) + "/")) << run.out();
    ASSERT_EQ(kill(run.pid(), SIGINT), 0);
    const int code = run.Finish();
    EXPECT_EQ(code, 130) << run.out();
    std::ifstream metrics(out / "metrics.jsonl");
    int lines = 0;
    for (std::string line; std::getline(metrics, line); ++lines) {
      EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << "line " << lines + 1 << ": " << line;
    }
    const nlohmann::json r = ReadJson(out / "run.json");
    EXPECT_EQ(r["exit_code"], 130) << r;
    EXPECT_EQ(r["steps_done"], lines) << r;
    EXPECT_EQ(r["checkpoint_step"], lines) << r;
    EXPECT_EQ(ReadJson(out / "report.json")["measured"]["steps"], lines);
    EXPECT_NE(run.out().find("resume from its checkpoint at step " + std::to_string(lines)), std::string::npos)
        << run.out();
    EXPECT_EQ(run.out().find("not readable JSON"), std::string::npos) << run.out();
  }
}

TEST(LaunchRun, BudgetsBeyondThisMachineAreRefusedWithTheNumbers) {
  CommandResult r = tencache::testing::RunCommand(Launch() + " " + kQuickstart + " --set cache.host_budget=200GiB --out " +
                                                  (Runs() / "too-big").string() + " 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cache.host_budget 200 GiB per rank exceeds the"), std::string::npos) << r.out;
}

TEST(LaunchRun, AnNvmeBudgetTooSmallIsAClearErrorNamingTheKey) {
  CommandResult r = tencache::testing::RunCommand(
      Launch() + " " + kQuickstart + " --steps 3 --set cache.device_budget=512KiB --set cache.host_budget=2MiB" +
      " --set cache.nvme_budget=1KiB --out " + (Runs() / "nvme-small").string() + " 2>&1");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cache.nvme_budget"), std::string::npos) << r.out;
}

}  // namespace
