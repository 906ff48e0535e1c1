// tencache-worker: one MPI rank of a training job. Run under mpirun:
//   mpirun -n 2 tencache-worker --job configs/examples/quickstart.yaml --steps 20
// Rank 0 logs each step and writes one JSON line per step to --metrics. This
// file is the CLI edge: flags, MPI setup, and turning a Status into a message
// and an exit code (2 for bad input). On an error every rank is stopped.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/job_spec.h"
#include "worker/mpi_communicator.h"
#include "worker/trainer.h"

namespace tencache {
namespace {

const char kUsage[] =
    "usage: tencache-worker --job JOB.yaml [--set KEY=VALUE]... [--steps N] [--metrics FILE] [--sample N]\n"
    "                       [--trace FILE]\n"
    "  run under mpirun; one process per rank\n"
    "  --trace FILE  rank 0 writes its profiled step's trace for tencache-sim --trace FILE\n";

struct Args {
  std::string job;
  std::vector<std::string> overrides;
  int steps = -1;
  std::string metrics;
  std::string trace;
  int sample = 48;
};

Status ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) -> Status {
      if (i + 1 >= argc) return Status::InvalidArgument(arg + ": expected a value after it");
      *out = argv[++i];
      return Status::Ok();
    };
    auto count = [&](int* out) -> Status {
      std::string v;
      TC_RETURN_IF_ERROR(value(&v));
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > 100000000) {
        return Status::InvalidArgument(arg + ": expected a non-negative integer, got '" + v + "'");
      }
      *out = int(n);
      return Status::Ok();
    };
    if (arg == "--job") {
      TC_RETURN_IF_ERROR(value(&a->job));
    } else if (arg == "--set") {
      std::string kv;
      TC_RETURN_IF_ERROR(value(&kv));
      a->overrides.push_back(kv);
    } else if (arg == "--steps") {
      TC_RETURN_IF_ERROR(count(&a->steps));
    } else if (arg == "--metrics") {
      TC_RETURN_IF_ERROR(value(&a->metrics));
    } else if (arg == "--trace") {
      TC_RETURN_IF_ERROR(value(&a->trace));
    } else if (arg == "--sample") {
      TC_RETURN_IF_ERROR(count(&a->sample));
    } else {
      return Status::InvalidArgument("unknown argument '" + arg + "'; expected --job, --set, --steps, --metrics, --trace or --sample");
    }
  }
  if (a->job.empty()) return Status::InvalidArgument("--job: expected a JOB.yaml path");
  return Status::Ok();
}

Status Run(int argc, char** argv, int rank) {
  Args args;
  TC_RETURN_IF_ERROR(ParseArgs(argc, argv, &args));
  TC_ASSIGN_OR_RETURN(JobSpec job, LoadJobFile(args.job, args.overrides));
  if (job.train.data.empty()) {
    return Status::InvalidArgument(job.source + ": key 'train.data': the worker needs a corpus to train on");
  }
  TC_ASSIGN_OR_RETURN(std::shared_ptr<TokenCorpus> corpus, TokenCorpus::Open(job.train.data));
  std::unique_ptr<Communicator> comm = MakeMpiCommunicator(MPI_COMM_WORLD);
  // Ranks on this machine share its cores: oversubscribed BLAS threads spin
  // against each other and can slow a step tenfold.
  MPI_Comm local;
  int local_ranks = 1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_ranks);
  MPI_Comm_free(&local);
  const int cores = std::max(1, int(std::thread::hardware_concurrency()));
  torch::set_num_threads(std::max(1, cores / local_ranks));
  auto log = [rank](const std::string& line) {
    if (rank == 0) std::cout << "tencache-worker: " << line << std::endl;
  };
  TC_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(job, comm.get(), corpus, log));
  log(trainer->Describe() + "; " + std::to_string(torch::get_num_threads()) + " compute thread(s) per rank (" +
      std::to_string(local_ranks) + " rank(s) on this machine)");
  std::ofstream metrics;
  if (rank == 0 && !args.metrics.empty()) {
    metrics.open(args.metrics);
    if (!metrics) return Status::InvalidArgument("--metrics: cannot write '" + args.metrics + "'");
  }
  const int steps = args.steps >= 0 ? args.steps : job.train.steps;
  for (int s = 0; s < steps; ++s) {
    TC_ASSIGN_OR_RETURN(StepMetrics m, trainer->Step());
    if (rank != 0) continue;
    char line[256];
    std::snprintf(line, sizeof line, "step %lld loss %.4f  %.3f s  %.0f tok/s  device hit %.3f  stall %.3f s",
                  static_cast<long long>(m.step), m.loss, m.step_time_s, m.tokens_per_s, m.device_hit_rate, m.stall_s);
    log(line);
    if (metrics.is_open()) metrics << m.ToJson() << "\n" << std::flush;
  }
  if (rank == 0 && !args.trace.empty()) {
    Status wrote = trainer->WriteTrace(args.trace);
    if (!wrote.ok()) return wrote.WithContext("--trace");
    log("trace: wrote " + args.trace + "; replay: tencache-sim --trace " + args.trace + " " + trainer->SimFlags() +
        " --policy tencache (device_hit_rate compares with steps >= 2)");
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
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    if (rank == 0) std::fputs(tencache::kUsage, stdout);
    MPI_Finalize();
    return 0;
  }
  tencache::Status status = tencache::Run(argc, argv, rank);
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
