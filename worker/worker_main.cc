// tencache-worker: one MPI rank of a training job. Run under mpirun:
//   mpirun -n 2 tencache-worker --job configs/examples/quickstart.yaml --steps 20
// Rank 0 logs each step and writes one JSON line per step to --metrics (and,
// with --report-lines, to stdout for the launcher); --probe measures this
// machine's speed at the job's work instead of training. This
// file is the CLI edge: flags, MPI setup, and turning a Status into a message
// and an exit code (2 for bad input). On an error every rank is stopped.
#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "common/byte_size.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/hf_layout.h"
#include "common/job_spec.h"
#include "common/report_lines.h"
#include "worker/machine_probe.h"
#include "worker/compute_device.h"
#include "worker/omp_wait_policy.h"
#include "worker/mpi_communicator.h"
#include "worker/nccl_communicator.h"
#include "common/safetensors.h"
#include "worker/checkpoint.h"
#include "worker/hf_checkpoint.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

struct Args {
  std::string job;
  std::vector<std::string> overrides;
  int steps = -1;
  std::string metrics;
  std::string trace;
  std::string save_weights;
  std::string write_init;
  std::string max_shard_size = "5GB";
  std::string init_dtype = "fp32";
  std::string logits;
  bool resume = false;
  int sample = 48;
  bool report_lines = false;
  bool probe = false;
  bool evaluate = false;
  std::string device = "auto";
  size_t mpi_max_count = 0;  // 0: MPI's int limit
};

// FILE: 'tokens' [T] (as fp32: exact below 2^24) and 'logits' [T, vocab].
Status WriteLogits(const std::string& path, const std::vector<int64_t>& tokens, const torch::Tensor& logits) {
  const int64_t T = int64_t(tokens.size()), V = logits.size(1);
  std::vector<float> ids(tokens.begin(), tokens.end());
  TC_ASSIGN_OR_RETURN(SafetensorsWriter w, SafetensorsWriter::Begin(path, {{"tokens", StDType::kF32, {T}},
                                                                           {"logits", StDType::kF32, {T, V}}},
                                                                    {{"format", "pt"}}));
  TC_RETURN_IF_ERROR(w.Write("tokens", ids.data(), ids.size() * sizeof(float)));
  TC_RETURN_IF_ERROR(w.Write("logits", logits.data_ptr<float>(), uint64_t(T * V) * sizeof(float)));
  return w.Finish();
}

// This process's resident set in bytes (/proc/self/statm's second field, in
// pages) and its open file descriptors (the entries of /proc/self/fd, less the
// handle that lists them); -1 where /proc cannot say. Rank 0 reads them once a
// step for its metrics line, where bench/soak watches them for growth.
struct ProcessFigures {
  long long rss_bytes = -1;
  long long open_fds = -1;
};

ProcessFigures ReadProcessFigures() {
  ProcessFigures f;
  if (int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC); fd >= 0) {
    char text[128];
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n > 0) {
      text[n] = '\0';
      long long size = 0, resident = 0;  // in pages
      if (std::sscanf(text, "%lld %lld", &size, &resident) == 2) {
        f.rss_bytes = resident * static_cast<long long>(::sysconf(_SC_PAGESIZE));
      }
    }
  }
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    long long entries = 0;
    while (const dirent* e = ::readdir(dir)) entries += e->d_name[0] != '.';  // not "." and ".."
    ::closedir(dir);
    f.open_fds = entries - 1;  // the handle opendir held while listing
  }
  return f;
}

