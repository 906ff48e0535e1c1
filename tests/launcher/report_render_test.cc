// RenderReport on fixture run folders: report.md's tables and human-formatted
// numbers, the summary, the pictures (when gnuplot is installed), partial and
// empty metrics, missing gnuplot, a failing gnuplot, and bad report.json files.
#include "launcher/report_render.h"
#include "launcher/report_json.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tencache {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json CostRow(const std::string& type, const std::string& cloud, bool feasible, double model, double calibrated,
             const std::string& reason = "") {
  json c = {{"instance_type", type}, {"provider", cloud},        {"nodes", 1},      {"feasible", feasible},
            {"reason", reason},      {"candidate", true},        {"price_per_hour_usd", 1.006}};
  if (feasible) {
    c["epoch_hours"] = 1.2;
    c["cost_per_epoch_usd"] = model;
    c["job_cost_usd"] = model / 100;
    c["calibrated"] = {{"step_time_s", 0.01}, {"epoch_hours", 1.3}, {"cost_per_epoch_usd", calibrated},
                       {"job_cost_usd", calibrated / 100}};
  }
  return c;
}

json FixtureReport() {
  json costs = json::array({
      CostRow("p4d.24xlarge", "aws", false, 0, 0, "needs 1.10 TiB NVMe per node, has 0"),
      CostRow("g5.xlarge", "aws", true, 1.21, 1.31),
      CostRow("a2-highgpu-1g", "gcp", true, 2571.6, 2400.0),
      CostRow("g4dn.xlarge", "aws", true, 0.0041, 0.0052),
      CostRow("Standard_NC4as_T4_v3", "azure", true, 316.98, 350.0),
      CostRow("g5.2xlarge", "aws", true, 3.0, 3.5),
      CostRow("p3.2xlarge", "aws", true, 5000, 6000),
      CostRow("g6.xlarge", "aws", false, 0, 0, "train.global_batch 4 is not a multiple of 8 ranks"),
  });
  costs[2]["candidate"] = false;
  costs[2]["nodes"] = 2;
  return {{"job", "quickstart"},
          {"status", "finished"},
          {"target", "local"},
          {"machine", {{"facts", {{"hostname", "box"}, {"cores", 2}, {"ram_bytes", 25000000000.0}, {"gpus", 0},
                                  {"gpu_name", ""}, {"read_at", 1700007200}, {"load1", 0.4}}},
                       {"probes", {{"cached", true},
                                   {"conditions", {{"at", 1700000000}, {"load1", 2.4}, {"cores", 2},
                                                   {"cpu_model", "x"}, {"build", "b"}}}}}}},
          {"run", {{"instance_type", "local"}, {"nodes", 1}, {"ranks", 2}, {"steps", 200}, {"dtype", "bf16"},
                   {"policy", "tencache"}, {"budgets", {{"device", 1048576}, {"host", 6291456}, {"nvme", 0}}}}},
          {"measured", {{"steps", 200}, {"warmup_steps", 2}, {"step_time_s", 0.08}, {"tokens_per_s", 12000}, {"stall_s", 0.001},
                        {"device_hit_rate", 0.953}, {"bytes_h2d", 3 * 1048576}, {"bytes_d2h", 1048576},
                        {"bytes_nvme_read", 0}, {"bytes_nvme_write", 0},
                        {"peak_bytes", {{"device", 1000000}, {"host", 6000000}, {"nvme", 0}}},
                        {"loss_first", 5.5}, {"loss_last", 2.5},
                        {"lane_busy_s", {{"compute", 0.06}, {"h2d", 0.01}, {"d2h", 0.004}, {"nvme_read", 0},
                                         {"nvme_write", 0}, {"collectives", 0.02}, {"optimizer", 0.012}}},
                        {"bound_lane", "compute"}, {"overlap_efficiency", 0.75}, {"optimizer_wait_s", 0.006}}},
          {"predicted", {{"step_time_s", 0.085}, {"tokens_per_s", 11500}, {"optimizer_exposed_s", 0.004},
                         {"optimizer_hidden_s", 0.008},
                         {"calibrated", {{"step_time_s", 0.079}, {"tokens_per_s", 12150}, {"factor", 0.93},
                                         {"steps", {2, 4}}}},
                         {"bytes_per_rank", {{"h2d", 1500000}, {"d2h", 0}, {"nvme_read", 0}, {"nvme_write", 0}}}}},
          {"prediction_error", 0.0625},
          {"prediction_error_calibrated", -0.0125},
          {"cost_per_epoch", costs},
          {"calibration", {{"carried", {"bytes moved per tier per step: measured on this run"}},
                           {"assumed", {"compute speed: the GPU table's bf16 peak at 40 % utilisation"}}}},
          {"assumptions", {"price: AWS on-demand, recorded 2024-05; refresh before trusting"}}};
}

