// tencache-bench cache: a synthetic training trace through all three tiers. Each
// step runs a forward pass (weights read on the device), a backward pass (weights
// read, gradients written on the device) and a CPU optimizer pass (gradients read
// and weights written on the host), with a prefetch window ahead of every acquire
// and a next-use oracle built from the trace. Step 0 is the warm-up. Reports pool
// allocations after warm-up and the host tier's utilisation at peak, and checks
// every byte read against what was last written.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "bench/benchmarks.h"
#include "cachemgr/device_tier.h"
#include "cachemgr/host_tier.h"
#include "cachemgr/step_order.h"
#include "cachemgr/tensor_cache.h"
#include "common/byte_size.h"
#include "common/cli.h"

namespace tencache::bench {
namespace {

struct Access {
  TensorId id;
  Tier tier;
  AccessMode mode;
};

// Per layer: a 4 MiB and two 1 MiB weights, two odd-sized biases, and a gradient for each.
std::vector<TensorSpec> ModelTensors(int layers) {
  std::vector<TensorSpec> specs;
  auto add = [&](const std::string& name, uint64_t bytes) {
    specs.push_back({static_cast<TensorId>(specs.size()), name, bytes, ElementType::kFloat16, Tier::kNvme});
  };
  add("embed.w", 8 << 20);
  add("embed.g", 8 << 20);
  const uint64_t sizes[] = {4 << 20, 1 << 20, 1 << 20, 12388, 12388};
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < 5; ++k) {
      add("l" + std::to_string(l) + ".w" + std::to_string(k), sizes[k]);
      add("l" + std::to_string(l) + ".g" + std::to_string(k), sizes[k]);
    }
  return specs;
}

std::vector<Access> StepTrace(int layers) {
  auto w = [](int l, int k) { return static_cast<TensorId>(l < 0 ? 0 : 2 + l * 10 + k * 2); };
  std::vector<Access> trace;
  trace.push_back({w(-1, 0), Tier::kDevice, AccessMode::kRead});
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < 5; ++k) trace.push_back({w(l, k), Tier::kDevice, AccessMode::kRead});
  for (int l = layers - 1; l >= 0; --l)
    for (int k = 4; k >= 0; --k) {
      trace.push_back({w(l, k), Tier::kDevice, AccessMode::kRead});
      trace.push_back({w(l, k) + 1, Tier::kDevice, AccessMode::kWrite});
    }
  trace.push_back({1, Tier::kDevice, AccessMode::kWrite});
  trace.push_back({1, Tier::kHost, AccessMode::kRead});
  trace.push_back({0, Tier::kHost, AccessMode::kWrite});
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < 5; ++k) {
      trace.push_back({w(l, k) + 1, Tier::kHost, AccessMode::kRead});
      trace.push_back({w(l, k), Tier::kHost, AccessMode::kWrite});
    }
  return trace;
}

uint8_t Expected(TensorId id, uint32_t version, uint64_t i) {
  return static_cast<uint8_t>((id * 131u + version * 17u + (i >> 12)) & 0xFF);
}

struct CacheBenchConfig {  // the flags, with their defaults
  std::string dir = "/tmp";
  uint64_t device_budget = 40 * kMiB, host_budget = 120 * kMiB;
  int layers = 24, steps = 5, lookahead = 8;
  bool json = false;
};

StatusOr<std::unique_ptr<TensorCache>> BuildCache(const CacheBenchConfig& c, const std::string& dir,
                                                  std::vector<TensorSpec> specs) {
  TierSet tiers;
  TC_ASSIGN_OR_RETURN(tiers.device, MakeDeviceTier(DeviceBackend::kSimulatedHost));
  tiers.host = std::make_unique<HostTier>();
  NvmeTierOptions no;
  no.dir = dir;
  TC_ASSIGN_OR_RETURN(tiers.nvme, NvmeTier::Open(no));
  TensorCacheOptions o;
  o.device_budget = c.device_budget;
  o.host_budget = c.host_budget;
  o.min_device_slots_per_class = 2;
  o.min_host_slots_per_class = 2;
  return TensorCache::Create(o, std::move(specs), std::move(tiers));
}

// Runs one step; counts bytes that did not match what was last written.
Status RunStep(TensorCache* cache, const std::vector<Access>& trace, int lookahead,
               std::vector<uint32_t>* version, uint64_t* bad_bytes) {
  const std::chrono::milliseconds timeout(60000);
  for (size_t k = 0; k < trace.size(); ++k) {
    const Access& a = trace[k];
    const Access& ahead = trace[(k + lookahead) % trace.size()];
    cache->Prefetch(ahead.id, ahead.tier);
    TC_ASSIGN_OR_RETURN(TensorHandle h, cache->Acquire(a.id, a.tier, a.mode, timeout));
    auto* p = static_cast<uint8_t*>(h.data());  // the simulated device is host memory
    const uint32_t v = (*version)[a.id];
    for (uint64_t i = 0; i < h.bytes(); i += 4096) *bad_bytes += p[i] != (v == 0 ? 0 : Expected(a.id, v, i));
    if (a.mode == AccessMode::kWrite) {
      (*version)[a.id] = v + 1;
      for (uint64_t i = 0; i < h.bytes(); i += 4096) p[i] = Expected(a.id, v + 1, i);
    }
    TC_RETURN_IF_ERROR(cache->Release(&h));
  }
  return Status::Ok();
}

