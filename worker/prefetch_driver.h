// PrefetchDriver: what a cache policy does around the training thread's device
// accesses — the worker's counterpart of tencache-sim's SimPolicy
// (scheduler/sim_engine.h). One implementation per policy: plan-driven
// (tencache, worker/planned_prefetch.h), ZeRO-Infinity
// (worker/zero_infinity_prefetcher.h) and demand-only (lru, none: the cache
// fetches on a miss and evicts by its own rule).
//
// The Trainer calls a driver for training accesses only (never while
// evaluating or sampling), in this order each step: BeginStep; then for device
// access k = 0, 1, ... (a DeviceAccessIndex, scheduler/trace.h) BeforeAccess(k)
// (once or more), OnAccess(k, block) once its parameters are acquired on the
// device, AfterAccess(k, block) once its compute ended. An error from any of
// them (a cache I/O failure) fails the step. Optimizer updates between
// accesses ask KeepsOnDeviceAfterUpdate; the step that becomes the profile ends
// with OnNewProfile.
// Training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cachemgr/types.h"
#include "common/job_spec.h"
#include "common/status.h"
#include "scheduler/trace.h"
#include "worker/shard_store.h"

namespace tencache {

class LinkCalibrator;  // worker/link_calibrator.h
class Profiler;        // scheduler/profiler.h

// The step whose accesses became the profile, as it ended.
struct ProfiledStep {
  const Trace& profile;                       // its trace
  const CacheMetrics& cache;                  // its cache traffic
  const std::vector<TensorId>& acquire_order; // the cache ids it acquired, in order
};

class PrefetchDriver {
 public:
  virtual ~PrefetchDriver() = default;
  virtual const char* name() const = 0;
  // Before the step's first access.
  virtual void BeginStep() {}
  // Device access k is next: issue what the policy fetches ahead of it. Called
  // as access k-1 is released and again as access k gathers; acts once per k.
  virtual Status BeforeAccess(DeviceAccessIndex k) { return Status::Ok(); }
  // Device access k's parameters (`block`) are acquired on the device; its
  // compute follows.
  virtual Status OnAccess(DeviceAccessIndex k, int block) { return Status::Ok(); }
  // Device access k's compute ended.
  virtual Status AfterAccess(DeviceAccessIndex k, int block) { return Status::Ok(); }
  // Whether `block`'s parameters, on the device when its update (after device
  // access k) began, must be copied back there once the update rewrote them on
  // the host: the policy keeps them on the device until their next use.
  virtual bool KeepsOnDeviceAfterUpdate(int block, DeviceAccessIndex k) const { return false; }
  // The step that became the profile (the first, or one that diverged) ended.
  virtual Status OnNewProfile(const ProfiledStep& step) { return Status::Ok(); }
  // Fetches the driver issued since the previous call (StepMetrics::prefetches).
  virtual int TakeFetchesIssued() { return 0; }
};

// What a driver may use of the Trainer, all owned by it and outliving the driver.
struct PrefetchDriverContext {
  const JobSpec* job = nullptr;
  ShardStore* store = nullptr;
  const ShardLayout* layout = nullptr;
  const Profiler* profiler = nullptr;      // following(): the step so far matches the profile
  LinkCalibrator* calibrator = nullptr;    // the links and budgets a plan is built for
  std::vector<bool> reads_stored_gradient; // per block: its update adds a stored gradient in
  uint64_t state_bytes = 0;                // this rank's shards of every kind: the "auto" host budget
  std::function<void(const std::string&)> log;
};

// A policy's eviction of `block`'s parameters from the device (its plan or its
// release rule chose them): the one rule every driver applies. true: they are
// gone; false: a handle pins them or a mover copies them, so they stay (the
// policy may retry later; the cache evicts by its own rule when it needs the
// room). An error is the eviction's write-back failing: it names the block and
// `why` (what the eviction was for) and fails the step.
// REQUIRES: store->cache() != nullptr.
StatusOr<bool> EvictParamsFromDevice(ShardStore* store, int block, const std::string& why);

// The driver of job.cache.policy: plan-driven for tencache and ZeRO-Infinity's
// coordinator for zero-infinity on a cached store; demand-only otherwise.
std::unique_ptr<PrefetchDriver> MakePrefetchDriver(PrefetchDriverContext context);

}  // namespace tencache
