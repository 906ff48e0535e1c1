#include "scheduler/synth.h"

#include <map>
#include <vector>

namespace tencache {

namespace {

struct Builder {
  const SynthOptions& opt;
  Trace trace;
  double clock = 0;
  double tokens = 0;

  void Collective(CollectiveKind kind, int block, uint64_t bytes) {
    if (opt.ranks <= 1 || bytes == 0) return;
    TraceEvent e;
    e.kind = EventKind::kCollective;
    e.collective = kind;
    e.block = block;
    e.bytes = bytes;
    e.start_s = clock;
    e.end_s = clock + double(bytes) / opt.collective_bps;
    trace.events.push_back(e);
  }

  void Access(TensorId id, const TensorShape& t, uint64_t shard_bytes, Phase phase, int block) {
    TraceEvent e;
    e.id = id;
    e.name = t.name;
    e.phase = phase;
    e.block = block;
    e.bytes = shard_bytes;
    e.start_s = clock;
    double seconds = 0;
    if (phase == Phase::kForward) seconds = 2.0 * double(t.numel) * tokens / opt.device_flops;
    if (phase == Phase::kBackward) seconds = 6.0 * double(t.numel) * tokens / opt.device_flops;
    if (phase == Phase::kOptimizer) {
      seconds = double(t.numel) / opt.ranks / opt.host_adam_params_per_s;
      e.optimizer_lane = opt.optimizer_lane;
    }
    clock += seconds;
    e.end_s = clock;
    trace.events.push_back(e);
  }
};

Status CheckOptions(const SynthOptions& o) {
  if (o.micro_batch <= 0) return Status::InvalidArgument("micro_batch: expected a positive integer");
  if (o.seq_len < 0) return Status::InvalidArgument("seq_len: expected a positive integer");
  if (o.ranks <= 0) return Status::InvalidArgument("ranks: expected a positive integer");
  if (!(o.device_flops > 0)) return Status::InvalidArgument("device_flops: expected > 0");
  if (!(o.host_adam_params_per_s > 0)) {
    return Status::InvalidArgument("host_adam_params_per_s: expected > 0");
  }
  if (!(o.collective_bps > 0)) return Status::InvalidArgument("collective_bps: expected > 0");
  return Status::Ok();
}

}  // namespace

StatusOr<Trace> SynthesizeTrace(const ModelShape& shape, const SynthOptions& opt) {
  TC_RETURN_IF_ERROR(CheckOptions(opt));
  TC_RETURN_IF_ERROR(ValidateModelShape(shape, "model"));
  const std::vector<TensorShape> tensors = shape.Tensors();
  const int last = shape.layers + 1;
  // Tensors used by each block, in forward order; the tied head joins the last block.
  std::vector<std::vector<TensorId>> uses(last + 1);
  for (size_t i = 0; i < tensors.size(); ++i) uses[tensors[i].block].push_back(TensorId(i));
  if (shape.tied_embeddings) uses[last].push_back(0);  // embed.tokens is tensor 0

  const int elem = DTypeBytes(opt.dtype);
  auto shard = [&](TensorId id) {
    return (tensors[id].numel * elem + opt.ranks - 1) / opt.ranks;
  };
  std::vector<uint64_t> block_bytes(last + 1, 0);  // full (gathered) bytes per block
  for (int b = 0; b <= last; ++b) {
    for (TensorId id : uses[b]) block_bytes[b] += tensors[id].numel * elem;
  }
  auto moved = [&](int b) { return block_bytes[b] * (opt.ranks - 1) / opt.ranks; };

  Builder w{opt, {}, 0, 0};
  w.tokens = double(opt.micro_batch) * (opt.seq_len > 0 ? opt.seq_len : shape.seq_len);
  w.trace.header.model = shape.name;
  w.trace.header.dtype = DTypeName(opt.dtype);
  w.trace.header.ranks = opt.ranks;
  w.trace.header.micro_batch = opt.micro_batch;
  w.trace.header.seq_len = opt.seq_len > 0 ? opt.seq_len : shape.seq_len;
  w.trace.header.device_flops = opt.device_flops;

  w.Collective(CollectiveKind::kAllGather, 0, moved(0));
  for (int b = 0; b <= last; ++b) {
    if (b < last) w.Collective(CollectiveKind::kAllGather, b + 1, moved(b + 1));
    for (TensorId id : uses[b]) w.Access(id, tensors[id], shard(id), Phase::kForward, b);
  }
  w.Collective(CollectiveKind::kAllGather, last, moved(last));
  for (int b = last; b >= 0; --b) {
    if (b > 0) w.Collective(CollectiveKind::kAllGather, b - 1, moved(b - 1));
    const std::vector<TensorId>& u = uses[b];
    for (auto it = u.rbegin(); it != u.rend(); ++it) {
      w.Access(*it, tensors[*it], shard(*it), Phase::kBackward, b);
    }
    w.Collective(CollectiveKind::kReduceScatter, b, moved(b));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.Access(TensorId(i), tensors[i], shard(TensorId(i)), Phase::kOptimizer, tensors[i].block);
  }
  TC_RETURN_IF_ERROR(ValidateTrace(w.trace, "synthesized trace"));
  return std::move(w.trace);
}

}  // namespace tencache
