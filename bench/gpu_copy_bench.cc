// tencache-bench gpu-copy: host<->GPU copy speed through the cache's CUDA
// device tier (TierStore::Write/Read: its own copy stream, an event per copy,
// polled until done) against plain cudaMemcpyAsync + cudaStreamSynchronize on
// the same pinned buffers (the tier's overhead), and plain copies from pageable
// memory (what pinning buys). Sizes are copied one at a time, as the cache
// does; the three ways are interleaved round by round and each figure is the
// median over rounds. Needs a GPU: Unavailable (exit 1) without one, saying so.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/benchmarks.h"
#include "cachemgr/device_tier.h"
#include "cachemgr/host_tier.h"
#include "common/byte_size.h"

#if TENCACHE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tencache::bench {
namespace {

struct GpuCopyFlags {
  std::vector<std::string> sizes{"1MiB", "16MiB", "256MiB"};
  int rounds = 7;
  int repeats = 0;  // copies per measurement; 0: enough for ~1 GiB per size
  bool json = false;
};

#if TENCACHE_HAVE_CUDA
Status Cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status::Internal(std::string("gpu-copy: ") + what + ": " + cudaGetErrorString(e));
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status Run(const GpuCopyFlags& f) {
  if (CudaDeviceCount() == 0) {
    return Status::Unavailable("gpu-copy: no CUDA device here (cudaGetDeviceCount); this benchmark needs a GPU");
  }
  std::vector<uint64_t> sizes;
  for (const std::string& s : f.sizes) {
    StatusOr<uint64_t> b = ParseByteSize(s);
    if (!b.ok() || *b == 0) return Status::InvalidArgument("--sizes: expected sizes like 16MiB, got '" + s + "'");
    sizes.push_back(*b);
  }
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  TC_ASSIGN_OR_RETURN(std::unique_ptr<TierStore> dev, MakeDeviceTier(DeviceBackend::kCuda, 0));
  HostTier host(CudaPinnedHostTierOptions());
  TC_ASSIGN_OR_RETURN(uint64_t hbase, host.Reserve(largest));
  TC_ASSIGN_OR_RETURN(uint64_t dbase, dev->Reserve(largest));
  if (!host.pinned()) return Status::Unavailable("gpu-copy: the host buffer could not be pinned: " + host.pin_failure());
  auto* pinned = static_cast<uint8_t*>(host.Address(hbase));
  auto* gpu = static_cast<uint8_t*>(dev->Address(dbase));
  std::unique_ptr<uint8_t[]> pageable(new uint8_t[largest]);
  std::memset(pinned, 1, largest);
  std::memset(pageable.get(), 2, largest);
  cudaStream_t stream;
  TC_RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  const auto timeout = std::chrono::milliseconds(60000);

  nlohmann::ordered_json rows = nlohmann::json::array();
  double worst_h2d = 1e9, worst_d2h = 1e9;
  for (uint64_t bytes : sizes) {
    const int reps = f.repeats > 0 ? f.repeats : int(std::max<uint64_t>(4, (uint64_t(1) << 30) / bytes));
    // way: 0 tier, 1 plain pinned, 2 plain pageable; dir: 0 h2d, 1 d2h.
    std::vector<double> gbps[3][2];
    for (int round = 0; round < f.rounds; ++round) {
      for (int k = 0; k < 3; ++k) {
        const int way = (round + k) % 3;  // rotate the order every round
        for (int dir = 0; dir < 2; ++dir) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int r = 0; r < reps; ++r) {
            if (way == 0) {
              TC_RETURN_IF_ERROR(dir == 0 ? dev->Write(dbase, pinned, bytes, "bench", timeout)
                                          : dev->Read(dbase, pinned, bytes, "bench", timeout));
            } else {
              uint8_t* h = way == 1 ? pinned : pageable.get();
              TC_RETURN_IF_ERROR(Cuda(dir == 0 ? cudaMemcpyAsync(gpu, h, bytes, cudaMemcpyHostToDevice, stream)
                                               : cudaMemcpyAsync(h, gpu, bytes, cudaMemcpyDeviceToHost, stream),
                                      "cudaMemcpyAsync"));
              TC_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
            }
          }
          gbps[way][dir].push_back(double(bytes) * reps / Seconds(t0) / 1e9);
        }
      }
    }
    nlohmann::ordered_json row;
    row["bytes"] = bytes;
    row["copies_per_round"] = reps;
    const char* names[3] = {"tier", "plain", "pageable"};
    const char* dirs[2] = {"h2d", "d2h"};
    for (int dir = 0; dir < 2; ++dir) {
      for (int way = 0; way < 3; ++way) {
        row[std::string(dirs[dir]) + "_" + names[way] + "_gbps"] = Median(gbps[way][dir]);
      }
      const double ratio = Median(gbps[0][dir]) / Median(gbps[1][dir]);
      row[std::string(dirs[dir]) + "_tier_vs_plain"] = ratio;
      row[std::string(dirs[dir]) + "_pinned_vs_pageable"] = Median(gbps[1][dir]) / Median(gbps[2][dir]);
      (dir == 0 ? worst_h2d : worst_d2h) = std::min(dir == 0 ? worst_h2d : worst_d2h, ratio);
    }
    rows.push_back(row);
  }
  cudaStreamDestroy(stream);
  nlohmann::ordered_json out;
  out["benchmark"] = "gpu-copy";
  out["device"] = dev->Describe();
  out["host"] = host.Describe();
  out["rounds"] = f.rounds;
  out["rows"] = rows;
  out["h2d_ratio"] = worst_h2d;  // the worst size's tier / plain
  out["d2h_ratio"] = worst_d2h;
  out["target"] = 0.95;
  if (f.json) {
    std::printf("%s\n", out.dump().c_str());
    return Status::Ok();
  }
  std::printf("gpu-copy on %s, %s; median of %d rounds, GB/s\n", out["device"].get<std::string>().c_str(),
              out["host"].get<std::string>().c_str(), f.rounds);
  std::printf("%12s %10s %10s %10s %10s %10s %10s\n", "bytes", "h2d tier", "h2d plain", "h2d pageable", "d2h tier",
              "d2h plain", "d2h pageable");
  for (const auto& r : rows) {
    std::printf("%12s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", FormatBytes(r["bytes"].get<uint64_t>()).c_str(),
                r["h2d_tier_gbps"].get<double>(), r["h2d_plain_gbps"].get<double>(),
                r["h2d_pageable_gbps"].get<double>(), r["d2h_tier_gbps"].get<double>(),
                r["d2h_plain_gbps"].get<double>(), r["d2h_pageable_gbps"].get<double>());
  }
  std::printf("tier / plain, worst size: h2d %.3f, d2h %.3f (target >= 0.95)\n", worst_h2d, worst_d2h);
  return Status::Ok();
}
#else
Status Run(const GpuCopyFlags&) {
  return Status::Unavailable("gpu-copy: tencache-bench was built without CUDA (configure with -DTENCACHE_CUDA=ON)");
}
#endif

}  // namespace

Benchmark AddGpuCopyBench(CLI::App& app) {
  auto flags = std::make_shared<GpuCopyFlags>();
  CLI::App* c = app.add_subcommand("gpu-copy", "Host<->GPU copies through the CUDA device tier against plain "
                                               "cudaMemcpyAsync, pinned and pageable (needs a GPU)");
  c->add_option("--sizes", flags->sizes, "copy sizes")->delimiter(',')->capture_default_str();
  c->add_option("--rounds", flags->rounds, "interleaved rounds (median)")->check(CLI::Range(1, 1000))->capture_default_str();
  c->add_option("--repeats", flags->repeats, "copies per measurement (0: ~1 GiB per size)")->check(CLI::Range(0, 1000000));
  c->add_flag("--json", flags->json, "print one JSON object");
  return {c, [flags] { return Run(*flags); }};
}

}  // namespace tencache::bench
