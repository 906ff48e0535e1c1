// ModelShape: the exact architecture of a decoder-only transformer, enough to
// count every parameter, list every tensor in forward order, and size the
// activations. Presets reproduce published models (GPT-2, OPT, Llama-2, Falcon,
// BLOOM) tensor by tensor, as their reference implementations lay them out.
// Plain value type; thread-safe to read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tencache {

enum class DType { kBf16, kFp16, kFp32 };
// 2 matrices (up, down) with GELU (tanh approximation: GPT-2, BLOOM), exact
// GELU (erf: Falcon) or ReLU (OPT); or 3 (gate, up, down) with SwiGLU (Llama).
enum class MlpKind { kGelu, kSwiGlu, kGeluExact, kRelu };
enum class NormKind { kLayerNorm, kRmsNorm };    // weight + bias, or weight only
enum class PositionKind { kLearned, kRotary, kAlibi };

int DTypeBytes(DType dtype);
const char* DTypeName(DType dtype);
const char* MlpKindName(MlpKind kind);
const char* NormKindName(NormKind kind);
const char* PositionKindName(PositionKind kind);

// One parameter tensor. `block` groups tensors that run together: 0 is the
// embedding block, 1..layers the transformer layers, layers+1 the final norm and
// the LM head. A tied LM head is the embedding tensor itself (block 0), used
// again at the end of the forward pass.
struct TensorShape {
  std::string name;   // e.g. "layers.3.attn.q.weight"
  int block = 0;
  uint64_t numel = 0;
  std::vector<int64_t> dims;  // e.g. {out, in} for a linear weight (numel is their product)
};

struct ModelShape {
  std::string name;          // preset name, or "custom"
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;          // == heads for multi-head attention; fewer for GQA / MQA
  int ffn_hidden = 0;
  int seq_len = 0;           // training sequence length
  int vocab = 0;
  int max_positions = 0;     // rows of a learned position table (before offset)
  int position_offset = 0;   // extra learned rows (OPT keeps 2)
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool bias = true;            // linear layers carry biases
  bool fused_qkv = false;      // one qkv matrix instead of q, k, v
  bool parallel_block = false; // attention and MLP read one shared norm (Falcon)
  bool embedding_norm = false; // a norm right after the token embedding (BLOOM)
  bool tied_embeddings = true; // LM head shares the token embedding
  double rope_theta = 10000;   // rotary base (position rotary)
  double norm_eps = 1e-5;      // LayerNorm / RMSNorm epsilon

  int head_dim() const { return hidden / heads; }
  // Every parameter tensor, in forward order (tied head listed once, in block 0).
  std::vector<TensorShape> Tensors() const;
  // Tensors() of this model cut to one layer (none when it has none): every
  // layer holds the same tensors, so these are all the shapes the model has,
  // in blocks 0 (the embedding), 1 (a layer) and 2 (the head), named for layer 0.
  std::vector<TensorShape> TensorsOfOneLayer() const;
  uint64_t ParamCount() const;
  // Parameters of one block (see TensorShape::block); BlockParamCounts gives all
  // blocks in one pass (index = block).
  uint64_t BlockParams(int block) const;
  std::vector<uint64_t> BlockParamCounts() const;
  int num_blocks() const { return layers + 2; }
};

// Checks positivity and divisibility (heads divide hidden, kv_heads divide
// heads). Errors name the key under `context` (e.g. "job.yaml: model").
Status ValidateModelShape(const ModelShape& shape, const std::string& context);

// Equal when every field is (the name included).
bool operator==(const ModelShape& a, const ModelShape& b);
inline bool operator!=(const ModelShape& a, const ModelShape& b) { return !(a == b); }

// Published presets: tiny, gpt2 (gpt2, gpt2-medium, gpt2-large, gpt2-xl; also
// gpt2-124m/355m/774m/1.5b), opt-1.3b/6.7b/13b/30b, llama-2-7b/13b/70b,
// falcon-7b, bloom-7b1.
StatusOr<ModelShape> FindPreset(std::string_view name);
std::vector<std::string> PresetNames();

}  // namespace tencache
