// Hugging Face checkpoints in and out of the worker's flat blocks: model.init
// reads a safetensors checkpoint (a file, or a folder of shards with its
// index) with transformers' tensor names for the job's architecture
// (common/hf_layout.h), one tensor at a time, into a block's flat layout;
// --save-weights writes the trained weights in the same layout, with a
// config.json that transformers loads unchanged. Thread-compatible; ReadBlock
// may run on several threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/hf_layout.h"
#include "common/safetensors.h"
#include "common/safetensors_shards.h"
#include "worker/decoder_model.h"

namespace tencache {

class HfCheckpointReader {
 public:
  // Opens `path` for `model` and checks it: every tensor the model has is
  // there (with or without the causal-LM prefix) with the expected shape, and
  // nothing else is (buffers such as attention masks aside). InvalidArgument
  // naming `key` (e.g. "model.init"), the file and the tensor otherwise.
  static StatusOr<HfCheckpointReader> Open(const std::string& path, const DecoderModel& model, const std::string& key);
  // Block `block`'s values, in our layout, into out[model.layout(block).numel]:
  // the tensors that overlap elements [begin, end) of the block (a rank's
  // shard; by default all of them). Tensors wholly outside are not read and
  // their elements of `out` are left as they were.
  Status ReadBlock(int block, float* out, int64_t begin = 0, int64_t end = INT64_MAX) const;

 private:
  HfCheckpointReader(SafetensorsReader reader, const DecoderModel& model, HfArch arch)
      : reader_(std::move(reader)), model_(&model), arch_(std::move(arch)) {}
  SafetensorsReader reader_;
  const DecoderModel* model_;
  HfArch arch_;
  std::vector<const StTensor*> found_;  // per arch_.tensors entry
};

class HfCheckpointWriter {
 public:
  // DIR's safetensors holding `dtype` values, cut into shards of at most
  // `max_shard_bytes` as transformers cuts them (ShardedSafetensorsWriter:
  // model.safetensors, or model-*-of-*.safetensors and their index; written
  // under temporary names until Finish), and DIR/config.json. InvalidArgument
  // naming the model key when transformers has no such architecture.
  static StatusOr<HfCheckpointWriter> Begin(const std::string& dir, const DecoderModel& model, StDType dtype,
                                            DType config_dtype, uint64_t max_shard_bytes = kDefaultMaxShardBytes);
  // Block `block`'s values in our layout (model.layout(block).numel floats).
  Status WriteBlock(int block, const float* flat);
  Status Finish();

 private:
  HfCheckpointWriter(ShardedSafetensorsWriter writer, const DecoderModel& model, HfArch arch, StDType dtype)
      : writer_(std::move(writer)), model_(&model), arch_(std::move(arch)), dtype_(dtype) {}
  ShardedSafetensorsWriter writer_;
  const DecoderModel* model_;
  HfArch arch_;
  StDType dtype_;
};

// The weights a run of `model` starts from when it has no model.init (every
// block drawn from `seed`, as the trainer draws them), written to `dir` as a
// Hugging Face checkpoint of `stored` values (HfCheckpointWriter). One block
// in memory at a time. In fp32, a run whose model.init names `dir` starts from
// the same values, bit for bit.
Status WriteInitialWeights(const DecoderModel& model, uint64_t seed, DType config_dtype, const std::string& dir,
                           uint64_t max_shard_bytes, StDType stored = StDType::kF32);

}  // namespace tencache
