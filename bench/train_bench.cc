// tencache-bench train: offloaded training against in-memory training, side by
// side in one process. A GPT whose states are several times the device budget
// trains a few steps under each policy — none (every shard in ordinary memory:
// the reference), tencache (profiled plan: prefetch + next-use eviction),
// no-prefetch (the plan's eviction, fetches on demand), zero-infinity
// (DeepSpeed's coordinator) and lru (no plan) — in
// two regimes: compute-bound (a large micro-batch per byte moved) and
// I/O-bound (a small one). The variants take their steps in turn, and the
// report gives the median steady-state step time of each and its ratio to the
// reference.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/benchmarks.h"
#include "common/byte_size.h"
#include "common/cli.h"
#include "common/model_shape.h"
#include "launcher/resource_model.h"
#include "worker/compute_device.h"
#include "worker/omp_wait_policy.h"
#include "worker/trainer.h"

namespace tencache::bench {
namespace {

struct Variant {
  const char* name;
  const char* policy;
  bool prefetch;
  bool overlap = true;  // train.optimizer_overlap on; off: every update on the training thread
};
// The "-serial" variants update on the training thread (train.optimizer_overlap
// off), for the side-by-side comparison with the optimizer lane.
const Variant kVariants[] = {{"none", "none", true},
                             {"tencache", "tencache", true},
                             {"no-prefetch", "tencache", false},
                             {"zero-infinity", "zero-infinity", true},
                             {"lru", "lru", true},
                             {"none-serial", "none", true, false},
                             {"tencache-serial", "tencache", true, false}};

struct Regime {
  const char* name;
  int micro_batch;
  int seq_len;
  // The job's model (YAML flow mapping) and, when set, the regime's own cache
  // budgets in place of --device-budget / --host-budget.
  const char* model = kSmallModel;
  const char* device_budget = nullptr;
  const char* host_budget = nullptr;
  bool in_all = true;  // run by --regime all
  // The regime's own; otherwise the flag when given, or kDevicePerParamMiB
  // times the dtype's bytes per parameter.
  std::string DeviceBudget(const std::string& flag, DType dtype) const {
    if (device_budget) return device_budget;
    if (!flag.empty()) return flag;
    return std::to_string(kDevicePerParamMiB * DTypeBytes(dtype)) + "MiB";
  }
  std::string HostBudget(const std::string& flag) const { return host_budget ? host_budget : flag; }
  // The small model's device budget, MiB per byte of a parameter: 4 MiB for
  // 2-byte parameters (two of its 1.5 MiB layer blocks at a time), 8 MiB for
  // fp32's 3 MiB blocks, so that the device holds the same share of the
  // parameters in either dtype.
  static constexpr int kDevicePerParamMiB = 2;
  static constexpr const char* kSmallModel =
      "{layers: 4, hidden: 256, heads: 4, ffn_hidden: 1024, seq_len: 128, vocab: 256}";
};
// nvme: GPT-2 124M (about 2 GB of fp32 masters and moments in mixed precision)
// with the least host budget the worker accepts for it (kLeast:
// launcher/resource_model.h LeastHostBudget), so most of the optimizer state
// lives on NVMe.
constexpr const char* kLeast = "least";
const Regime kRegimes[] = {{"compute-bound", 8, 128},
                           {"io-bound", 1, 32},
                           {"nvme", 1, 128, "{preset: gpt2, seq_len: 128}", "256MiB", kLeast, false}};

struct TrainFlags {  // the flags, with their defaults
  int steps = 8;
  std::string device_budget;  // empty: the regime's (Regime::DeviceBudget)
  std::string host_budget = "24MiB";
  std::string nvme_dir = "/tmp/tencache-train-bench";
  std::string data = "/usr/share/common-licenses/GPL-3";
  std::string regime = "all";
  std::string dtype = "bf16";
  // The parameters' dtype the flag names (checked to be bf16 or fp32).
  DType ParamDType() const { return dtype == DTypeName(DType::kFp32) ? DType::kFp32 : DType::kBf16; }
  std::vector<std::string> variants;  // empty: every variant; "none" always runs (the reference)
  // torch compute threads. One leaves the other cores to the cache's threads,
  // as a GPU machine's CPU is left to them while the GPU computes; a one-rank
  // worker computes on every core (ComputeThreadsPerRank).
  int threads = 1;
  bool json = false;
};

struct Outcome {
  std::string variant;
  double step_s = 0;  // median over steady-state steps
  double hit_rate = 0, stall_s = 0, bytes_moved = 0, allocations = 0;
  double nvme_read = 0, nvme_write = 0;  // bytes per steady-state step
  double nvme_held = 0;                  // most bytes on NVMe at a step's end
  double overlap = 0;  // median over steady-state steps of the busiest lane / step time
  double optimizer_wait_s = 0;  // mean per steady-state step: the training thread's time in the optimizer
  LaneBusy lanes;      // mean busy seconds per steady-state step
};

// The regime's job for variant `v`, with the regime's (or the flag's) host
// budget; kLeast: the least the worker accepts for the job's model.
StatusOr<JobSpec> RegimeJob(const Variant& v, const Regime& r, const TrainFlags& f, const TokenCorpus& corpus) {
  const std::string nvme = f.nvme_dir + "/" + v.name;
  const std::vector<std::string> sets = {
      "cache.policy=" + std::string(v.policy),        "cache.prefetch=" + std::string(v.prefetch ? "true" : "false"),
      "cache.device_budget=" + r.DeviceBudget(f.device_budget, f.ParamDType()), "cache.nvme_path=" + nvme,
      "train.micro_batch=" + std::to_string(r.micro_batch), "train.global_batch=" + std::to_string(r.micro_batch),
      "model.seq_len=" + std::to_string(r.seq_len),   "model.dtype=" + f.dtype,
      std::string("train.optimizer_overlap=") + (v.overlap ? "on" : "off")};
  const std::string job_text =
      "name: bench\nmodel: " + std::string(r.model) + "\ntrain: {data: " + corpus.path() + ", lr: 1.0e-3, seed: 1}\n";
  auto with_host = [&](const std::string& host_budget) {
    std::vector<std::string> all = sets;
    all.push_back("cache.host_budget=" + host_budget);
    return ParseJobText(job_text, "train-bench", all);
  };
  const std::string host_budget = r.HostBudget(f.host_budget);
  if (host_budget != kLeast) return with_host(host_budget);
  TC_ASSIGN_OR_RETURN(JobSpec probe, with_host("1GiB"));  // a placeholder, to learn the model
  return with_host(std::to_string(LeastHostBudget(probe.model, probe.dtype, 1)));
}

StatusOr<std::unique_ptr<Trainer>> MakeTrainer(const Variant& v, const Regime& r, const TrainFlags& f,
                                               std::shared_ptr<const TokenCorpus> corpus, Communicator* comm) {
  std::filesystem::create_directories(f.nvme_dir + "/" + v.name);
  TC_ASSIGN_OR_RETURN(JobSpec job, RegimeJob(v, r, f, *corpus));
  return Trainer::Create(job, comm, corpus, [](const std::string&) {});
}

// All variants train side by side, one step each in turn (the order rotating
// every round), so that a drift in the machine's speed (this one's is noisy)
// hits every variant alike.
StatusOr<std::vector<Outcome>> RunRegime(const Regime& r, const TrainFlags& f, int steps,
                                         std::shared_ptr<const TokenCorpus> corpus) {
  std::vector<const Variant*> variants;  // the reference first
  for (const Variant& v : kVariants) {
    const bool chosen = f.variants.empty() || v.name == std::string("none") ||
                        std::find(f.variants.begin(), f.variants.end(), v.name) != f.variants.end();
    if (chosen) variants.push_back(&v);
  }
  const size_t n = variants.size();
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<Outcome> out(n);
  std::vector<std::vector<double>> times(n), overlaps(n);
  for (size_t i = 0; i < n; ++i) {
    comms.push_back(MakeSoloCommunicator());
    TC_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> t, MakeTrainer(*variants[i], r, f, corpus, comms.back().get()));
    trainers.push_back(std::move(t));
    out[i].variant = variants[i]->name;
  }
  const double counted = steps - 2;
  for (int s = 0; s < steps; ++s) {
    // Each round starts with the next variant, so the copies one variant's
    // step leaves in flight land in every other variant's steps alike.
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + size_t(s)) % n;
      TC_ASSIGN_OR_RETURN(StepMetrics m, trainers[i]->Step());
      if (s < 2) continue;  // step 0 profiles, step 1 refills what the profile step left
      times[i].push_back(m.step_time_s);
      overlaps[i].push_back(m.overlap_efficiency);
      for (int l = 0; l < kStepLanes; ++l) out[i].lanes.seconds[l] += m.lanes.seconds[l] / counted;
      out[i].hit_rate += m.device_hit_rate / counted;
      out[i].stall_s += m.stall_s / counted;
      out[i].optimizer_wait_s += m.optimizer_wait_s / counted;
      out[i].bytes_moved += m.bytes.Total() / counted;
      out[i].nvme_read += m.bytes[Link::kNvmeRead] / counted;
      out[i].nvme_write += m.bytes[Link::kNvmeWrite] / counted;
      out[i].nvme_held = std::max(out[i].nvme_held, m.nvme_used_bytes);
      out[i].allocations += m.allocations_after_warmup;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    out[i].step_s = Median(times[i]);
    out[i].overlap = Median(overlaps[i]);
  }
  trainers.clear();
  for (const Variant* v : variants) std::filesystem::remove_all(f.nvme_dir + "/" + v->name);
  return out;
}

