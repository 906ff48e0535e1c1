// RunPipeline: every target's run takes the same steps in the same order
// (plan, resolve, write the run folder, start, follow, report), shown with a
// scripted Runner, and ends with the documented exit code and run.json.
#include "launcher/run_pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "launcher/exit_code.h"
#include "launcher/run_recovery.h"

namespace tencache {
namespace {

namespace fs = std::filesystem;

const char kJob[] =
    "name: pipeline\n"
    "model: {preset: tiny, dtype: fp32}\n"
    "train: {tokens_per_epoch: 100000, micro_batch: auto, global_batch: 8}\n"
    "cluster: {nodes: auto, ranks_per_node: auto, instance_types: [g5.xlarge]}\n";

// A Runner whose every step is scripted and recorded.
class ScriptedRunner : public Runner {
 public:
  explicit ScriptedRunner(std::string out) : out_(std::move(out)) {}

  std::vector<std::string> calls;
  Status plan_status, start_status;
  bool feasible = true;
  std::string job_text = kJob;
  RunOutcome outcome;               // Follow's, once `outcomes` are spent
  std::vector<RunOutcome> outcomes;  // Follow's, in turn; each writes its steps' metrics lines
  std::vector<int64_t> restart_steps;  // PrepareRestart's, in turn
  std::string replanned;               // the first PrepareRestart's RestartPlan::replanned
  Status restart_status;               // PrepareRestart's, when not Ok

  StatusOr<PlannedRun> Plan() override {
    calls.push_back("Plan");
    TC_RETURN_IF_ERROR(plan_status);
    TC_ASSIGN_OR_RETURN(catalog_, Catalog::Load(DefaultCatalogPath()));
    PlannedRun run;
    TC_ASSIGN_OR_RETURN(run.job, ParseJobText(job_text, "job.yaml"));
    TC_ASSIGN_OR_RETURN(run.plan, PlanJob(run.job, catalog_, ModelAssumptions()));
    run.catalog = &catalog_;
    run.chosen = feasible ? run.plan.chosen : -1;
    run.out = out_;
    return run;
  }
  StatusOr<RunFiles> Prepare(const PlannedRun& run, const ResolvedJob& resolved) override {
    calls.push_back("Prepare");
    EXPECT_EQ(resolved.job.name, "pipeline");
    EXPECT_GT(resolved.job.ranks(), 0) << "resolved: nothing auto left";
    return RunFiles{{"job.resolved.yaml", RenderResolvedJob(resolved, {"scripted"})},
                    {"plan.json", PlanToJson(run.plan, false).dump(2) + "\n"}};
  }
  std::string DryRun(const PlannedRun&, const RunFiles& files) override {
    calls.push_back("DryRun");
    return "dry run of " + std::to_string(files.size()) + " files\n";
  }
  Status Start(const PlannedRun& run) override {
    calls.push_back("Start");
    EXPECT_TRUE(fs::exists(fs::path(run.out) / "job.resolved.yaml")) << "the folder is written before the start";
    return start_status;
  }
  StatusOr<RunOutcome> Follow(const PlannedRun& run) override {
    calls.push_back("Follow");
    if (follows_ >= outcomes.size()) return outcome;
    RunOutcome o = outcomes[follows_++];
    if (o.first_step >= 0) o.first_step_s = MonotonicSeconds();  // its first step came as it started
    std::ofstream metrics(fs::path(run.out) / "metrics.jsonl", std::ios::app);
    for (int s = std::max(0, o.first_step); o.first_step >= 0 && s < o.steps_done; ++s) {
      metrics << nlohmann::json{{"step", s}, {"loss", 10.0 - s}, {"step_time_s", 0.25}}.dump() << "\n";
    }
    return o;
  }
  StatusOr<RestartPlan> PrepareRestart(PlannedRun*, ResolvedJob*, const RunOutcome&) override {
    calls.push_back("PrepareRestart");
    TC_RETURN_IF_ERROR(restart_status);
    RestartPlan next;
    next.replanned = restarts_ == 0 ? replanned : "";
    next.step = restarts_ < restart_steps.size() ? restart_steps[restarts_++] : int64_t(0);
    return next;
  }
  Candidate Predicted(const PlannedRun& run, const ResolvedJob&) override {
    calls.push_back("Predicted");
    return run.candidate();
  }
  void RunFields(const PlannedRun&, const RunOutcome&, nlohmann::ordered_json* run_json) override {
    calls.push_back("RunFields");
    (*run_json)["scripted"] = true;
  }
  void ExplainEnd(const PlannedRun&, const RunOutcome&) override { calls.push_back("ExplainEnd"); }

