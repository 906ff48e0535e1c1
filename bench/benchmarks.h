// The subcommands of tencache-bench. Each Add*Bench adds its subcommand, with
// its flags and their defaults, to the program's CLI11 app (common/cli.h); once
// the command line is parsed, main() calls `run` of the one that was given,
// which prints its report to stdout and returns a Status; main() turns that into
// the exit code (2 for bad input). Not thread-safe (used once at startup).
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/stats.h"
#include "common/status.h"

namespace tencache::bench {

struct Benchmark {
  CLI::App* command = nullptr;  // the subcommand, owned by the app
  std::function<Status()> run;  // runs it with the parsed flags
};

// NvmeTier write/read GB/s with and without checksums, against fio on the same file.
Benchmark AddNvmeBench(CLI::App& app);
// A synthetic multi-step trace through the device, host and NVMe tiers.
Benchmark AddCacheBench(CLI::App& app);
// Host<->GPU copies through the CUDA device tier against plain cudaMemcpyAsync (needs a GPU).
Benchmark AddGpuCopyBench(CLI::App& app);
// Offloaded training against in-memory training (built with the worker).
Benchmark AddTrainBench(CLI::App& app);
// AdamW's GB/s against a copy of the same bytes on the same threads (built with the worker).
Benchmark AddAdamWBench(CLI::App& app);

using tencache::Median;  // common/stats.h

}  // namespace tencache::bench
