#include "common/shard_bytes.h"

namespace tencache {

ShardBytes ShardBytesPerRank(const ModelShape& model, DType dtype, int ranks) {
  const bool mixed = dtype != DType::kFp32;
  ShardBytes s;
  for (uint64_t n : model.BlockParamCounts()) {
    const uint64_t count = (n + ranks - 1) / ranks;
    s.param += count * (mixed ? 2 : 4);
    s.master += mixed ? count * 4 : 0;
    s.adam += 2 * count * 4;
    s.grad += count * 4;
    s.tensors += 4 + (mixed ? 1 : 0);
  }
  return s;
}

ShardTensors ShardTensorBytes(const ModelShape& model, DType dtype, int ranks) {
  const bool mixed = dtype != DType::kFp32;
  ShardTensors t;
  for (uint64_t n : model.BlockParamCounts()) {
    const uint64_t count = (n + ranks - 1) / ranks;
    t.params.push_back(count * (mixed ? 2 : 4));
    t.all.push_back(t.params.back());
    for (int fp32 = 0; fp32 < (mixed ? 4 : 3); ++fp32) t.all.push_back(count * 4);  // [master,] m, v, gradient
  }
  return t;
}

}  // namespace tencache