 private:
  std::string out_;
  Catalog catalog_;
  size_t follows_ = 0, restarts_ = 0;
};

class RunPipelineTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) / ("run_pipeline_" + std::to_string(getpid()) + "_" +
                                          testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Out() const { return (dir_ / "run").string(); }
  nlohmann::json RunJson() const {
    std::ifstream in(dir_ / "run" / "run.json");
    return nlohmann::json::parse(in, nullptr, false);
  }
  // Runs the pipeline with stdout and stderr captured; *err gets stderr.
  int Run(ScriptedRunner& r, bool dry_run, std::string* err = nullptr) {
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const int code = RunPipeline(r, "job.yaml", dry_run);
    out_ = testing::internal::GetCapturedStdout();
    const std::string e = testing::internal::GetCapturedStderr();
    if (err != nullptr) *err = e;
    return code;
  }
  fs::path dir_;
  std::string out_;
};

const std::vector<std::string> kWholeRun = {"Plan", "Prepare", "Start", "Follow", "RunFields", "ExplainEnd"};

TEST_F(RunPipelineTest, AFinishedRunTakesEveryStepInOrderAndWritesTheFolder) {
  ScriptedRunner r(Out());
  EXPECT_EQ(Run(r, false), kExitOk);
  EXPECT_EQ(r.calls, kWholeRun);
  EXPECT_NE(out_.find("g5.xlarge"), std::string::npos) << "the plan table is printed:\n" << out_;
  EXPECT_TRUE(fs::exists(dir_ / "run" / "plan.json"));
  const nlohmann::json run = RunJson();
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["status"], "finished");
  EXPECT_EQ(run["exit_code"], 0);
  EXPECT_EQ(run["target"], "local");
  EXPECT_EQ(run["steps_done"], 0);
  EXPECT_EQ(run["scripted"], true) << "the runner's own fields";
  for (const char* key : {"failed_rank", "failure", "failed_host", "last_stderr", "stop_seconds", "stop_forced",
                          "rank_hosts"}) {
    EXPECT_TRUE(run.contains(key)) << key;
  }
}

TEST_F(RunPipelineTest, AFailedRunExits1AndAnInterruptedOne130) {
  ScriptedRunner failed(Out());
  failed.outcome.exit_code = 9;
  failed.outcome.failed_rank = 1;
  failed.outcome.failure = "killed";
  EXPECT_EQ(Run(failed, false), kExitFailed);
  EXPECT_EQ(failed.calls, kWholeRun);
  EXPECT_EQ(RunJson()["status"], "failed");
  EXPECT_EQ(RunJson()["exit_code"], 1);
  EXPECT_EQ(RunJson()["failed_rank"], 1);
  EXPECT_EQ(RunJson()["failure"], "killed");

  ScriptedRunner stopped(Out());
  stopped.outcome.exit_code = 130;
  stopped.outcome.interrupted = true;
  EXPECT_EQ(Run(stopped, false), kExitInterrupted);
  EXPECT_EQ(RunJson()["status"], "interrupted");
  EXPECT_EQ(RunJson()["exit_code"], 130);
}

const char kRestartingJob[] =
    "name: pipeline\n"
    "model: {preset: tiny, dtype: fp32}\n"
    "train: {tokens_per_epoch: 100000, micro_batch: auto, global_batch: 8}\n"
    "cluster: {nodes: auto, ranks_per_node: auto, instance_types: [g5.xlarge], max_restarts: 2,\n"
    "          restart_backoff_s: 0}\n";

RunOutcome Failed(int rank, const std::string& why, int first_step, int steps_done) {
  RunOutcome o;
  o.exit_code = 1;
  o.failed_rank = rank;
  o.failure = why;
  o.first_step = first_step;
  o.steps_done = steps_done;
  return o;
}

// The steps of the folder's metrics.jsonl, in order.
std::vector<int> MetricsSteps(const fs::path& run) {
  std::vector<int> steps;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) steps.push_back(nlohmann::json::parse(line)["step"].get<int>());
  return steps;
}