// Rank 0's line for a step: the log, --metrics and the launcher's report line.
// The JSON line is the trainer's (StepMetrics::ToJson) with rank 0's process
// figures appended: host_rss_bytes and open_fds.
void PrintStep(const StepMetrics& m, const Args& args, std::ofstream& metrics,
               const std::function<void(const std::string&)>& log) {
  char line[320];
  int at = std::snprintf(line, sizeof line, "step %lld loss %.4f  %.3f s  %.0f tok/s  device hit %.3f  stall %.3f s",
                         static_cast<long long>(m.step), m.loss, m.step_time_s, m.tokens_per_s, m.device_hit_rate,
                         m.stall_s);
  if (std::isfinite(m.eval_loss)) at += std::snprintf(line + at, sizeof line - at, "  eval loss %.4f", m.eval_loss);
  if (m.grad_norm >= 0) at += std::snprintf(line + at, sizeof line - at, "  grad norm %.3g", m.grad_norm);
  if (m.loss_scale > 0) {
    std::snprintf(line + at, sizeof line - at, "  loss scale %.0f%s", m.loss_scale, m.skipped ? " (overflow: skipped)" : "");
  }
  log(line);
  if (!metrics.is_open() && !args.report_lines) return;
  std::string json = m.ToJson();
  if (!json.empty() && json.back() == '}') {  // an object: add the two keys before its closing brace
    const ProcessFigures p = ReadProcessFigures();
    char keys[96];
    std::snprintf(keys, sizeof keys, ",\"host_rss_bytes\":%lld,\"open_fds\":%lld", p.rss_bytes, p.open_fds);
    json.insert(json.size() - 1, keys);
  }
  if (metrics.is_open()) metrics << json << "\n" << std::flush;
  if (args.report_lines) std::cout << kReportMetricsPrefix << json << std::endl;
}

// "FOLDER (12.4 GB in 20.1 s, 0.62 GB/s)": the bytes of the files in a
// checkpoint folder, moved in `seconds`.
std::string Throughput(const std::string& folder, double seconds) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(folder, ec)) {
    if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  }
  char text[96];
  std::snprintf(text, sizeof text, " (%.2f GB in %.1f s, %.2f GB/s)", double(bytes) / 1e9, seconds,
                seconds > 0 ? double(bytes) / 1e9 / seconds : 0.0);
  return folder + text;
}

volatile std::sig_atomic_t g_stop_requested = 0;  // the signal's number

