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
  // DIR/model.safetensors holding `dtype` values (written under a temporary
  // name until Finish) and DIR/config.json. InvalidArgument naming the model
  // key when transformers has no such architecture.
  static StatusOr<HfCheckpointWriter> Begin(const std::string& dir, const DecoderModel& model, StDType dtype,
                                            DType config_dtype);
  // Block `block`'s values in our layout (model.layout(block).numel floats).
  Status WriteBlock(int block, const float* flat);
  Status Finish();

 private:
  HfCheckpointWriter(SafetensorsWriter writer, const DecoderModel& model, HfArch arch, StDType dtype)
      : writer_(std::move(writer)), model_(&model), arch_(std::move(arch)), dtype_(dtype) {}
  SafetensorsWriter writer_;
  const DecoderModel* model_;
  HfArch arch_;
  StDType dtype_;
};

}  // namespace tencache