TEST_F(RunPipelineTest, AFailedRunIsRestartedFromItsCheckpointUpToMaxRestartsAndEveryAttemptIsRecorded) {
  ScriptedRunner r(Out());
  r.job_text = kRestartingJob;
  // Attempt 1 dies in step 5 with the checkpoint of step 3 the newest; attempt
  // 2 resumes at 3 and dies in step 8 (checkpoint 6); attempt 3 finishes.
  RunOutcome finished;
  finished.first_step = 6;
  finished.steps_done = 10;
  r.outcomes = {Failed(1, "process rank 1 with PID 4242 exited on signal 9 (Killed)", 0, 5),
                Failed(0, "the node was lost", 3, 8), finished};
  r.restart_steps = {3, 6};
  std::string err;
  EXPECT_EQ(Run(r, false, &err), kExitOk) << err;
  EXPECT_EQ(r.calls, (std::vector<std::string>{"Plan", "Prepare", "Start", "Follow", "ExplainEnd", "PrepareRestart",
                                               "Start", "Follow", "ExplainEnd", "PrepareRestart", "Start", "Follow",
                                               "RunFields", "Predicted", "ExplainEnd"}));
  EXPECT_NE(err.find("restart 1 of 2 in 0 s, from the checkpoint at step 3\ntencache-launch: restarting: 2 step(s) "
                     "lost (run again); the failed attempt's logs are in " + Out() + "/logs.attempt-1"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("restart 2 of 2 in 0 s, from the checkpoint at step 6\ntencache-launch: restarting: 2 step(s) "
                     "lost"),
            std::string::npos)
      << err;
  // The steps lost were taken out: each step once, in order.
  EXPECT_EQ(MetricsSteps(dir_ / "run"), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const nlohmann::json run = RunJson();
  EXPECT_EQ(run["status"], "finished");
  EXPECT_EQ(run["restarts"], 2);
  ASSERT_EQ(run["attempts"].size(), 3u) << run.dump(2);
  const nlohmann::json& a1 = run["attempts"][0];
  EXPECT_EQ(a1["status"], "failed");
  EXPECT_EQ(a1["failed_rank"], 1);
  EXPECT_EQ(a1["cause"], "rank 1: process rank 1 with PID 4242 exited on signal 9 (Killed)");
  EXPECT_EQ(a1["first_step"], 0);
  EXPECT_EQ(a1["steps_done"], 5);
  EXPECT_EQ(a1["resumed_at_step"], 3);
  EXPECT_EQ(a1["steps_lost"], 2);
  EXPECT_DOUBLE_EQ(a1["lost_step_seconds"].get<double>(), 0.5);
  EXPECT_TRUE(a1["recover_seconds"].is_number());
  EXPECT_TRUE(a1["recovery_cost_usd"].get<double>() > 0) << "g5.xlarge has a price: " << a1.dump();
  EXPECT_EQ(run["attempts"][1]["resumed_at_step"], 6);
  EXPECT_EQ(run["attempts"][2]["status"], "finished");
  EXPECT_FALSE(run["attempts"][2].contains("resumed_at_step")) << "not restarted";
  EXPECT_TRUE(fs::is_directory(dir_ / "run" / "logs.attempt-1") || !fs::exists(dir_ / "run" / "logs"));
}

TEST_F(RunPipelineTest, ARunThatFailsTheSameWayTwiceIsNotRestartedAgain) {
  ScriptedRunner r(Out());
  r.job_text = kRestartingJob;
  // The same rank, the same words (but another PID), at the same step.
  r.outcomes = {Failed(0, "process rank 0 with PID 11 exited on signal 6 (Aborted)", 0, 4),
                Failed(0, "process rank 0 with PID 97 exited on signal 6 (Aborted)", 3, 4),
                Failed(0, "never reached", 3, 9)};
  r.restart_steps = {3, 3};
  std::string err;
  EXPECT_EQ(Run(r, false, &err), kExitFailed);
  EXPECT_EQ(std::count(r.calls.begin(), r.calls.end(), "Follow"), 2) << err;
  EXPECT_NE(err.find("attempt 2 failed the same way as attempt 1 (rank 0: process rank 0 with PID 97 exited on "
                     "signal 6 (Aborted), after 4 step(s)): not restarting again"),
            std::string::npos)
      << err;
  EXPECT_EQ(RunJson()["restarts"], 1);
  EXPECT_EQ(RunJson()["attempts"].size(), 2u);
  EXPECT_EQ(RunJson()["status"], "failed");
}

// A restart that planned the job again (a host left out) is said and recorded;
// one that cannot be made (FailedPrecondition: nothing left to run on) ends the
// run with the failed attempt's cause, run.json and the report written.
TEST_F(RunPipelineTest, ARestartPlannedAgainIsRecordedAndOneThatCannotBeMadeEndsTheRun) {
  {
    ScriptedRunner r(Out());
    r.job_text = kRestartingJob;
    RunOutcome finished;
    finished.first_step = 3;
    finished.steps_done = 10;
    r.outcomes = {Failed(1, "the node was lost", 0, 5), finished};
    r.restart_steps = {3};
    r.replanned = "without 192.0.2.3 (no longer answers): 2 host(s), 2 rank(s)";
    std::string err;
    EXPECT_EQ(Run(r, false, &err), kExitOk) << err;
    EXPECT_NE(err.find("tencache-launch: planned again without 192.0.2.3 (no longer answers): 2 host(s), 2 rank(s)\n"),
              std::string::npos)
        << err;
    EXPECT_EQ(RunJson()["attempts"][0]["replanned"], r.replanned);
    EXPECT_FALSE(RunJson()["attempts"][1].contains("replanned"));
  }
  fs::remove_all(dir_);
  ScriptedRunner r(Out());
  r.job_text = kRestartingJob;
  r.outcomes = {Failed(1, "the node was lost", 0, 5)};
  r.restart_status = Status::FailedPrecondition("no host of cluster.hosts answers");
  std::string err;
  EXPECT_EQ(Run(r, false, &err), kExitFailed);
  EXPECT_NE(err.find("tencache-launch: not restarting: no host of cluster.hosts answers"), std::string::npos) << err;
  EXPECT_EQ(std::count(r.calls.begin(), r.calls.end(), "Follow"), 1);
  EXPECT_EQ(RunJson()["status"], "failed");
  EXPECT_EQ(RunJson()["attempts"].size(), 1u);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "report.json")) << err;
}

