// ProbeResult: how fast this machine runs a job's own work (the compute of one
// micro-batch per block kind, AdamW, memcpy, collectives), as
// `tencache-worker --probe` measures it and the launcher's resource model
// reads it for the local candidate. A value type with a JSON form.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tencache {

struct ProbeResult {
  std::string dtype;            // what the model computes in: "bf16" or "fp32"
  int threads = 1;              // compute threads per rank
  int ranks = 1;
  // One micro-batch of the job's model in its compute dtype, as the worker runs
  // it (forward without autograd, then recompute + backward), split by block
  // kind: embed_s + layers x layer_s + head_s is one micro-batch's compute.
  double embed_s = 0;           // embedding block, forward + backward
  double layer_s = 0;           // one transformer layer, forward + recompute + backward
  double head_s = 0;            // final norm + LM head + loss, forward + backward, and the pass around them
  // Minor page faults in the median timed micro-batch (with the layers): 0
  // or nearly, as in the worker's steps, which keep freed memory mapped; a
  // probe that faults its tensors in afresh times more than the steps take.
  double compute_page_faults = 0;
  double matmul_tflops = 0;     // the MLP's up-projection matmul alone, TFLOP/s
  double matmul_fp32_tflops = 0;  // the same matmul in fp32 (bf16 may have no native instructions here)
  double adamw_params_per_s = 0;  // AdamW on fp32 master + moments, this rank's threads
  double copy_gbps = 0;         // memcpy of the largest shard (the simulated device tier's copies)
  double checksum_gbps = 0;     // CRC32C of the largest shard, one thread (the NVMe tier's per-chunk checksums)
  // Collectives over the run's ranks (0 with one rank): the time of a 4-byte
  // all-gather (latency), and the bus bandwidth, GB/s, of an all-gather (a
  // reduce-scatter) of the largest parameter shard in the time it took beyond
  // that latency.
  double allgather_gbps = 0;
  double reduce_scatter_gbps = 0;
  double collective_latency_s = 0;
  // The whole step of the in-memory reference (cache.policy none) at the
  // probe's micro-batch and ranks: what the blocks' compute, collectives and
  // AdamW leave over is the per-step overhead (data, loss, framework). Where
  // the job's states would not fit in memory, the reference is the same model
  // cut to `reference_layers` layers (0: all of the job's).
  double reference_step_s = 0;
  int reference_layers = 0;
  nlohmann::ordered_json ToJson() const;
  static StatusOr<ProbeResult> FromJson(const nlohmann::json& j);
};

}  // namespace tencache