// One metrics line per step: loss falling from 5.5, step time near 80 ms.
std::string MetricsLines(int steps) {
  std::ostringstream out;
  for (int s = 0; s < steps; ++s) {
    json line = {{"step", s},
                 {"loss", 2.5 + 3.0 * std::exp(-s / 40.0)},
                 {"step_time_s", 0.08 + 0.01 * ((s * 7) % 5) / 5.0},
                 {"tokens_per_s", 12000},
                 {"stall_s", s < 2 ? 0.02 : 0.001},
                 {"bytes_h2d", 3 * 1048576 + (s % 3) * 262144},
                 {"bytes_d2h", 1048576},
                 {"bytes_nvme_read", s % 10 == 0 ? 524288 : 0},
                 {"bytes_nvme_write", 0},
                 {"lane_busy_s", {{"compute", 0.06}, {"h2d", 0.01}, {"d2h", 0.004}, {"nvme_read", 0},
                                  {"nvme_write", 0}, {"collectives", 0.02}, {"optimizer", 0.012}}},
                 {"overlap_efficiency", 0.75}};
    out << line.dump() << "\n";
  }
  return out.str();
}

bool GnuplotOnPath() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (::access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

bool IsPng(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char sig[8] = {};
  in.read(sig, sizeof sig);
  return in && std::string(sig, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

std::string Slurp(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class RenderReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tencache_report_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const char* path = std::getenv("PATH");
    saved_path_ = path == nullptr ? "" : path;
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  void WriteFixture(const std::string& metrics) {
    Write("report.json", FixtureReport().dump(2));
    Write("metrics.jsonl", metrics);
  }
  Status Render() {
    summary_.clear();
    warnings_.clear();
    return RenderReport(dir_.string(), &summary_, &warnings_);
  }
  std::string Md() { return Slurp(dir_ / "report.md"); }
  bool Warned(const std::string& needle) {
    for (const std::string& w : warnings_) {
      if (w.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  // A directory holding only an executable `gnuplot` with this shell body.
  void FakeGnuplot(const std::string& body) {
    fs::create_directories(dir_ / "bin");
    const fs::path exe = dir_ / "bin" / "gnuplot";
    std::ofstream(exe) << "#!/bin/sh\n" << body << "\n";
    ::chmod(exe.c_str(), 0755);
    ::setenv("PATH", (dir_ / "bin").c_str(), 1);
  }

  fs::path dir_;
  std::string saved_path_, summary_;
  std::vector<std::string> warnings_;
};

#define EXPECT_HAS(text, needle) \
  EXPECT_NE((text).find(needle), std::string::npos) << "'" << (needle) << "' not in:\n" << (text)

TEST_F(RenderReportTest, ReportHasEveryTableWithHumanNumbers) {
  WriteFixture(MetricsLines(200));
  ASSERT_TRUE(Render().ok());
  const std::string md = Md();
  EXPECT_HAS(md, "# Run report: quickstart (finished)");
  EXPECT_HAS(md, "| target | local |");
  EXPECT_HAS(md, "| machine | box, 2 cores, 23.3 GiB RAM, 0 GPUs |");
  EXPECT_HAS(md, "| device tier | simulated in host memory (no GPU) |");
  EXPECT_HAS(md, "| ranks | 2 |");
  EXPECT_HAS(md, "| device budget | 1.00 MiB |");
  EXPECT_HAS(md, "| loss | 5.50 -> 2.50 |");
  EXPECT_HAS(md, "| step time | 80 ms | 85 ms | +6.2 % |");
  EXPECT_HAS(md, "| tokens/s | 12.0K tok/s | 11.5K tok/s | -4.2 % |");
  EXPECT_HAS(md, "| stall per step | 1.0 ms | - | - |");
  EXPECT_HAS(md, "| device | 1.00 MiB | 977 KiB | 95.3 % |");
  // Predicted: 1.5 MB per rank x 2 ranks; 649.75 MiB over the 200 logged steps.
  EXPECT_HAS(md, "| h2d (simulated device) | 3.00 MiB | 2.86 MiB | -4.6 % | 650 MiB |");
  EXPECT_HAS(md, "| d2h (simulated device) | 1.00 MiB | 0 B | -100.0 % | 200 MiB |");
  EXPECT_HAS(md, "The device tier is simulated in host memory (no GPU): host->device is a memcpy into it, and the "
                 "worker computes on the CPU, so its reduce-scatters write every gradient straight into host memory "
                 "and nothing moves device->host (none is predicted).");
  // The probe's age and load, then and now; this machine's prediction calibrated on the run.
  EXPECT_HAS(md, "| probe | probe taken 2 h 0 min before this launch (2023-11-14 22:13 UTC) at load 2.40 on 2 cores; "
                 "load now 0.40");
  EXPECT_HAS(md, "; reused from the probe cache |");
  EXPECT_HAS(md, "| step time, calibrated | 80 ms | 79 ms | -1.2 % |");
  EXPECT_HAS(md, "Calibrated: the prediction with every speed divided by 0.93");
  EXPECT_HAS(summary_, "step time, calibrated");
  EXPECT_HAS(md, "| NVMe write | 0 B | 0 B | - | 0 B |");
  EXPECT_HAS(md, "| steps | 200 measured of 200 planned; 200 steps in metrics.jsonl; measured values are medians "
                 "after 2 warm-up steps |");
  EXPECT_HAS(md, "| g5.xlarge | aws | 1 | 1 h 18 min | $1.21 | $1.31 | $0.01 |");
  EXPECT_HAS(md, "| a2-highgpu-1g † | gcp | 2 | 1 h 18 min | $2,572 | $2,400 | $24.00 |");
  EXPECT_HAS(md, "| g4dn.xlarge | aws | 1 | 1 h 18 min | $0.0041 | $0.0052 | $0.000052 |");
  EXPECT_HAS(md, "| Standard_NC4as_T4_v3 | azure | 1 | 1 h 18 min | $316.98 | $350.00 | $3.50 |");
  EXPECT_HAS(md, "- p4d.24xlarge (aws): needs 1.10 TiB NVMe per node, has 0");
  EXPECT_HAS(md, "- g6.xlarge (aws): train.global_batch 4 is not a multiple of 8 ranks");
  EXPECT_HAS(md, "- bytes moved per tier per step: measured on this run");
  EXPECT_HAS(md, "- compute speed: the GPU table's bf16 peak at 40 % utilisation");
  EXPECT_HAS(md, "metrics.jsonl: 200 steps read.");
  EXPECT_HAS(md, "## Lanes\n\nOverlap efficiency 0.75, bound by compute:");
  EXPECT_HAS(md, "| compute | 60 ms | 75.0 % |");
  EXPECT_HAS(md, "| collectives | 20 ms | 25.0 % |");
  EXPECT_HAS(md, "| nvme_write | 0 s | 0.0 % |");
  EXPECT_HAS(md, "Optimizer: the training thread spent 6.0 ms a step in the updates (7.5 % of the step), issuing them "
                 "to the optimizer lane and waiting for them, or running them itself; predicted 4.0 ms on the step, "
                 "8.0 ms hidden by the optimizer lane.");
  // Feasible rows by calibrated cost, then the infeasible list.
  const size_t cheapest = md.find("| g4dn.xlarge"), next = md.find("| g5.xlarge"), dear = md.find("| p3.2xlarge");
  EXPECT_LT(cheapest, next);
  EXPECT_LT(next, dear);
  EXPECT_LT(dear, md.find("Infeasible:"));
  // The summary: measured vs predicted and the five cheapest, model-only next to calibrated.
  EXPECT_HAS(summary_, "run quickstart (finished): 200 steps on local, 2 ranks, bf16");
  EXPECT_HAS(summary_, "+6.2 %");
  EXPECT_HAS(summary_, "95.3 %");
  EXPECT_HAS(summary_, "NVMe write per step");
  EXPECT_HAS(summary_, "overlap efficiency 0.75 (busiest lane: compute)");
  const size_t row = summary_.find("\ng4dn.xlarge ");
  ASSERT_NE(row, std::string::npos) << summary_;
  const std::string line = summary_.substr(row + 1, summary_.find('\n', row + 1) - row - 1);
  EXPECT_LT(line.find(" aws "), line.find("$0.0052")) << line;
  EXPECT_LT(line.find("$0.0052"), line.find("$0.0041")) << line;  // calibrated, then model-only
  EXPECT_HAS(summary_, "a2-highgpu-1g");
  EXPECT_EQ(summary_.find("p3.2xlarge"), std::string::npos) << "only the five cheapest:\n" << summary_;
  EXPECT_EQ(summary_.find("p4d.24xlarge"), std::string::npos) << summary_;
}

// A run on spot nodes: the plan's expected preemptions against the measured ones.
TEST_F(RenderReportTest, ASpotRunComparesExpectedAndMeasuredPreemptions) {
  json report = FixtureReport();
  report["spot"] = {{"rate_source", "AWS Spot Advisor <5%"}, {"rate_assumed", false}, {"mtbp_hours", 2.0},
                    {"run_hours", 1.0}, {"expected_preemptions", 0.5}, {"failed_attempts", 1}, {"restarts", 1},
                    {"expected_seconds_per_preemption", 360.0}, {"measured_seconds_per_restart", 120.0},
                    {"expected_cost_usd", 0.45}, {"measured_cost_usd", 0.1}};
  Write("report.json", report.dump(2));
  Write("metrics.jsonl", MetricsLines(20));
  ASSERT_TRUE(Render().ok());
  const std::string md = Md();
  EXPECT_HAS(md, "## Spot");
  EXPECT_HAS(md, "| preemptions in the run's 1 h 0 min | 0.5 (one every 2 h 0 min) | 1 restart (1 failed attempt) |");
  EXPECT_HAS(md, "| time each (work lost + recovery) | 6 min 0 s | 2 min 0 s |");
  EXPECT_HAS(md, "interruption rate of AWS Spot Advisor <5%.");
  // Read back as written; without the section there is no Spot table.
  StatusOr<RunReport> back = RunReport::Read((dir_ / "report.json").string());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(json::parse(back->ToJson().at("spot").dump()), report["spot"]);
  WriteFixture(MetricsLines(20));
  ASSERT_TRUE(Render().ok());
  EXPECT_EQ(Md().find("## Spot"), std::string::npos);
  report["spot"] = "often";
  Write("report.json", report.dump(2));
  EXPECT_FALSE(Render().ok());
}

TEST_F(RenderReportTest, DrawsEveryPictureWithGnuplot) {
  if (!GnuplotOnPath()) GTEST_SKIP() << "gnuplot is not on PATH (Debian: apt-get install gnuplot-nox)";
  WriteFixture(MetricsLines(200));
  Status s = Render();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = Md();
  for (const char* name : {"loss_step_time", "stall_bytes", "lanes", "cost_per_epoch"}) {
    EXPECT_TRUE(IsPng(dir_ / (std::string(name) + ".png"))) << name;
    EXPECT_TRUE(fs::exists(dir_ / "plots" / (std::string(name) + ".gp"))) << name;
    EXPECT_TRUE(fs::exists(dir_ / "plots" / (std::string(name) + ".dat"))) << name;
    EXPECT_HAS(md, "](" + std::string(name) + ".png)");
  }
  // Costs span more than 100x: log scale.
  EXPECT_HAS(Slurp(dir_ / "plots" / "cost_per_epoch.gp"), "set logscale y");
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

TEST_F(RenderReportTest, TruncatedLastMetricsLineIsSkippedAndSaid) {
  std::string metrics = MetricsLines(150);
  metrics += "{\"step\": 150, \"loss\": 2.7, \"step_ti";  // interrupted mid-write
  WriteFixture(metrics);
  const Status s = Render();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = Md();
  EXPECT_HAS(md, "metrics.jsonl: 150 steps read; 1 line skipped:");
  EXPECT_HAS(md, "- line 151 (not valid JSON; truncated?)");
  EXPECT_TRUE(Warned("skipped 1 line")) << ::testing::PrintToString(warnings_);
  if (GnuplotOnPath()) {
    EXPECT_EQ(Slurp(dir_ / "plots" / "loss_step_time.dat").find("\n150 "), std::string::npos);
    EXPECT_TRUE(IsPng(dir_ / "loss_step_time.png"));
  }
}

TEST_F(RenderReportTest, EmptyMetricsStillRendersWithoutStepPictures) {
  WriteFixture("");
  const Status s = Render();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = Md();
  EXPECT_HAS(md, "No steps in metrics.jsonl, so no pictures of steps.");
  EXPECT_HAS(md, "metrics.jsonl: 0 steps read.");
  EXPECT_HAS(md, "| step time | 80 ms | 85 ms | +6.2 % |");
  EXPECT_FALSE(fs::exists(dir_ / "loss_step_time.png"));
  EXPECT_FALSE(fs::exists(dir_ / "stall_bytes.png"));
  EXPECT_TRUE(Warned("no steps"));
  if (GnuplotOnPath()) {
    EXPECT_TRUE(IsPng(dir_ / "cost_per_epoch.png"));
  }
}

TEST_F(RenderReportTest, MissingMetricsFileIsSaid) {
  Write("report.json", FixtureReport().dump());
  ASSERT_TRUE(Render().ok());
  EXPECT_HAS(Md(), "metrics.jsonl was not found");
}

TEST_F(RenderReportTest, WithoutGnuplotReportSaysWhatToInstall) {
  WriteFixture(MetricsLines(20));
  fs::create_directories(dir_ / "empty");
  ::setenv("PATH", (dir_ / "empty").c_str(), 1);
  const Status s = Render();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_HAS(Md(), "gnuplot-nox");
  EXPECT_TRUE(Warned("gnuplot-nox"));
  EXPECT_FALSE(fs::exists(dir_ / "loss_step_time.png"));
  EXPECT_HAS(summary_, "step time");
}

TEST_F(RenderReportTest, GnuplotFailureIsReportedWithItsOutput) {
  WriteFixture(MetricsLines(20));
  FakeGnuplot("echo \"line 7: unknown or ambiguous terminal type\" >&2\nexit 1");
  const Status s = Render();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_HAS(s.message(), "unknown or ambiguous terminal type");
  EXPECT_HAS(s.message(), "loss_step_time.gp");
  // report.md and the summary are still written, saying what failed.
  EXPECT_HAS(Md(), "loss_step_time.png was not drawn");
  EXPECT_HAS(summary_, "step time");
}

TEST_F(RenderReportTest, OnlyRequiredFieldsRender) {
  Write("report.json", R"({"job": "bare", "measured": {}, "predicted": {}, "cost_per_epoch": []})");
  Write("metrics.jsonl", "");
  const Status s = Render();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string md = Md();
  EXPECT_HAS(md, "# Run report: bare\n");
  EXPECT_EQ(md.find("## Lanes"), std::string::npos) << "no lanes were measured";
  EXPECT_HAS(md, "| step time | - | - | - |");
  EXPECT_HAS(md, "No instance type of the catalog can run this job.");
  EXPECT_HAS(md, "report.json lists no calibration.");
  EXPECT_HAS(summary_, "no feasible instance type");
}

// Without lane metrics the optimizer's line still stands, under its heading.
TEST_F(RenderReportTest, TheOptimizerLineNeedsNoLanes) {
  Write("report.json", R"({"job": "bare", "measured": {"step_time_s": 2.0, "optimizer_wait_s": 0.5},
                           "predicted": {"optimizer_exposed_s": 0.25, "optimizer_hidden_s": 0}, "cost_per_epoch": []})");
  Write("metrics.jsonl", "");
  ASSERT_TRUE(Render().ok());
  EXPECT_HAS(Md(), "## Lanes\n\nOptimizer: the training thread spent 500 ms a step in the updates (25.0 % of the "
                   "step), issuing them to the optimizer lane and waiting for them, or running them itself; predicted "
                   "250 ms on the step.\n");
}

TEST_F(RenderReportTest, BadReportJsonNamesTheFileAndWhatWasExpected) {
  const std::string file = (dir_ / "report.json").string();
  Status s = Render();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_HAS(s.message(), file);

  struct Case { const char* text; const char* needle; };
  const Case cases[] = {
      {R"({"job": "x", "measured": {)", "not valid JSON"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"job": "x", "predicted": {}, "cost_per_epoch": []})", "key 'measured' missing"},
      {R"({"job": 7, "measured": {}, "predicted": {}, "cost_per_epoch": []})", "key 'job': expected a string"},
      {R"({"job": "x", "measured": {"step_time_s": "fast"}, "predicted": {}, "cost_per_epoch": []})",
       "key 'measured.step_time_s': expected a number"},
      {R"({"job": "x", "measured": {}, "predicted": {}, "cost_per_epoch": [{"provider": "aws"}]})",
       "key 'cost_per_epoch[0].instance_type'"},
      {R"({"job": "x", "measured": {}, "predicted": {}, "cost_per_epoch": {}})",
       "key 'cost_per_epoch': expected an array"},
  };
  for (const Case& c : cases) {
    Write("report.json", c.text);
    s = Render();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_HAS(s.message(), file);
    EXPECT_HAS(s.message(), c.needle);
    EXPECT_FALSE(fs::exists(dir_ / "report.md")) << c.text;
  }
}

}  // namespace
}  // namespace tencache