TEST_F(RunPipelineTest, WithoutMaxRestartsAFailedRunIsNotRestarted) {
  ScriptedRunner r(Out());
  r.outcomes = {Failed(1, "killed", 0, 5)};
  EXPECT_EQ(Run(r, false), kExitFailed);
  EXPECT_EQ(std::count(r.calls.begin(), r.calls.end(), "PrepareRestart"), 0);
  EXPECT_EQ(RunJson()["restarts"], 0);
  EXPECT_EQ(RunJson()["attempts"].size(), 1u);
}

TEST_F(RunPipelineTest, ADryRunPlansAndPreparesAndWritesNothing) {
  ScriptedRunner r(Out());
  EXPECT_EQ(Run(r, true), kExitOk);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"Plan", "Prepare", "DryRun"}));
  EXPECT_NE(out_.find("dry run of 2 files"), std::string::npos) << out_;
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST_F(RunPipelineTest, APlanThatFailsEndsWithTheStatusExitCodeAndNothingElse) {
  const std::vector<std::pair<Status, int>> cases = {{Status::InvalidArgument("job.yaml: key 'x'"), kExitBadInput},
                                                     {Status::NotFound("--resume r: no such run folder"), kExitBadInput},
                                                     {Status::Unavailable("cannot reach host 'b'"), kExitFailed}};
  for (const auto& [status, code] : cases) {
    ScriptedRunner r(Out());
    r.plan_status = status;
    std::string err;
    EXPECT_EQ(Run(r, false, &err), code) << status.ToString();
    EXPECT_EQ(err, "tencache-launch: " + status.message() + "\n");
    EXPECT_EQ(r.calls, std::vector<std::string>{"Plan"});
    EXPECT_FALSE(fs::exists(dir_ / "run"));
  }
}

TEST_F(RunPipelineTest, NoFeasibleInstanceTypeExits3BeforeAnythingIsWritten) {
  ScriptedRunner r(Out());
  r.feasible = false;
  std::string err;
  EXPECT_EQ(Run(r, false, &err), kExitNoFeasiblePlan);
  EXPECT_NE(err.find("no feasible plan for job.yaml"), std::string::npos) << err;
  EXPECT_EQ(r.calls, std::vector<std::string>{"Plan"});
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

TEST_F(RunPipelineTest, AStartThatFailsIsNotFollowed) {
  ScriptedRunner r(Out());
  r.start_status = Status::Unavailable("kubectl apply: the cluster cannot be reached");
  std::string err;
  EXPECT_EQ(Run(r, false, &err), kExitFailed);
  EXPECT_EQ(r.calls, (std::vector<std::string>{"Plan", "Prepare", "Start"}));
  EXPECT_NE(err.find("cannot be reached"), std::string::npos) << err;
}

TEST_F(RunPipelineTest, ARunFolderThatCannotBeWrittenIsNamed) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "run") << "a file where the folder should be\n";
  ScriptedRunner r(Out());
  std::string err;
  EXPECT_EQ(Run(r, false, &err), kExitFailed);
  EXPECT_NE(err.find(Out()), std::string::npos) << err;
  EXPECT_EQ(r.calls, (std::vector<std::string>{"Plan", "Prepare"}));
}

