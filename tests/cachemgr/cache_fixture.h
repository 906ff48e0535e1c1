// Builds small TensorCaches over the simulated device, host and NVMe tiers in a
// temporary directory, for the tensor cache tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>

#include "cachemgr/device_tier.h"
#include "cachemgr/fault_injection_file_env.h"
#include "cachemgr/host_tier.h"
#include "cachemgr/tensor_cache.h"
#include "gated_tier.h"
#include "test_util.h"

namespace tencache::testing {

inline std::vector<TensorSpec> UniformSpecs(int n, uint64_t bytes, Tier home = Tier::kNvme) {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < n; ++i)
    specs.push_back({static_cast<TensorId>(i), "t" + std::to_string(i), bytes, ElementType::kFloat32, home});
  return specs;
}

// The simulated device (or `device`, e.g. a GatedTierStore), an unpinned host
// tier and an NVMe tier in `dir` (through `env`, nullptr: POSIX).
inline TierSet MakeTiers(const TempDir& dir, FileEnv* env = nullptr, std::unique_ptr<TierStore> device = nullptr) {
  TierSet tiers;
  tiers.device = device ? std::move(device) : std::move(MakeDeviceTier(DeviceBackend::kSimulatedHost).value());
  HostTierOptions ho;
  ho.pin = false;  // keep tests independent of RLIMIT_MEMLOCK
  tiers.host = std::make_unique<HostTier>(ho);
  NvmeTierOptions no;
  no.dir = dir.path();
  no.queue_depth = 8;
  no.block_size = 64 << 10;
  no.env = env;
  tiers.nvme = std::move(NvmeTier::Open(no).value());
  return tiers;
}

// The NVMe file MakeTiers' tier uses (rank 0).
inline std::string NvmeFile(const TempDir& dir) { return dir.path() + "/rank-0.tcnvme"; }

inline StatusOr<std::unique_ptr<TensorCache>> TryMakeCache(const TempDir& dir, TensorCacheOptions options,
                                                           std::vector<TensorSpec> specs) {
  return TensorCache::Create(options, std::move(specs), MakeTiers(dir));
}

// `device`: the device store (nullptr: a fresh simulated one), e.g. a GatedTierStore.
inline std::unique_ptr<TensorCache> MakeCache(const TempDir& dir, TensorCacheOptions options,
                                              std::vector<TensorSpec> specs, FileEnv* env = nullptr,
                                              std::unique_ptr<TierStore> device = nullptr) {
  auto cache = TensorCache::Create(options, std::move(specs), MakeTiers(dir, env, std::move(device)));
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  return cache.ok() ? std::move(*cache) : nullptr;
}

// A cache whose device tier is a GatedTierStore over a simulated one; *gate
// points at it (owned by the cache).
inline std::unique_ptr<TensorCache> MakeGatedCache(const TempDir& dir, TensorCacheOptions options,
                                                   std::vector<TensorSpec> specs, GatedTierStore** gate) {
  auto gated = std::make_unique<GatedTierStore>(MakeDeviceTier(DeviceBackend::kSimulatedHost).value());
  *gate = gated.get();
  return MakeCache(dir, std::move(options), std::move(specs), nullptr, std::move(gated));
}

// Writes a pattern from `seed` into tensor `id` in `tier` (a gtest failure if the acquire fails).
inline void WriteTensor(TensorCache* c, TensorId id, uint32_t seed, Tier tier,
                        std::chrono::milliseconds wait = std::chrono::milliseconds(10000)) {
  auto h = c->Acquire(id, tier, AccessMode::kWrite, wait);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  FillPattern(static_cast<uint8_t*>(h->data()), h->bytes(), seed);
}

// Whether tensor `id` in `tier` holds the pattern from `seed`.
inline bool ReadMatches(TensorCache* c, TensorId id, uint32_t seed, Tier tier,
                        std::chrono::milliseconds wait = std::chrono::milliseconds(10000)) {
  auto h = c->Acquire(id, tier, AccessMode::kRead, wait);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return h.ok() && CheckPattern(static_cast<uint8_t*>(h->data()), h->bytes(), seed);
}

}  // namespace tencache::testing
