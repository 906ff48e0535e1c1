// HfLayout: how Hugging Face `transformers` names and lays out the tensors of
// each architecture ModelShape describes, and the config.json it reads. The
// family follows from the shape's options: GPT-2 (learned positions, GELU,
// fused qkv), OPT (ReLU, positions offset 2), Llama (RMSNorm, SwiGLU, rotary),
// Falcon (parallel blocks, rotary) and BLOOM (ALiBi, embedding norm). Each of
// our tensors (ModelShape::Tensors) maps to one Hugging Face tensor, the same
// values up to a transpose (GPT-2's Conv1D weights) or a row permutation
// (BLOOM's and multi-head Falcon's qkv, interleaved per head). Checkpoints
// saved without the causal-LM prefix ("h.0..." for "transformer.h.0...") are
// read too. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/model_shape.h"
#include "common/status.h"

namespace tencache {

enum class HfTransform {
  kNone,
  kTranspose,        // ours [out, in], theirs [in, out]
  kInterleaveHeads,  // ours: rows [q heads; k heads; v heads]; theirs: per head [q; k; v]
};

struct HfTensor {
  std::string ours;    // ModelShape::Tensors() name
  std::string theirs;  // transformers' name, with the causal-LM prefix
  std::string prefix;  // that prefix ("transformer.", "model.", "model.decoder.")
  HfTransform transform = HfTransform::kNone;
  std::vector<int64_t> their_dims;
};

struct HfArch {
  std::string model_type;    // "gpt2", "opt", "llama", "falcon", "bloom"
  std::string architecture;  // "GPT2LMHeadModel", ...
  std::vector<HfTensor> tensors;  // in ModelShape::Tensors() order
  bool tied = true;               // the head is the token embedding
  // Tensors a checkpoint may hold that are buffers, not parameters (GPT-2's
  // attention masks, Llama's rotary inv_freq, a tied lm_head): ignored when read.
  bool Ignorable(const std::string& name) const;
};

// InvalidArgument naming the model key when no transformers architecture has
// this combination of options.
StatusOr<HfArch> HfArchFor(const ModelShape& m);

// config.json for `m` (transformers reads it with AutoConfig), weights in `dtype`.
StatusOr<nlohmann::ordered_json> HfConfig(const ModelShape& m, DType dtype);

// Reorders one tensor's values between our layout and theirs (`to_theirs`
// true: ours -> theirs) by `t`'s transform; `m` gives a qkv's heads.
// REQUIRES: in and out hold t's numel values and do not overlap.
void HfReorder(const HfTensor& t, const ModelShape& m, bool to_theirs, const float* in, float* out);

}  // namespace tencache