Status RunTrainBench(const TrainFlags& f) {
  const std::string& regime = f.regime;
  TC_ASSIGN_OR_RETURN(std::shared_ptr<TokenCorpus> corpus, TokenCorpus::Open(f.data));

  // Set, not torch's default, which differs between machines of the same shape.
  const int blas_threads = SetComputeThreads(f.threads);
  nlohmann::ordered_json out;
  out["dtype"] = f.dtype;
  out["compute_threads"] = torch::get_num_threads();
  out["openblas_threads"] = blas_threads;
  out["omp_wait_policy"] = OmpWaitPolicy();
  out["regimes"] = nlohmann::ordered_json::array();
  // The variants' folders go at each regime's end; the folder above them too
  // where this run made it.
  struct RemoveIfMade {
    std::string dir;
    bool made;
    ~RemoveIfMade() {
      std::error_code ec;
      if (made) std::filesystem::remove(dir, ec);  // only when empty
    }
  } nvme_dir{f.nvme_dir, !std::filesystem::exists(f.nvme_dir)};
  for (const Regime& r : kRegimes) {
    if (regime == "all" ? !r.in_all : regime != r.name) continue;
    const std::string device_budget = r.DeviceBudget(f.device_budget, f.ParamDType());
    TC_ASSIGN_OR_RETURN(JobSpec job, RegimeJob(kVariants[1], r, f, *corpus));
    const std::string host_budget = FormatBytes(double(job.cache.host_budget.value_or(0)));
    TC_ASSIGN_OR_RETURN(std::vector<Outcome> results, RunRegime(r, f, f.steps, corpus));
    const double reference = results[0].step_s;
    nlohmann::ordered_json reg;
    reg["regime"] = r.name;
    reg["micro_batch"] = r.micro_batch;
    reg["seq_len"] = r.seq_len;
    reg["model"] = r.model;
    reg["device_budget"] = device_budget;
    reg["host_budget"] = host_budget;
    reg["results"] = nlohmann::ordered_json::array();
    if (!f.json) {
      std::printf("\n%s (model %s, micro_batch %d, seq_len %d, %s, device %s, host %s, %d compute threads, "
                  "OMP_WAIT_POLICY %s): reference step %.3f s\n",
                  r.name, r.model, r.micro_batch, r.seq_len, f.dtype.c_str(), device_budget.c_str(),
                  host_budget.c_str(), torch::get_num_threads(), OmpWaitPolicy(), reference);
      std::printf("  %-13s %9s %8s %9s %9s %12s %21s %10s %7s %8s %-11s\n", "POLICY", "STEP s", "x NONE", "DEV HIT",
                  "STALL s", "MOVED/STEP", "NVME READ/WRITE/STEP", "NVME HELD", "ALLOCS", "OVERLAP", "BOUND LANE");
    }
    for (const Outcome& o : results) {
      reg["results"].push_back({{"policy", o.variant}, {"step_time_s", o.step_s}, {"ratio_to_none", o.step_s / reference},
                                {"device_hit_rate", o.hit_rate}, {"stall_s", o.stall_s},
                                {"optimizer_wait_s", o.optimizer_wait_s},
                                {"bytes_moved_per_step", o.bytes_moved}, {"nvme_read_per_step", o.nvme_read},
                                {"nvme_write_per_step", o.nvme_write}, {"nvme_held_bytes", o.nvme_held},
                                {"allocations_after_warmup", o.allocations},
                                {"overlap_efficiency", o.overlap}, {"lane_busy_s", o.lanes.ToJson()},
                                {"bound_lane", StepLaneName(o.lanes.Largest())}});
      if (!f.json) {
        const std::string nvme = FormatBytes(o.nvme_read) + " / " + FormatBytes(o.nvme_write);
        std::printf("  %-13s %9.3f %8.2f %9.3f %9.4f %12s %21s %10s %7.0f %8.3f %-11s\n", o.variant.c_str(), o.step_s,
                    o.step_s / reference, o.hit_rate, o.stall_s, FormatBytes(o.bytes_moved).c_str(), nvme.c_str(),
                    FormatBytes(o.nvme_held).c_str(), o.allocations, o.overlap, StepLaneName(o.lanes.Largest()));
      }
    }
    out["regimes"].push_back(reg);
  }
  if (f.json) std::printf("%s\n", out.dump(2).c_str());
  return Status::Ok();
}

}  // namespace

