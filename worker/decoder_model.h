// DecoderModel: the math of a decoder-only transformer as ModelShape describes
// it, as pure functions of flat parameter buffers: GPT-2 (learned positions,
// pre-LayerNorm, GELU), OPT (ReLU, learned positions offset by 2), Llama
// (RMSNorm, SwiGLU, rotary positions, grouped-query attention, untied head, no
// biases), Falcon (attention and MLP in parallel from one norm, multi-query
// attention, rotary) and BLOOM (ALiBi, a norm after the embedding), and any mix
// of their options. It owns no parameters: each block's parameters are one flat
// buffer (owned by the tensor cache or the caller) and every weight is a view
// into it, so libtorch never allocates parameter storage; a block's gradient is
// a flat buffer of the same layout (WithGradients, Backward).
//
// Blocks follow ModelShape: block 0 the embeddings (and BLOOM's embedding
// norm), 1..L the layers, L+1 the final norm (and the LM head when untied).
// Parameter names, shapes and order are ModelShape::Tensors()'. A fused qkv
// matrix holds the query heads' rows, then the key heads', then the value
// heads'. The compute dtype is the flat buffers' (fp32, or bf16 in mixed
// precision: activations follow it; norms' statistics, the loss and the
// sampling logits are computed in fp32). docs/worker.md gives the formulas.
// Immutable after construction; thread-safe.
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

// InvalidArgument naming the model key when the worker cannot train `m`: it
// trains every architecture ModelShape describes, so only an invalid shape
// (ValidateModelShape) is refused.
Status CheckWorkerSupports(const ModelShape& m);

// A block's weights as the model reads them. From a flat buffer (implicitly):
// views of it. From DecoderModel::WithGradients: each weight its own leaf, a
// view of the same storage requiring grad, whose gradient Backward accumulates
// into the same view of a flat gradient buffer. A backward through a flat leaf
// would allocate a whole block of zeros for every weight's gradient; through
// these it allocates no block-sized tensor.
class BlockWeights {
 public:
  BlockWeights(const torch::Tensor& flat) : flat_(flat) {}  // NOLINT(runtime/explicit): views of `flat`
  const torch::Tensor& flat() const { return flat_; }
  // Index = layout(block).params; empty unless from WithGradients.
  const std::vector<torch::Tensor>& leaves() const { return leaves_; }

 private:
  friend class DecoderModel;
  torch::Tensor flat_;
  std::vector<torch::Tensor> leaves_;
};

class DecoderModel {
 public:
  // REQUIRES: CheckWorkerSupports(m).ok().
  explicit DecoderModel(const ModelShape& m);

  const ModelShape& shape() const { return m_; }
  int num_blocks() const { return static_cast<int>(layouts_.size()); }
  const BlockLayout& layout(int block) const { return layouts_[block]; }
  // A weight of `block`: a view of w.flat(), or its leaf.
  torch::Tensor View(const BlockWeights& w, int block, const std::string& name) const;
  // `flat`'s weights of `block` as leaves whose gradients accumulate into the
  // matching elements of `grad` (zeroed for a gradient alone; its padding past
  // layout(block).numel is left as it is). REQUIRES: flat and grad hold at
  // least layout(block).numel elements, of the same dtype and device; `grad`
  // outlives the backward.
  BlockWeights WithGradients(const torch::Tensor& flat, int block, const torch::Tensor& grad) const;

  // [B, T] token ids -> [B, T, C] activations.
  torch::Tensor Embed(const BlockWeights& flat0, const torch::Tensor& tokens) const;
  // One transformer layer (block = layer + 1): [B, T, C] -> [B, T, C].
  torch::Tensor Layer(int block, const BlockWeights& flat, const torch::Tensor& x) const;
  // Final norm and LM head: [B, T, C] -> [B, T, vocab] logits in the compute
  // dtype. `flat0` (block 0) is read only for a tied head (may be undefined
  // otherwise).
  torch::Tensor Logits(const BlockWeights& flat_last, const BlockWeights& flat0, const torch::Tensor& x) const;
  // Mean cross-entropy of the logits (in fp32) against [B, T] targets.
  torch::Tensor HeadLoss(const BlockWeights& flat_last, const BlockWeights& flat0, const torch::Tensor& x,
                         const torch::Tensor& targets) const;
  // fp32 logits of the last position, for sampling: [B, vocab].
  torch::Tensor HeadLogits(const BlockWeights& flat_last, const BlockWeights& flat0, const torch::Tensor& x) const;

  // Initialisation of a whole block into `out` (layout(block).numel floats):
  // weights N(0, 0.02), residual projections (attn.out, mlp.down)
  // N(0, 0.02/sqrt(2L)), biases 0, norm weights 1. A pure function of (seed,
  // block), the same on every rank and every platform.
  void InitBlock(int block, uint64_t seed, float* out) const;

 private:
  torch::Tensor Norm(int block, const BlockWeights& flat, const std::string& prefix, const torch::Tensor& x) const;
  torch::Tensor Linear(int block, const BlockWeights& flat, const std::string& prefix, const torch::Tensor& x) const;
  torch::Tensor Attention(int block, const BlockWeights& flat, const torch::Tensor& h) const;
  torch::Tensor Mlp(int block, const BlockWeights& flat, const torch::Tensor& h) const;
  // q or k [B, heads, T, head_size] turned by rotary positions 0..T-1.
  torch::Tensor Rotate(const torch::Tensor& t) const;

  ModelShape m_;
  std::vector<BlockLayout> layouts_;
  std::vector<double> alibi_slopes_;  // per head (position alibi)
};

// Backpropagates d_out (undefined for a scalar `out`: ones) through `out`'s
// graph into `inputs` (leaves requiring grad) and every leaf of `weights`
// (each accumulated into its gradient buffer); returns the gradients of
// `inputs`, in order, and leaves their .grad() undefined. The graph is freed.
std::vector<torch::Tensor> Backward(const torch::Tensor& out, const torch::Tensor& d_out,
                                    const std::vector<torch::Tensor>& inputs,
                                    const std::vector<const BlockWeights*>& weights);

// ALiBi's per-head slopes for `heads` heads (Press et al.; BLOOM's formula for
// a head count that is not a power of two).
std::vector<double> AlibiSlopes(int heads);

}  // namespace tencache
