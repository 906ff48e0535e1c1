// tencache-bench: benchmarks of tencache's components. A small dispatcher: each
// subcommand lives in its own file and adds itself, with its flags, here.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/benchmarks.h"
#include "common/cli.h"
#ifdef TENCACHE_BENCH_TRAIN
#include "worker/omp_wait_policy.h"
#endif

int main(int argc, char** argv) {
#ifdef TENCACHE_BENCH_TRAIN
  tencache::ExecAgainWithPassiveOmpWaitUnlessSet(argv);  // train and adamw compute as the worker does
#endif
  namespace bench = tencache::bench;
  std::unique_ptr<CLI::App> app = tencache::MakeCliApp("tencache-bench", "Benchmarks of tencache's components.");
  app->require_subcommand(0, 1);  // none: the message below, naming them
  std::vector<bench::Benchmark> benchmarks = {bench::AddNvmeBench(*app), bench::AddCacheBench(*app),
                                                 bench::AddGpuCopyBench(*app)};
#ifdef TENCACHE_BENCH_TRAIN
  benchmarks.push_back(bench::AddTrainBench(*app));
  benchmarks.push_back(bench::AddAdamWBench(*app));
#endif
  if (const int code = tencache::ParseCli(*app, argc, argv); code >= 0) return code;
  std::string names;
  for (const bench::Benchmark& b : benchmarks) {
    names += (names.empty() ? "" : ", ") + b.command->get_name();
    if (!b.command->parsed()) continue;
    const tencache::Status st = b.run();
    if (!st.ok()) std::fprintf(stderr, "tencache-bench %s: %s\n", b.command->get_name().c_str(), st.ToString().c_str());
    return tencache::ExitCodeFor(st);
  }
  std::fprintf(stderr, "tencache-bench: expected a subcommand: %s; see tencache-bench --help\n", names.c_str());
  return 2;
}
