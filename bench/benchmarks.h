// The subcommands of tencache-bench. Each takes its arguments after the
// subcommand name, prints its report to stdout, and returns a Status; main()
// turns that into the exit code (2 for bad input).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tencache::bench {

// NvmeTier write/read GB/s with and without checksums, against fio on the same file.
Status RunNvmeBench(const std::vector<std::string>& args);
// A synthetic multi-step trace through the device, host and NVMe tiers.
Status RunCacheBench(const std::vector<std::string>& args);
// Offloaded training against in-memory training (built with the worker).
Status RunTrainBench(const std::vector<std::string>& args);

// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
double Median(std::vector<double> v);

}  // namespace tencache::bench
