// tencache-worker under mpirun, as users run it: 1, 2 and 4 ranks (more ranks
// than cores, hence --oversubscribe) give the same losses within 1e-4 (fp32), every
// rank stays within its budgets, and rank 0 writes one JSON line per step with
// the documented fields. Bad input stops every rank with exit code 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_runner.h"
#include "common/report_lines.h"

namespace {

namespace fs = std::filesystem;

using tencache::testing::CommandResult;

class WorkerMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_mpi_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "job.yaml")
        << "name: mpi\n"
           "model: {preset: tiny, layers: 2, hidden: 64, heads: 4, ffn_hidden: 256, seq_len: 32, dtype: fp32}\n"
           "train: {data: /usr/share/common-licenses/GPL-3, micro_batch: 1, global_batch: 8, lr: 3.0e-3, seed: 9}\n"
           "cache: {policy: tencache, device_budget: 320KiB, host_budget: 2MiB, nvme_path: "
        << (dir_ / "nvme").string() << "}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  CommandResult Launch(int ranks, const std::string& extra) {
    return tencache::testing::RunCommand("mpirun --allow-run-as-root --oversubscribe -n " + std::to_string(ranks) + " " +
                 TENCACHE_WORKER_BIN + " --job " + (dir_ / "job.yaml").string() + " --sample 0 " + extra + " 2>&1");
  }

  std::vector<nlohmann::json> Metrics(int ranks, int steps) {
    const std::string file = (dir_ / ("metrics" + std::to_string(ranks) + ".jsonl")).string();
    CommandResult r = Launch(ranks, "--steps " + std::to_string(steps) + " --metrics " + file);
    EXPECT_EQ(r.code, 0) << r.out;
    std::vector<nlohmann::json> lines;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }
  fs::path dir_;
};

TEST_F(WorkerMpi, TwoAndFourRanksMatchOneRank) {
  std::vector<nlohmann::json> one = Metrics(1, 20);
  ASSERT_EQ(one.size(), 20u);
  for (const char* key : {"step", "loss", "step_time_s", "tokens_per_s", "device_hit_rate", "bytes_h2d", "bytes_d2h",
                          "bytes_nvme_read", "bytes_nvme_write", "stall_s", "allocations_after_warmup",
                          "device_used_bytes", "device_reserved_bytes", "host_used_bytes", "host_reserved_bytes",
                          "nvme_used_bytes", "host_rss_bytes", "open_fds"}) {
    EXPECT_TRUE(one[0].contains(key)) << key;
  }
  EXPECT_GT(one[0]["host_rss_bytes"].get<double>(), 1 << 20);  // rank 0's own process
  EXPECT_GE(one[0]["open_fds"].get<double>(), 3);               // at least stdin, stdout, stderr
  // Each rank's resident peaks: loading's, and training's from then on, which
  // never falls and is at least what is resident at its step.
  const double peak0 = one[0]["per_rank"]["peak_rss_bytes"][0], peak19 = one[19]["per_rank"]["peak_rss_bytes"][0];
  EXPECT_GT(one[0]["per_rank"]["setup_peak_rss_bytes"][0].get<double>(), 1 << 20);
  EXPECT_GE(peak19, peak0);
  EXPECT_GE(peak19, one[19]["host_rss_bytes"].get<double>() * 0.99);
  for (int ranks : {2, 4}) {
    std::vector<nlohmann::json> many = Metrics(ranks, 20);
    ASSERT_EQ(many.size(), 20u) << ranks;
    for (int s = 0; s < 20; ++s) {
      const double a = one[s]["loss"], b = many[s]["loss"];
      EXPECT_LT(std::fabs(a - b) / a, 1e-4) << ranks << " ranks, step " << s << ": " << b << " vs " << a;
      EXPECT_LE(many[s]["device_used_bytes"].get<double>(), 320.0 * 1024) << ranks << " ranks, step " << s;
      EXPECT_LE(many[s]["host_used_bytes"].get<double>(), 2.0 * 1024 * 1024) << ranks << " ranks, step " << s;
    }
  }
}

// MPI takes int counts: collectives beyond them run in pieces. Forced down to
// 1000 elements a piece (every shard of the test model is larger), 2 ranks give
// bitwise the losses of whole collectives.
TEST_F(WorkerMpi, EvaluateGivesTheValidationLossTrainingLogsAfterTheSameSteps) {
  // Two ranks train 3 steps, checkpointing, and evaluate after the last; the
  // checkpoint evaluated on its own (--resume --evaluate) gives that loss bitwise.
  const std::string ckpt = "--set train.eval_every=3 --set train.checkpoint_every=3 --set train.checkpoint_dir=" +
                           (dir_ / "ckpt").string();
  const std::string file = (dir_ / "eval.jsonl").string();
  CommandResult trained = Launch(2, ckpt + " --steps 3 --metrics " + file);
  ASSERT_EQ(trained.code, 0) << trained.out;
  std::ifstream in(file);
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  const double want = nlohmann::json::parse(last)["eval_loss"];
  CommandResult evaluated = Launch(2, ckpt + " --resume --evaluate");
  ASSERT_EQ(evaluated.code, 0) << evaluated.out;
  const size_t at = evaluated.out.find("eval loss ");
  ASSERT_NE(at, std::string::npos) << evaluated.out;
  EXPECT_EQ(std::stod(evaluated.out.substr(at + 10)), want) << evaluated.out;
  EXPECT_NE(evaluated.out.find("at step 3"), std::string::npos) << evaluated.out;
  EXPECT_NE(evaluated.out.find("resumed at step 3"), std::string::npos) << evaluated.out;
}

