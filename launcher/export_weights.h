// `tencache-launch export RUN_DIR --format safetensors --out DIR`: the weights
// a run ended with (RUN_DIR/weights, written by the workers' --save-weights in
// transformers' layout, fp32) in the job's dtype (or --dtype) as transformers'
// save_pretrained writes them: DIR/model.safetensors, or shards of at most
// --max-shard-size with model.safetensors.index.json; and DIR/config.json, so
// that from_pretrained(DIR) loads them unchanged. Tensors are converted one at
// a time.
#pragma once

#include <string>

namespace tencache {

struct ExportOptions {
  std::string run_dir;
  std::string format = "safetensors";
  std::string out;
  std::string dtype;  // "": the job's model.dtype; bf16, fp16 or fp32
  std::string max_shard_size = "5GB";
};

// 0, 2 for bad input (a folder that is not a finished run, an unknown format
// or dtype), 1 when writing fails.
int ExportWeights(const ExportOptions& options);

}  // namespace tencache
