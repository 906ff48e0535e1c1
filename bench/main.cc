// tencache-bench: benchmarks of tencache's components. A small dispatcher: each
// subcommand lives in its own file and registers here.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/benchmarks.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  tencache::Status (*run)(const std::vector<std::string>&);
};

const Subcommand kSubcommands[] = {
    {"nvme", "NvmeTier write/read GB/s (checksums on and off) vs fio on the same file",
     tencache::bench::RunNvmeBench},
    {"cache", "a synthetic multi-step trace through device, host and NVMe tiers",
     tencache::bench::RunCacheBench},
#ifdef TENCACHE_BENCH_TRAIN
    {"train", "step time of offloaded training (tencache, no-prefetch, zero-infinity, lru) against in-memory training",
     tencache::bench::RunTrainBench},
#endif
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: tencache-bench <subcommand> [flags]\nsubcommands:\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-6s %s\n", s.name, s.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  for (const Subcommand& s : kSubcommands) {
    if (name != s.name) continue;
    tencache::Status st = s.run(std::vector<std::string>(argv + 2, argv + argc));
    if (!st.ok()) std::fprintf(stderr, "tencache-bench %s: %s\n", s.name, st.ToString().c_str());
    return tencache::ExitCodeFor(st);
  }
  std::fprintf(stderr, "tencache-bench: unknown subcommand '%s'\n", name.c_str());
  PrintUsage(stderr);
  return 2;
}
