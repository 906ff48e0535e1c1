// ZeroInfinityCoordinator: DeepSpeed ZeRO-3's PartitionedParameterCoordinator
// (deepspeed/runtime/zero/partitioned_param_coordinator.py), the one copy of its
// decisions that the simulator's zero-infinity policy and the worker's
// ZeroInfinityPrefetcher adapt to their caches. It owns the recorded access
// order, the trace mode, the prefetch cursor, the fetches it has in flight and
// the keep-until marks; it asks the cache it drives through a
// ZeroInfinityCacheView and returns "release or keep" to the caller.
// Keys are dense ids in [0, elements.size()): one per parameter tensor.
// One thread drives a coordinator; not thread-safe.
//
// Rules (DeepSpeed's, with the knobs of ZeroInfinityKnobs):
// - Trace: INVALID -> RECORD at the first BeginStep; the accesses of that step are
//   recorded; the next BeginStep makes it COMPLETE. In COMPLETE an access that
//   differs from the trace invalidates it (fetch on demand until the next-but-one
//   step). Until COMPLETE nothing is prefetched and everything is released after use.
// - After access k's tensor is on the device, the walk continues from where it
//   stopped (at least k + 1) to the end of the step's trace while the elements it
//   started fetching stay below min(max_live_parameters - live, prefetch_bucket_size):
//   tensors on the device are skipped (marked keep-until), the walk stops at the
//   first tensor whose only copy is on NVMe, at max_in_flight fetches in flight,
//   and when the cache cannot start a fetch.
// - After access k the tensor is kept when its next use in the step's trace
//   comes after fewer than max_reuse_distance elements (those of the accesses
//   strictly between), or when the walk passed a use of it at k + 2 or later while
//   it was on the device (DeepSpeed compares with its step id, already k + 1 at
//   release); otherwise it is released. The window ends with the step's trace.
//
// Deliberate differences from DeepSpeed:
// - max_in_flight bounds the prefetches this walk may have outstanding. DeepSpeed
//   issues a walk's parameters as one coalesced all-gather, unbounded in count, and
//   its constant 2 (__max_ongoing_fetch_events) bounds how many completed-wait
//   events the host thread runs ahead of the all-gather stream before it blocks.
//   With one tensor per fetch, capping fetches is the nearest model of that.
// - A trace covers one training step (all micro-batches); DeepSpeed's covers one
//   forward + backward, so with gradient accumulation its reuse window ends at
//   each micro-batch.
// - No persistent parameters (param_persistence_threshold is 0): the 10Cache
//   paper's hit rates exclude them; and no NVMe swap-in ahead of the walk
//   (prefetch_nvme false, DeepSpeed's default).
// - An invalidated trace drops the coordinator's fetches in flight from its
//   bookkeeping; DeepSpeed waits for them and releases them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace tencache {

// DeepSpeed ZeRO-3 defaults (elements, not bytes).
struct ZeroInfinityKnobs {
  uint64_t prefetch_bucket_size = 50'000'000;
  uint64_t max_live_parameters = 1'000'000'000;
  uint64_t max_reuse_distance = 1'000'000'000;
  int max_in_flight = 2;
  // offload_param.pin_memory (DeepSpeed's default: false). Not a decision of the
  // coordinator but of how its fetches run: with one rank DeepSpeed copies a
  // partition with .to(non_blocking=True), which returns at once only from pinned
  // memory; with more ranks its all-gather copies with a blocking .to(). A
  // synchronous copy holds the host thread, so the access's compute starts after
  // the walk's copies. The simulator's adapter models it; the worker's host tier
  // is always pinned and its copies never block the training thread.
  bool pin_memory = false;
};

// What the coordinator asks of the cache it drives. Keys as in the coordinator.
class ZeroInfinityCacheView {
 public:
  virtual ~ZeroInfinityCacheView() = default;
  // On the device or on its way there (DeepSpeed: AVAILABLE or INFLIGHT).
  virtual bool OnDevice(uint32_t key) const = 0;
  // A fetch toward the device has not completed.
  virtual bool InFlight(uint32_t key) const = 0;
  // Not on the device and its only copy is on NVMe.
  virtual bool OnlyOnNvme(uint32_t key) const = 0;
  // Starts fetching `key` (not OnDevice) to the device. False when it cannot
  // start now (no room); nothing has changed then.
  virtual bool StartFetch(uint32_t key) = 0;
  // Parameter elements on the device or on their way (DeepSpeed's n_available_params).
  virtual uint64_t LiveElements() const = 0;
};

enum class ZeroTraceMode { kInvalid, kRecord, kComplete };

struct ZeroInfinityDecision {
  enum class Kind { kPrefetch, kRelease, kKeep };
  Kind kind;
  size_t position;  // the access at which it was decided
  uint32_t key;
  bool operator==(const ZeroInfinityDecision& o) const {
    return kind == o.kind && position == o.position && key == o.key;
  }
};

class ZeroInfinityCoordinator {
 public:
  // Sees every decision, in order (tests, logs); may be empty.
  using Observer = std::function<void(const ZeroInfinityDecision&)>;

  // `elements[key]`: elements of the tensor `key`.
  explicit ZeroInfinityCoordinator(std::vector<uint64_t> elements, ZeroInfinityKnobs knobs = {},
                                   Observer observer = {});

  // DeepSpeed's reset_step, before the first access of every step.
  void BeginStep();
  // Access `position` (0, 1, 2, ... within the step) uses `key`, which is now on
  // the device (fetched on demand if it was not). Records it, checks it against
  // the trace, and starts the prefetches through `cache`.
  // REQUIRES: key < elements.size().
  void OnAccess(size_t position, uint32_t key, ZeroInfinityCacheView& cache);
  // After access `position` of `key` computed: true when `key` should leave the device now.
  bool ReleaseAfter(size_t position, uint32_t key);

  ZeroTraceMode mode() const { return mode_; }
  // The recorded trace: the key of each access of a step (complete in kComplete).
  const std::vector<uint32_t>& order() const { return order_; }
  uint64_t fetches_issued() const { return fetches_issued_; }

 private:
  void Complete();
  void Invalidate();
  void Prefetch(size_t position, ZeroInfinityCacheView& cache);
  bool Reused(size_t position, uint32_t key) const;
  void Note(ZeroInfinityDecision::Kind kind, size_t position, uint32_t key) const;

  // Constant after construction.
  const std::vector<uint64_t> elements_;
  const ZeroInfinityKnobs knobs_;
  const Observer observer_;

  ZeroTraceMode mode_ = ZeroTraceMode::kInvalid;
  std::vector<uint32_t> order_;
  std::vector<size_t> next_use_;    // per position: the next position of its key in the step, or npos
  std::vector<uint64_t> prefix_;    // prefix_[p]: elements of positions 0..p-1
  std::vector<size_t> keep_until_;  // per key: furthest use the walk passed this step (0: none)
  std::deque<uint32_t> in_flight_;  // prefetches started, oldest first
  size_t cursor_ = 0;               // where the walk stopped this step
  uint64_t fetches_issued_ = 0;
};

}  // namespace tencache
