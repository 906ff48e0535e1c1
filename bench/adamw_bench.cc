// tencache-bench adamw: the optimizer against memory speed. AdamWStep over
// fp32 masters, gradients and both moments reads p, g, m, v and writes p, m, v:
// 28 bytes per parameter. The baseline streams the same arrays with the same
// reads and writes (p = g - p, m and v swapped), in the same chunks on the same
// threads (ForEachAdamWChunk), so the ratio of the two is how close the
// optimizer comes to the memory's speed. Optionally torch::optim::AdamW's step
// over the same number of parameters, for reference. The variants alternate
// round by round, so a drift in the machine's speed hits them alike; the report
// gives each round, the medians and the spread (min-max).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "bench/benchmarks.h"
#include "common/byte_size.h"
#include "common/cli.h"
#include "worker/adamw.h"

namespace tencache::bench {
namespace {

constexpr double kBytesPerParam = 7 * sizeof(float);  // read p, g, m, v; write p, m, v

struct AdamWFlags {  // the flags, with their defaults
  int64_t params = int64_t{64} << 20;  // 1 GiB of state: far beyond the caches
  int64_t shard = 0;                   // parameters per call; 0: one call
  int threads = std::max(1, int(std::thread::hardware_concurrency()));
  int rounds = 9;
  bool torch = false;
  bool json = false;
};

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

Buffer AllocateFilled(size_t n, float value) {
  const size_t bytes = (n * sizeof(float) + 63) & ~size_t{63};
  Buffer b(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (b) std::fill(b.get(), b.get() + n, value);  // touches every page before timing
  return b;
}

// Reads and writes exactly what AdamW does, with nothing to compute; built for
// the same instruction sets as AdamWStep's loop (worker/adamw.cc).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target_clones("avx2", "default")))
#endif
void CopyKernel(size_t begin, size_t end, float* __restrict p, const float* __restrict g, float* __restrict m,
                float* __restrict v) {
  for (size_t i = begin; i < end; ++i) {
    const float mi = m[i];
    m[i] = v[i];
    v[i] = mi;
    p[i] = g[i] - p[i];
  }
}

double Seconds(const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "min-max" of `x` with `digits` decimals.
std::string Range(const std::vector<double>& x, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f-%.*f", digits, *std::min_element(x.begin(), x.end()), digits,
                *std::max_element(x.begin(), x.end()));
  return text;
}

struct Column {
  const char* name;
  std::function<void()> step;
  std::vector<double> gbps;
};

Status RunAdamWBench(const AdamWFlags& f) {
  const size_t n = size_t(f.params), shard = f.shard > 0 ? std::min(size_t(f.shard), n) : n;
  Buffer p = AllocateFilled(n, 0.5f), g = AllocateFilled(n, 0.01f), m = AllocateFilled(n, 0), v = AllocateFilled(n, 0);
  if (!p || !g || !m || !v) return Status::ResourceExhausted("cannot allocate " + FormatBytes(4.0 * 4 * n));
  AdamWConfig config;
  config.weight_decay = 0.1;
  int64_t step = 0;
  auto adamw = [&] {
    ++step;
    for (size_t o = 0; o < n; o += shard) {
      AdamWStep(config, step, std::min(shard, n - o), p.get() + o, g.get() + o, m.get() + o, v.get() + o, f.threads);
    }
  };
  auto copy = [&] {
    for (size_t o = 0; o < n; o += shard) {
      float *po = p.get() + o, *mo = m.get() + o, *vo = v.get() + o;
      const float* go = g.get() + o;
      ForEachAdamWChunk(std::min(shard, n - o), f.threads,
                        [&](size_t b, size_t e) { CopyKernel(b, e, po, go, mo, vo); });
    }
  };
  std::vector<Column> columns = {{"adamw", adamw, {}}, {"copy", copy, {}}};
  std::unique_ptr<torch::optim::AdamW> torch_adamw;
  torch::Tensor torch_param;
  if (f.torch) {
    torch::set_num_threads(f.threads);
    torch_param = torch::full({int64_t(n)}, 0.5f).requires_grad_(true);
    torch_param.mutable_grad() = torch::full({int64_t(n)}, 0.01f);
    torch_adamw = std::make_unique<torch::optim::AdamW>(
        std::vector<torch::Tensor>{torch_param}, torch::optim::AdamWOptions(config.lr).weight_decay(0.1));
    columns.push_back({"torch", [&] { torch_adamw->step(); }, {}});
  }
  for (Column& c : columns) c.step();  // warm-up: the pool's threads, torch's moment buffers
  for (int r = 0; r < f.rounds; ++r) {
    for (Column& c : columns) c.gbps.push_back(kBytesPerParam * double(n) / Seconds(c.step) / 1e9);
  }
  std::vector<double> ratio;
  for (int r = 0; r < f.rounds; ++r) ratio.push_back(columns[0].gbps[r] / columns[1].gbps[r]);

  nlohmann::ordered_json out;
  out["params"] = n;
  out["shard"] = shard;
  out["threads"] = f.threads;
  out["bytes_per_param"] = kBytesPerParam;
  out["rounds"] = f.rounds;
  auto summary = [](const std::vector<double>& x) {
    return nlohmann::ordered_json{{"median", Median(x)},
                                  {"min", *std::min_element(x.begin(), x.end())},
                                  {"max", *std::max_element(x.begin(), x.end())},
                                  {"per_round", x}};
  };
  for (const Column& c : columns) out[std::string(c.name) + "_gbps"] = summary(c.gbps);
  out["adamw_over_copy"] = summary(ratio);
  if (f.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("AdamW over %zu fp32 parameters (%s of state, %.0f B/param moved), %zu per call, %d threads\n", n,
              FormatBytes(16.0 * n).c_str(), kBytesPerParam, shard, f.threads);
  std::printf("  %-8s", "ROUND");
  for (const Column& c : columns) std::printf(" %10s", (std::string(c.name) + " GB/s").c_str());
  std::printf(" %12s\n", "adamw/copy");
  for (int r = 0; r < f.rounds; ++r) {
    std::printf("  %-8d", r + 1);
    for (const Column& c : columns) std::printf(" %10.2f", c.gbps[r]);
    std::printf(" %12.3f\n", ratio[r]);
  }
  std::printf("  %-8s", "median");
  for (const Column& c : columns) std::printf(" %10.2f", Median(c.gbps));
  std::printf(" %12.3f\n", Median(ratio));
  std::printf("  %-8s", "min-max");
  for (const Column& c : columns) std::printf(" %10s", Range(c.gbps, 2).c_str());
  std::printf(" %12s\n", Range(ratio, 3).c_str());
  return Status::Ok();
}

}  // namespace

Benchmark AddAdamWBench(CLI::App& app) {
  auto f = std::make_shared<AdamWFlags>();
  CLI::App* cmd = app.add_subcommand(
      "adamw", "AdamW's GB/s (bytes read + written) against a copy of the same bytes on the same threads");
  cmd->add_option("--params", f->params, "fp32 parameters (16 bytes of state each)")->type_name("N")
      ->transform(CliWholeNumber(1, int64_t{1} << 34));
  cmd->add_option("--shard", f->shard, "parameters per AdamWStep call, as the trainer's shards; 0: one call")
      ->type_name("N")->transform(CliWholeNumber(0, int64_t{1} << 34));
  cmd->add_option("--threads", f->threads, "threads per call (default: this machine's cores)")->type_name("T")
      ->transform(CliWholeNumber(1, 1024));
  cmd->add_option("--rounds", f->rounds, "timed rounds of each variant, interleaved")->type_name("N")
      ->transform(CliWholeNumber(1, 10000));
  cmd->add_flag("--torch", f->torch, "also torch::optim::AdamW's step over as many parameters");
  cmd->add_flag("--json", f->json, "one JSON object instead of the table");
  return {cmd, [f] { return RunAdamWBench(*f); }};
}

}  // namespace tencache::bench