// SIGINT, SIGTERM and SIGUSR1 (what tencache-launch sends mpirun, which
// forwards it to every rank) ask for a stop after the current step.
void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = [](int sig) { g_stop_requested = sig; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

std::unique_ptr<CLI::App> MakeApp(Args* a) {
  auto app = MakeCliApp("tencache-worker", "One MPI rank of a tencache training job; run it under mpirun, "
                                           "one process per rank (tencache-launch does).");
  app->add_option("--job", a->job, "the job file (tencache-launch gives the resolved one)")->required();
  app->add_option("--set", a->overrides, "override one job key, KEY=VALUE (repeatable)");
  app->add_option("--steps", a->steps, "optimizer steps to run (default: train.steps)")
      ->check(CLI::Range(0, 100000000));
  app->add_option("--metrics", a->metrics, "rank 0 writes one JSON line per step to FILE");
  app->add_flag("--report-lines", a->report_lines,
                "print lines for tencache-launch (common/report_lines.h): each rank's PID, rank 0's metrics");
  app->add_option("--trace", a->trace, "rank 0 writes its profiled step's trace for tencache-sim --trace FILE");
  app->add_option("--save-weights", a->save_weights,
                  "after training, write the weights to DIR (transformers' layout, fp32: model.safetensors, or "
                  "shards and model.safetensors.index.json past --max-shard-size) and DIR/config.json");
  app->add_option("--write-init", a->write_init,
                  "write the weights a run starts from without model.init (drawn from train.seed) to DIR, as "
                  "--save-weights writes them, and exit without training (a job whose model.init names DIR starts "
                  "from the same values)");
  app->add_option("--init-dtype", a->init_dtype,
                  "what --write-init stores: fp32 (the drawn values exactly), bf16 or fp16 (rounded, half the bytes)")
      ->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app->add_option("--max-shard-size", a->max_shard_size,
                  "the largest safetensors shard --save-weights and --write-init write (transformers' max_shard_size)")
      ->capture_default_str();
  app->add_flag("--resume", a->resume,
                "continue from the newest complete checkpoint in train.checkpoint_dir (exit 2 when there is none)");
  app->add_option("--logits", a->logits,
                  "after training, write the model's logits for the first model.seq_len tokens of train.data to "
                  "FILE (safetensors: 'tokens' and 'logits' [T, vocab], fp32), for comparison with transformers");
  app->add_option("--sample", a->sample, "bytes of text to sample at the end (0: none)")
      ->check(CLI::Range(0, 100000000));
  app->add_option("--device", a->device,
                  "where to compute: auto (a GPU when this build, its libtorch and the machine have CUDA), cuda, cpu")
      ->capture_default_str();
  app->add_option("--mpi-max-count", a->mpi_max_count,
                  "testing: split MPI collectives into pieces of at most N elements (default: MPI's int limit)")
      ->check(CLI::Range(size_t(1), size_t(INT_MAX)));
  app->add_flag("--evaluate", a->evaluate,
                "print the validation loss (train.eval_*) of the weights the run starts from (model.init, the seed, "
                "or with --resume the checkpoint) and exit without training");
  app->add_flag("--probe", a->probe,
                std::string("measure this machine's speed at the job's work instead of training; rank 0 prints "
                            "one JSON line after '") + kReportProbePrefix + "'");
  return app;
}

// Trains the job. *stopped_by: the signal that stopped it after a step (every
// rank agreed, and checkpointed where train.checkpoint_on_stop), else 0.
Status Run(const Args& args, int rank, int* stopped_by) {
  if (args.report_lines) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::cout << kReportPidPrefix << getpid() << " " << host << std::endl;
  }
  TC_ASSIGN_OR_RETURN(JobSpec job, LoadJobFile(args.job, args.overrides));
  StatusOr<uint64_t> max_shard = ParseByteSize(args.max_shard_size);
  if (!max_shard.ok() || *max_shard == 0) {
    return Status::InvalidArgument("--max-shard-size '" + args.max_shard_size + "': expected a positive size such as 5GB or 2GiB");
  }
  if (!args.write_init.empty()) {
    if (rank != 0) return Status::Ok();
    TC_RETURN_IF_ERROR(CheckWorkerSupports(job.model));
    const StDType stored = args.init_dtype == "bf16" ? StDType::kBF16 : args.init_dtype == "fp16" ? StDType::kF16 : StDType::kF32;
    Status wrote = WriteInitialWeights(DecoderModel(job.model), job.train.seed, job.dtype, args.write_init, *max_shard, stored);
    if (!wrote.ok()) return wrote.WithContext("--write-init " + args.write_init);
    std::cout << "tencache-worker: wrote the initial weights (train.seed " << job.train.seed << ") of "
              << job.model.name << " to " << args.write_init << std::endl;
    return Status::Ok();
  }
  if (job.train.data.empty()) {
    return Status::InvalidArgument(job.source + ": key 'train.data': the worker needs a corpus to train on");
  }
  TC_ASSIGN_OR_RETURN(std::shared_ptr<TokenCorpus> corpus, TokenCorpus::Open(job.train.data));
  std::unique_ptr<Communicator> mpi =
      args.mpi_max_count > 0 ? MakeMpiCommunicator(MPI_COMM_WORLD, args.mpi_max_count) : MakeMpiCommunicator(MPI_COMM_WORLD);
  // Ranks on this machine share its cores: oversubscribed BLAS threads spin
  // against each other and can slow a step tenfold. They also share its GPUs:
  // local rank i computes on GPU i (modulo the GPUs present).
  MPI_Comm local;
  int local_ranks = 1, local_rank = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_ranks);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  TC_ASSIGN_OR_RETURN(ComputeDevice device, SelectComputeDevice(args.device, local_rank));
  device.cores = ComputeThreadsPerRank(local_ranks);
  // On GPUs with more than one rank the parameter and gradient collectives run
  // in NCCL; MPI carries the small host ones (and is the fallback without NCCL).
  std::unique_ptr<Communicator> nccl;
  if (device.cuda() && mpi->size() > 1 && NcclBuilt()) {
    TC_ASSIGN_OR_RETURN(nccl, MakeNcclCommunicator(mpi.get(), device));
  }
  Communicator* comm = nccl ? nccl.get() : mpi.get();
  const int threads = job.train.compute_threads > 0 ? job.train.compute_threads : device.cores;
  const int blas_threads = SetComputeThreads(threads);
  auto log = [rank](const std::string& line) {
    if (rank == 0) std::cout << kWorkerLogPrefix << line << std::endl;
  };
  if (args.probe) {
    TC_ASSIGN_OR_RETURN(ProbeResult probe, ProbeMachine(job, mpi.get(), torch::get_num_threads(), corpus));
    if (rank == 0) std::cout << kReportProbePrefix << probe.ToJson().dump() << std::endl;
    return Status::Ok();
  }
  InstallStopHandlers();  // a stop asked during set-up takes effect after the first step
  if (args.evaluate && job.train.eval_every == 0) job.train.eval_every = 1;  // the same windows; none is trained on
  TC_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(job, comm, corpus, log, device));
  log(trainer->Describe() + "; " + std::to_string(torch::get_num_threads()) + " compute thread(s) per rank (" +
      std::to_string(local_ranks) + " rank(s) on this machine; OpenBLAS threads " + std::to_string(blas_threads) +
      ", OMP_WAIT_POLICY " + OmpWaitPolicy() + ")");
  std::ofstream metrics;
  if (rank == 0 && !args.metrics.empty()) {
    metrics.open(args.metrics);
    if (!metrics) return Status::InvalidArgument("--metrics: cannot write '" + args.metrics + "'");
  }
  if (args.resume) {
    const double t0 = MonotonicSeconds();
    TC_RETURN_IF_ERROR(trainer->Resume());
    log(kReportResumedSaid + std::to_string(trainer->step()) + " from " +
        Throughput(CheckpointFolder(job.train.checkpoint_dir, trainer->step()), MonotonicSeconds() - t0));
  }
  if (args.evaluate) {
    TC_ASSIGN_OR_RETURN(const double loss, trainer->Evaluate());
    char line[96];
    std::snprintf(line, sizeof line, "eval loss %.17g at step %lld", loss, static_cast<long long>(trainer->step()));
    log(line);
    return Status::Ok();
  }
  const int steps = args.steps >= 0 ? args.steps : job.train.steps;
  for (int s = int(trainer->step()); s < steps; ++s) {
    TC_ASSIGN_OR_RETURN(StepMetrics m, trainer->Step());
    const int every = job.train.eval_every;
    if (every > 0 && ((s + 1) % every == 0 || s + 1 == steps)) {  // and after the last step
      TC_ASSIGN_OR_RETURN(m.eval_loss, trainer->Evaluate());
    }
    if (rank == 0) PrintStep(m, args, metrics, log);
    // A stop asked of any rank (SIGINT, SIGTERM, SIGUSR1) ends the run on
    // every rank after this step, with a checkpoint (train.checkpoint_on_stop).
    double stop = g_stop_requested != 0 ? 1.0 : 0.0;
    TC_RETURN_IF_ERROR(comm->AllReduceSum(&stop, 1));
    const int ckpt = job.train.checkpoint_every;
    if ((ckpt > 0 && (s + 1) % ckpt == 0) || (stop > 0 && job.train.checkpoint_on_stop)) {
      const double t0 = MonotonicSeconds();
      TC_RETURN_IF_ERROR(trainer->SaveCheckpoint());
      log(kReportCheckpointSaid + std::to_string(s + 1) + " in " +
          Throughput(CheckpointFolder(job.train.checkpoint_dir, s + 1), MonotonicSeconds() - t0));
    }
    if (stop > 0) {
      if (rank == 0) {
        log("stopped after step " + std::to_string(s + 1) + " (a signal asked it)" +
            (job.train.checkpoint_on_stop || (ckpt > 0 && (s + 1) % ckpt == 0)
                 ? ""
                 : "; no checkpoint written (train.checkpoint_on_stop is false)"));
      }
      *stopped_by = g_stop_requested != 0 ? int(g_stop_requested) : SIGTERM;  // SIGTERM: another rank's
      return Status::Ok();
    }
  }
  if (rank == 0 && !args.trace.empty()) {
    Status wrote = trainer->WriteTrace(args.trace);
    if (!wrote.ok()) return wrote.WithContext("--trace");
    const int timed = trainer->profiler().timed_steps();
    log("trace: wrote " + args.trace + " (compute times: " +
        (timed > 0 ? "each access's median over the " + std::to_string(timed) +
                             " steps after the profiled one, scaled to their median step"
                   : std::string("the profiled step's")) +
        "); replay: tencache-sim --trace " + args.trace + " " + trainer->SimFlags() +
        " --policy tencache (device_hit_rate compares with steps >= 2)");
  }
  if (!args.save_weights.empty()) {
    if (StatusOr<HfArch> arch = HfArchFor(job.model); !arch.ok()) {  // a model transformers has no class for
      log("weights not saved: " + arch.status().message());
    } else {
      TC_RETURN_IF_ERROR(trainer->SaveWeights(args.save_weights, *max_shard));
      log("weights: wrote " + args.save_weights + " (safetensors and config.json, " + arch->architecture + ")");
    }
  }
  if (!args.logits.empty()) {
    std::vector<int64_t> window(size_t(job.model.seq_len) + 1);
    corpus->Window(0, job.model.seq_len, window.data());
    window.pop_back();
    TC_ASSIGN_OR_RETURN(torch::Tensor logits, trainer->Logits(window));
    if (rank == 0) {
      Status wrote = WriteLogits(args.logits, window, logits);
      if (!wrote.ok()) return wrote.WithContext("--logits");
      log("logits: wrote " + args.logits + " (" + std::to_string(window.size()) + " positions)");
    }
  }
  if (args.sample > 0) {
    TC_ASSIGN_OR_RETURN(std::string text, trainer->Sample("The ", args.sample));
    log("sample: \"The " + text + "\"");
  }
  return Status::Ok();
}

}  // namespace
}  // namespace tencache

int main(int argc, char** argv) {
  tencache::ExecAgainWithPassiveOmpWaitUnlessSet(argv);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  tencache::Args args;
  std::unique_ptr<CLI::App> app = tencache::MakeApp(&args);
  if (int code = tencache::ParseCli(*app, argc, argv); code >= 0) {
    MPI_Finalize();
    return code;
  }
  int stopped_by = 0;
  tencache::Status status = tencache::Run(args, rank, &stopped_by);
  if (status.ok() && stopped_by != 0) {
    // Every rank agreed to stop after the same step: no MPI_Abort, which
    // would kill the ranks with their last lines still on the way to mpirun.
    // Only rank 0, whose lines carry the metrics, exits non-zero (128 + the
    // signal: a stop is not a finished run), so mpirun, which kills the other
    // ranks when one exits non-zero, never kills rank 0 with its output unread.
    std::cout << std::flush;
    std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rank == 0 ? 128 + stopped_by : 0;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tencache-worker (rank %d): %s\n", rank, status.message().c_str());
    const int code = tencache::ExitCodeFor(status);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);  // other ranks may be waiting in a collective
    MPI_Finalize();
    return code;
  }
  MPI_Finalize();
  return 0;
}