TEST_F(WorkerMpi, CollectivesInPiecesGiveTheSameLosses) {
  const std::string whole = (dir_ / "whole.jsonl").string(), pieces = (dir_ / "pieces.jsonl").string();
  CommandResult a = Launch(2, "--steps 4 --metrics " + whole);
  ASSERT_EQ(a.code, 0) << a.out;
  CommandResult b = Launch(2, "--steps 4 --mpi-max-count 1000 --metrics " + pieces);
  ASSERT_EQ(b.code, 0) << b.out;
  std::ifstream in_a(whole), in_b(pieces);
  int steps = 0;
  for (std::string la, lb; std::getline(in_a, la) && std::getline(in_b, lb); ++steps) {
    EXPECT_EQ(nlohmann::json::parse(la)["loss"].get<double>(), nlohmann::json::parse(lb)["loss"].get<double>())
        << "step " << steps;
  }
  EXPECT_EQ(steps, 4);
}

// Each rank computes on its share of the cores, OpenBLAS's pool included, and
// its OpenMP threads sleep between regions (worker/omp_wait_policy.cc) unless
// the environment sets a policy of its own.
TEST_F(WorkerMpi, ComputeThreadsAreTheRanksShareAndWaitPassivelyUnlessTold) {
  const std::string worker = " " + std::string(TENCACHE_WORKER_BIN) + " --job " + (dir_ / "job.yaml").string() +
                             " --sample 0 --steps 1";
  const std::string job = worker + " 2>&1";
  CommandResult r = tencache::testing::RunCommand("env -u OMP_WAIT_POLICY mpirun --allow-run-as-root -n 1" + job);
  ASSERT_EQ(r.code, 0) << r.out;
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  EXPECT_NE(r.out.find(std::to_string(cores) + " compute thread(s) per rank (1 rank(s) on this machine; OpenBLAS threads " +
                       std::to_string(cores) + ", OMP_WAIT_POLICY PASSIVE)"),
            std::string::npos)
      << r.out;
  r = tencache::testing::RunCommand("OMP_WAIT_POLICY=ACTIVE mpirun --allow-run-as-root -x OMP_WAIT_POLICY -n 1" + job);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("OMP_WAIT_POLICY ACTIVE)"), std::string::npos) << r.out;
  // train.compute_threads overrides the share, for torch and OpenBLAS alike.
  const std::string n = cores > 1 ? "1" : "2";
  r = tencache::testing::RunCommand("mpirun --allow-run-as-root -n 1" + worker + " --set train.compute_threads=" + n +
                                    " 2>&1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(n + " compute thread(s) per rank (1 rank(s) on this machine; OpenBLAS threads " + n + ","),
            std::string::npos)
      << r.out;
  r = tencache::testing::RunCommand("mpirun --allow-run-as-root -n 1" + worker + " --set train.compute_threads=-1 2>&1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.compute_threads"), std::string::npos) << r.out;
}

// The probe times the model's compute as the worker's steps run it: with freed
// memory kept mapped (worker/host_malloc.h), so a micro-batch faults in no new
// pages. A 50 MB embedding (65,536 x 192) would otherwise fault its gradient
// in afresh every repeat (12,288 pages), and the plan predicted steps 30-40 %
// too long.
TEST_F(WorkerMpi, TheProbeComputesWithoutFaultingInFreshPages) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator keeps its own pools";
#endif
  CommandResult r = Launch(1, "--probe --set model.vocab=65536 --set model.hidden=192");
  ASSERT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find(tencache::kReportProbePrefix);
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t from = at + std::string(tencache::kReportProbePrefix).size();
  const nlohmann::json probe = nlohmann::json::parse(r.out.substr(from, r.out.find('\n', from) - from));
  const double embedding_pages = 65536.0 * 192 * sizeof(float) / 4096;
  EXPECT_LT(probe.at("compute_page_faults").get<double>(), embedding_pages / 20) << r.out;
}

// Without a usable GPU, --device cuda stops with the reason; auto trains on the CPU.
TEST_F(WorkerMpi, DeviceCudaWithoutAGpuSaysWhy) {
  CommandResult r = Launch(1, "--steps 1 --device cuda");
  if (r.code == 0) GTEST_SKIP() << "this machine computes on a GPU";
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--device cuda: "), std::string::npos) << r.out;
  r = Launch(1, "--steps 1 --device auto");
  EXPECT_EQ(r.code, 0) << r.out;
  r = Launch(1, "--steps 1 --device tpu");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("expected auto, cuda or cpu, got 'tpu'"), std::string::npos) << r.out;
}

TEST_F(WorkerMpi, BadInputStopsEveryRankWithExitCode2) {
  CommandResult r = Launch(2, "--steps 1 --set train.micro_batch=0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train.micro_batch"), std::string::npos) << r.out;
  r = Launch(1, "--steps 1 --set train.micro_batch=0");
  EXPECT_EQ(r.code, 2) << r.out;
  r = Launch(1, "--stpes 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--stpes"), std::string::npos) << r.out;
}

}  // namespace
