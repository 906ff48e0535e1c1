// GptModel: the math of a GPT-style decoder (token and position embeddings,
// pre-LayerNorm blocks of causal self-attention and a GELU MLP, a final
// LayerNorm, an LM head tied to the token embedding) as pure functions of flat
// parameter buffers. It owns no parameters: each block's parameters are one
// flat fp32 buffer (owned by the tensor cache or the caller), and every weight
// is a view into it, so libtorch never allocates parameter storage and a
// block's gradient is the gradient of its flat buffer.
//
// Blocks follow ModelShape: block 0 the embeddings, 1..L the layers, L+1 the
// final norm (and the LM head when untied). Parameter names and order match
// ModelShape::Tensors(). The compute dtype is the flat buffers' (fp32, or bf16
// in mixed precision: activations follow it; the loss and the sampling logits
// are computed in fp32). Immutable after construction; thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/model_shape.h"
#include "common/status.h"

namespace tencache {

struct ParamSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // elements into the block's flat buffer
  int64_t numel = 0;
};

struct BlockLayout {
  std::vector<ParamSlot> params;
  int64_t numel = 0;
};

// InvalidArgument naming the model key when the worker cannot train `m`
// (it trains GELU / LayerNorm / learned-position / tied-embedding GPTs).
Status CheckWorkerSupports(const ModelShape& m);

class GptModel {
 public:
  // REQUIRES: CheckWorkerSupports(m).ok().
  explicit GptModel(const ModelShape& m);

  const ModelShape& shape() const { return m_; }
  int num_blocks() const { return static_cast<int>(layouts_.size()); }
  const BlockLayout& layout(int block) const { return layouts_[block]; }
  // A weight of `block` as a view of `flat` (which may require grad).
  torch::Tensor View(const torch::Tensor& flat, int block, const std::string& name) const;

  // [B, T] token ids -> [B, T, C] activations.
  torch::Tensor Embed(const torch::Tensor& flat0, const torch::Tensor& tokens) const;
  // One transformer layer (block = layer + 1).
  torch::Tensor Layer(int block, const torch::Tensor& flat, const torch::Tensor& x) const;
  // Final norm, LM head, mean cross-entropy against [B, T] targets. `flat0` is
  // block 0 (the tied embedding).
  torch::Tensor HeadLoss(const torch::Tensor& flat_last, const torch::Tensor& flat0, const torch::Tensor& x,
                         const torch::Tensor& targets) const;
  // Logits of the last position, for sampling.
  torch::Tensor HeadLogits(const torch::Tensor& flat_last, const torch::Tensor& flat0, const torch::Tensor& x) const;

  // GPT-2 initialisation of a whole block into `out` (layout(block).numel
  // floats): weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
  // biases 0, norm weights 1. A pure function of (seed, block), the same on
  // every rank and every platform.
  void InitBlock(int block, uint64_t seed, float* out) const;

 private:
  torch::Tensor Attention(int block, const torch::Tensor& flat, const torch::Tensor& h) const;
  torch::Tensor Logits(const torch::Tensor& flat_last, const torch::Tensor& flat0, const torch::Tensor& x) const;

  ModelShape m_;
  std::vector<BlockLayout> layouts_;
};

}  // namespace tencache
