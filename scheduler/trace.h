// Trace: the profiled order of one training step, as the scheduler consumes it.
//
// A trace is a header (model, dtype, ranks, ...) and the step's events in the
// order they happened: tensor accesses (forward, backward, optimizer) and
// collectives (all-gather, reduce-scatter). Tensor ids are dense 0..N-1 and
// every access of one id names the same tensor with the same byte size. On disk
// a trace is JSON lines (docs/trace-format.md); the reader reports file:line and
// what was expected. Plain value types; thread-safe to read.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "cachemgr/types.h"
#include "common/status.h"

namespace tencache {

enum class Phase : uint8_t { kForward, kBackward, kOptimizer };
enum class EventKind : uint8_t { kAccess, kCollective };
enum class CollectiveKind : uint8_t { kAllGather, kReduceScatter };

const char* PhaseName(Phase p);            // "fwd", "bwd", "optimizer"
const char* CollectiveKindName(CollectiveKind k);  // "all_gather", "reduce_scatter"

// One event. Fields that do not apply to `kind` are ignored (name, id and phase
// for collectives; collective for accesses).
struct TraceEvent {
  EventKind kind = EventKind::kAccess;
  TensorId id = 0;
  std::string name;
  Phase phase = Phase::kForward;
  int block = 0;          // ModelShape block; for a collective, the block it serves
  uint64_t bytes = 0;     // bytes this rank caches (its shard) or the collective moves
  double start_s = 0;     // seconds from the start of the step
  double end_s = 0;       // end - start = compute time that follows the access
  // An access's: the training thread's own time before it asked for the
  // tensor, since the previous event of the step ended (or the step began),
  // neither compute nor a wait: its bookkeeping and the step's glue. 0 when
  // not recorded (older traces).
  double lead_s = 0;
  // An access's: the rest of the time from the previous event's end to its
  // start, which the training thread spent waiting (for the cache, and for a
  // device access its all-gather), as measured; 0 when not recorded. The
  // simulator predicts waits itself: this is what to compare them with.
  double wait_s = 0;
  // An optimizer access's: the state pieces [pieces_begin, pieces_end) it
  // updates (the worker streams a tied embedding's update in parts); both 0:
  // every piece, as in older traces.
  int pieces_begin = 0, pieces_end = 0;
  // An optimizer access's: the update ran on the optimizer lane (trace key
  // "lane":"optimizer"): the training thread issued it and went on, and
  // retired it later (docs/trace-format.md). start_s and end_s are the lane's
  // compute; lead_s and wait_s are measured from the issue. False: the
  // training thread ran it.
  bool optimizer_lane = false;
  CollectiveKind collective = CollectiveKind::kAllGather;

  double duration_s() const { return end_s - start_s; }
  // A device access: forward or backward use of a parameter on the device.
  bool is_device_access() const { return kind == EventKind::kAccess && phase != Phase::kOptimizer; }
};

// Position among a step's device accesses (the forward and backward accesses,
// in trace order; optimizer accesses and collectives do not count): the k-th
// device access of a step is device access k. The scheduler's plan, the
// simulator's policies, the profiler and the worker's prefetch drivers count
// in these; the cache counts acquires (AcquireIndex), a different sequence.
struct DeviceAccessTag {};
using DeviceAccessIndex = StepIndex<DeviceAccessTag>;
constexpr DeviceAccessIndex kNeverAccessed = DeviceAccessIndex::Never();

constexpr int kTraceFormatVersion = 1;

struct TraceHeader {
  int version = kTraceFormatVersion;
  std::string model = "custom";
  std::string dtype = "bf16";
  int ranks = 1;
  int micro_batch = 1;
  int seq_len = 0;
  double device_flops = 0;  // FLOP/s the compute times assume; 0 when measured
  // The step updates after the whole backward (train.grad_clip, fp16 loss
  // scaling), storing every gradient contribution; false when not recorded.
  bool deferred_updates = false;
};

struct Trace {
  TraceHeader header;
  std::vector<TraceEvent> events;

  // 1 + the largest tensor id (ids are dense).
  size_t num_tensors() const;
  // Bytes of each tensor, indexed by id. REQUIRES: ValidateTrace(...).ok().
  std::vector<uint64_t> TensorBytes() const;
  // Their sum: the bytes of one copy of every tensor (the parameters).
  uint64_t TotalTensorBytes() const;
  std::vector<std::string> TensorNames() const;
};

// Dense ids, one size and name per id, bytes > 0, end >= start, the lane only
// on optimizer accesses, at least one device access. Errors start with `context`.
Status ValidateTrace(const Trace& trace, const std::string& context);

// JSON lines; `source` (a file name) prefixes every error as "source:line: ".
StatusOr<Trace> ParseTrace(std::istream& in, const std::string& source);
StatusOr<Trace> ReadTraceFile(const std::string& path);
void WriteTrace(const Trace& trace, std::ostream& out);
Status WriteTraceFile(const Trace& trace, const std::string& path);

}  // namespace tencache