Status RunCacheBench(const CacheBenchConfig& c) {
  const std::string dir = c.dir + "/tencache-bench-cache-" + std::to_string(::getpid());
  std::vector<TensorSpec> specs = ModelTensors(c.layers);
  uint64_t total = 0;
  for (const auto& s : specs) total += s.bytes;
  const std::vector<Access> trace = StepTrace(c.layers);
  std::vector<TensorId> order;
  for (const Access& a : trace) order.push_back(a.id);
  const StepOrder<AcquireIndex> oracle(std::move(order), specs.size());  // the scheduler's plan, in miniature
  const size_t n = specs.size();
  auto cache_or = BuildCache(c, dir, std::move(specs));
  if (!cache_or.ok()) {
    std::filesystem::remove_all(dir);
    return cache_or.status();
  }
  std::unique_ptr<TensorCache> cache = std::move(*cache_or);
  cache->SetNextUseOracle(&oracle);
  std::vector<uint32_t> version(n, 0);
  uint64_t bad = 0, alloc_after_warmup_base = 0;
  double host_util = 0;
  std::vector<CacheMetrics> steps;
  Status st;
  for (int s = 0; s < c.steps && st.ok(); ++s) {
    st = RunStep(cache.get(), trace, c.lookahead, &version, &bad);
    steps.push_back(cache->EndStep());
    if (s == 0) alloc_after_warmup_base = steps.back().allocations_after_setup;
    else host_util = std::max(host_util, steps.back().host_utilization());
  }
  const std::string describe = cache->Describe();
  cache.reset();
  std::filesystem::remove_all(dir);
  TC_RETURN_IF_ERROR(st);
  const CacheMetrics& last = steps.back();
  const uint64_t alloc_after_warmup = last.allocations_after_setup - alloc_after_warmup_base;
  const TierMetrics& d = last.tier(Tier::kDevice);
  nlohmann::ordered_json j;
  j["allocations_after_warmup"] = alloc_after_warmup;
  j["host_utilization"] = host_util;
  j["allocations_during_warmup"] = alloc_after_warmup_base;
  j["device_hit_rate_last_step"] = d.hits + d.misses ? double(d.hits) / (d.hits + d.misses) : 0.0;
  j["stall_seconds_last_step"] = last.stall_seconds;
  j["corrupt_bytes_seen"] = bad;
  j["tensors"] = n;
  j["tensor_bytes"] = total;
  j["accesses_per_step"] = trace.size();
  j["tiers"] = describe;
  j["steps"] = nlohmann::json::array();
  for (const CacheMetrics& m : steps) j["steps"].push_back(nlohmann::ordered_json::parse(m.ToJson()));
  if (c.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("tencache-bench cache: %zu tensors (%s), %zu accesses/step, %d steps (step 0 warm-up)\n  %s\n",
                n, FormatBytes(total).c_str(), trace.size(), c.steps, describe.c_str());
    for (const CacheMetrics& m : steps)
      std::printf("  step %llu: device hits %llu misses %llu, nvme->host %s, host->nvme %s, stall %.3fs, host util %.3f\n",
                  (unsigned long long)m.step, (unsigned long long)m.tier(Tier::kDevice).hits,
                  (unsigned long long)m.tier(Tier::kDevice).misses, FormatBytes(m.link(Link::kNvmeRead).bytes).c_str(),
                  FormatBytes(m.link(Link::kNvmeWrite).bytes).c_str(), m.stall_seconds, m.host_utilization());
    std::printf("  allocations after warm-up: %llu (during warm-up: %llu)\n  host utilisation at peak: %.3f\n"
                "  corrupt bytes seen: %llu\n",
                (unsigned long long)alloc_after_warmup, (unsigned long long)alloc_after_warmup_base, host_util,
                (unsigned long long)bad);
  }
  if (bad != 0) return Status::Corruption("cache bench: " + std::to_string(bad) + " sampled bytes differed from what was written");
  return Status::Ok();
}

}  // namespace

Benchmark AddCacheBench(CLI::App& app) {
  auto c = std::make_shared<CacheBenchConfig>();
  CLI::App* cmd = app.add_subcommand("cache", "a synthetic multi-step trace through device, host and NVMe tiers");
  cmd->add_option("--dir", c->dir, "where the NVMe tier's file goes")->type_name("DIR");
  AddSizeOption(*cmd, "--device-budget", &c->device_budget, "device tier memory");
  AddSizeOption(*cmd, "--host-budget", &c->host_budget, "host tier memory");
  cmd->add_option("--layers", c->layers, "model layers")->type_name("N")->transform(CliWholeNumber(1, 1000));
  cmd->add_option("--steps", c->steps, "steps, step 0 the warm-up")->type_name("N")->transform(CliWholeNumber(2, 100));
  cmd->add_option("--lookahead", c->lookahead, "accesses the prefetch runs ahead")->type_name("N")
      ->transform(CliWholeNumber(1, 1000));
  cmd->add_flag("--json", c->json, "one JSON object instead of the report");
  return {cmd, [c] { return RunCacheBench(*c); }};
}

}  // namespace tencache::bench