Benchmark AddTrainBench(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "train", "step time of offloaded training (tencache, no-prefetch, zero-infinity, lru) against in-memory training");
  cmd->add_option("--steps", f->steps, "steps per variant, the first two warm-up")->type_name("N")
      ->transform(CliWholeNumber(3, 100000));
  cmd->add_option("--device-budget", f->device_budget,
                  "cache.device_budget (compute-bound and io-bound; default 4MiB in bf16, 8MiB in fp32: two layer "
                  "blocks)")
      ->type_name("SIZE")->check(CliByteSize());
  cmd->add_option("--host-budget", f->host_budget, "cache.host_budget (compute-bound and io-bound)")
      ->type_name("SIZE")->check(CliByteSize());
  cmd->add_option("--nvme-dir", f->nvme_dir, "where the NVMe tiers' files go")->type_name("DIR");
  cmd->add_option("--data", f->data, "the text to train on")->type_name("FILE");
  cmd->add_option("--regime", f->regime,
                  "all (compute-bound and io-bound), compute-bound, io-bound, or nvme (GPT-2 124M, device 256 MiB, "
                  "the least host budget the worker accepts: most optimizer state on NVMe)")
      ->type_name("NAME")->check(CliOneOf({"all", "compute-bound", "io-bound", "nvme"}));
  cmd->add_option("--dtype", f->dtype, "bf16 (mixed precision: fp32 masters and AdamW) or fp32")->type_name("T")
      ->check(CliOneOf({"bf16", "fp32"}));
  cmd->add_option("--variants", f->variants,
                  "the variants to run beside the in-memory reference (none), comma-separated; all by default. "
                  "none-serial and tencache-serial update on the training thread (train.optimizer_overlap off)")
      ->type_name("LIST")->delimiter(',')->check(CliOneOf({"tencache", "no-prefetch", "zero-infinity", "lru", "none-serial", "tencache-serial"}));
  cmd->add_option("--threads", f->threads,
                  "compute threads, torch's and OpenBLAS's (default 1: the other cores left to the cache's threads; a one-rank worker "
                  "would use " + std::to_string(ComputeThreadsPerRank(1)) + ")")
      ->type_name("N")->transform(CliWholeNumber(1, 1024));
  cmd->add_flag("--json", f->json, "one JSON object instead of the tables");
  return {cmd, [f] { return RunTrainBench(*f); }};
}

}  // namespace tencache::bench
