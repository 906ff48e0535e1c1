// Trace synthesis: the trace a training step of a preset model would produce,
// without running it.
//
// Forward visits blocks 0..L+1 (a tied LM head re-uses the embedding tensor at
// the end of the forward and the start of the backward), backward visits blocks
// L+1..0 with activation recompute (one access per tensor covering recompute and
// gradient), then the optimizer updates every shard on the host. Compute time per
// access is its FLOPs over the device speed: 2·numel·tokens forward,
// (2+4)·numel·tokens backward; optimizer time is shard numel over the host Adam
// rate, on the training thread or (optimizer_lane) on the optimizer lane. With
// ranks > 1, all-gathers are issued one block ahead and every backward block is
// followed by a reduce-scatter. Pure functions; thread-safe.
#pragma once

#include "common/model_shape.h"
#include "common/status.h"
#include "scheduler/trace.h"

namespace tencache {

struct SynthOptions {
  DType dtype = DType::kBf16;
  int micro_batch = 1;
  int seq_len = 0;                  // 0: the preset's training sequence length
  int ranks = 1;                    // data-parallel ZeRO-3 ranks; each caches 1/ranks
  double device_flops = 2.5e14;     // sustained FLOP/s of one device
  double host_adam_params_per_s = 1e9;  // fp32 Adam updates per second on the host
  double collective_bps = 12.5e9;   // only for the nominal collective times in the trace
  // Every update runs on the optimizer lane (TraceEvent::optimizer_lane), as
  // the worker runs them with train.optimizer_overlap on.
  bool optimizer_lane = false;
};

// REQUIRES nothing; returns InvalidArgument for non-positive options.
StatusOr<Trace> SynthesizeTrace(const ModelShape& shape, const SynthOptions& options);

}  // namespace tencache