// report.json's spot section: the plan's expected preemptions over the run's
// hours against its attempts; only for a run on spot nodes with a known estimate.
TEST(SpotAgainstAttempts, ComparesTheExpectedPreemptionsWithTheAttempts) {
  SpotEstimate e;
  e.known = true;
  e.mtbp_s = 7200;             // one preemption every 2 h for the job
  e.preemptions = 2;           // an epoch's
  e.lost_hours = 0.05;         // 90 s each
  e.restart_hours = 0.15;      // 270 s each
  e.price_per_node_hour = 1.5;
  e.rate_source = "AWS Spot Advisor <5%";
  const nlohmann::ordered_json attempts = nlohmann::ordered_json::parse(R"([
      {"attempt": 1, "seconds": 2700, "status": "failed", "resumed_at_step": 40, "steps_lost": 3,
       "lost_step_seconds": 30, "recover_seconds": 90, "recovery_cost_usd": 0.1},
      {"attempt": 2, "seconds": 900, "status": "finished"}])");
  const nlohmann::ordered_json j = SpotAgainstAttempts(e, /*on_spot=*/true, /*nodes=*/2, attempts);
  ASSERT_TRUE(j.is_object());
  EXPECT_DOUBLE_EQ(j.at("run_hours").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j.at("expected_preemptions").get<double>(), 0.5);
  EXPECT_EQ(j.at("failed_attempts"), 1);
  EXPECT_EQ(j.at("restarts"), 1);
  EXPECT_DOUBLE_EQ(j.at("expected_seconds_per_preemption").get<double>(), 360);
  EXPECT_DOUBLE_EQ(j.at("measured_seconds_per_restart").get<double>(), 120);
  EXPECT_DOUBLE_EQ(j.at("expected_cost_usd").get<double>(), 0.5 * 360 / 3600 * 3.0);  // 2 nodes at $1.50
  EXPECT_DOUBLE_EQ(j.at("measured_cost_usd").get<double>(), 0.1);
  EXPECT_EQ(j.at("rate_source"), "AWS Spot Advisor <5%");

  // Nothing restarted: nothing measured per restart.
  const nlohmann::ordered_json quiet = SpotAgainstAttempts(
      e, true, 2, nlohmann::ordered_json::parse(R"([{"attempt": 1, "seconds": 3600, "status": "finished"}])"));
  EXPECT_EQ(quiet.at("restarts"), 0);
  EXPECT_TRUE(quiet.at("measured_seconds_per_restart").is_null());
  EXPECT_TRUE(quiet.at("measured_cost_usd").is_null());
  EXPECT_DOUBLE_EQ(quiet.at("expected_preemptions").get<double>(), 0.5);

  // Not on spot, no estimate, or no attempts recorded: no section.
  EXPECT_TRUE(SpotAgainstAttempts(e, false, 2, attempts).is_null());
  SpotEstimate unknown = e;
  unknown.known = false;
  EXPECT_TRUE(SpotAgainstAttempts(unknown, true, 2, attempts).is_null());
  EXPECT_TRUE(SpotAgainstAttempts(e, true, 2, nullptr).is_null());
}

TEST(RunFolder, WritesWholeFilesAndNamesTheOneItCannotWrite) {
  const fs::path dir = fs::path(testing::TempDir()) / ("run_folder_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const RunFolder folder((dir / "a" / "b").string());
  ASSERT_TRUE(folder.Create().ok());
  ASSERT_TRUE(folder.Write("run.json", "{}\n").ok());
  std::ifstream in(folder.Path("run.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{}\n");
  const Status s = folder.Write("no-such-folder/x.json", "{}");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find(folder.Path("no-such-folder/x.json")), std::string::npos) << s.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tencache
