// ReferenceLogits: a decoder's logits computed from the published formulas,
// written plainly and separately from the worker's DecoderModel (no shared
// code): LayerNorm and RMSNorm by their definitions, GELU by its tanh and erf
// formulas, attention as an explicit masked softmax, grouped-query heads by
// index, rotary positions as rotations of dimension pairs (i, i + d/2) (Llama's
// and Falcon's convention), ALiBi with BLOOM's slope formula, OPT's position
// offset, Falcon's parallel block. Weights are looked up by ModelShape's tensor
// names. For tests only; slow and clear.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "common/model_shape.h"

namespace tencache {

// [B, T] tokens -> [B, T, vocab] logits, in the weights' dtype.
torch::Tensor ReferenceLogits(const ModelShape& m, const std::map<std::string, torch::Tensor>& w,
                              const torch::Tensor& tokens);

}  // namespace tencache
