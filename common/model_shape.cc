#include "common/model_shape.h"

#include <tuple>

#include <algorithm>

namespace tencache {

int DTypeBytes(DType dtype) { return dtype == DType::kFp32 ? 4 : 2; }

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBf16: return "bf16";
    case DType::kFp16: return "fp16";
    case DType::kFp32: return "fp32";
  }
  return "?";
}
const char* MlpKindName(MlpKind k) {
  switch (k) {
    case MlpKind::kGelu: return "gelu";
    case MlpKind::kSwiGlu: return "swiglu";
    case MlpKind::kGeluExact: return "gelu_exact";
    case MlpKind::kRelu: return "relu";
  }
  return "?";
}
const char* NormKindName(NormKind k) { return k == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
const char* PositionKindName(PositionKind k) {
  switch (k) {
    case PositionKind::kLearned: return "learned";
    case PositionKind::kRotary: return "rotary";
    case PositionKind::kAlibi: return "alibi";
  }
  return "?";
}

namespace {

void AddNorm(const ModelShape& m, const std::string& prefix, int block,
             std::vector<TensorShape>* out) {
  const int64_t h = m.hidden;
  out->push_back({prefix + ".weight", block, uint64_t(h), {h}});
  if (m.norm == NormKind::kLayerNorm) out->push_back({prefix + ".bias", block, uint64_t(h), {h}});
}

void AddLinear(const ModelShape& m, const std::string& prefix, int block, uint64_t in,
               uint64_t out_features, std::vector<TensorShape>* out) {
  out->push_back({prefix + ".weight", block, in * out_features, {int64_t(out_features), int64_t(in)}});
  if (m.bias) out->push_back({prefix + ".bias", block, out_features, {int64_t(out_features)}});
}

void AddLayer(const ModelShape& m, int i, std::vector<TensorShape>* out) {
  const int block = i + 1;
  const std::string p = "layers." + std::to_string(i);
  const uint64_t h = m.hidden;
  const uint64_t q_out = uint64_t(m.heads) * m.head_dim();
  const uint64_t kv_out = uint64_t(m.kv_heads) * m.head_dim();
  AddNorm(m, p + ".norm1", block, out);
  if (m.fused_qkv) {
    AddLinear(m, p + ".attn.qkv", block, h, q_out + 2 * kv_out, out);
  } else {
    AddLinear(m, p + ".attn.q", block, h, q_out, out);
    AddLinear(m, p + ".attn.k", block, h, kv_out, out);
    AddLinear(m, p + ".attn.v", block, h, kv_out, out);
  }
  AddLinear(m, p + ".attn.out", block, q_out, h, out);
  if (!m.parallel_block) AddNorm(m, p + ".norm2", block, out);
  if (m.mlp == MlpKind::kSwiGlu) AddLinear(m, p + ".mlp.gate", block, h, m.ffn_hidden, out);
  AddLinear(m, p + ".mlp.up", block, h, m.ffn_hidden, out);
  AddLinear(m, p + ".mlp.down", block, m.ffn_hidden, h, out);
}

}  // namespace

std::vector<TensorShape> ModelShape::Tensors() const {
  std::vector<TensorShape> out;
  out.push_back({"embed.tokens", 0, uint64_t(vocab) * hidden, {vocab, hidden}});
  if (position == PositionKind::kLearned) {
    const int64_t rows = int64_t(max_positions) + position_offset;
    out.push_back({"embed.positions", 0, uint64_t(rows) * hidden, {rows, hidden}});
  }
  if (embedding_norm) AddNorm(*this, "embed.norm", 0, &out);
  for (int i = 0; i < layers; ++i) AddLayer(*this, i, &out);
  AddNorm(*this, "final_norm", layers + 1, &out);
  if (!tied_embeddings) out.push_back({"lm_head.weight", layers + 1, uint64_t(vocab) * hidden, {vocab, hidden}});
  return out;
}

uint64_t ModelShape::ParamCount() const {
  uint64_t n = 0;
  for (uint64_t c : BlockParamCounts()) n += c;
  return n;
}

uint64_t ModelShape::BlockParams(int block) const {
  std::vector<uint64_t> counts = BlockParamCounts();
  return block >= 0 && block < num_blocks() ? counts[block] : 0;
}

std::vector<TensorShape> ModelShape::TensorsOfOneLayer() const {
  ModelShape one = *this;
  one.layers = std::min(layers, 1);
  return one.Tensors();
}

std::vector<uint64_t> ModelShape::BlockParamCounts() const {
  // A one-layer model's blocks (the embedding, its layer, the head) give every
  // block's count without naming each layer's tensors.
  uint64_t block[3] = {0, 0, 0};
  for (const TensorShape& t : TensorsOfOneLayer()) block[t.block] += t.numel;
  std::vector<uint64_t> counts(num_blocks(), block[1]);
  counts.front() = block[0];
  counts.back() = block[2];
  return counts;
}

bool operator==(const ModelShape& a, const ModelShape& b) {
  auto fields = [](const ModelShape& m) {
    return std::tie(m.name, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.seq_len, m.vocab,
                    m.max_positions, m.position_offset, m.mlp, m.norm, m.position, m.bias, m.fused_qkv,
                    m.parallel_block, m.embedding_norm, m.tied_embeddings, m.rope_theta, m.norm_eps);
  };
  return fields(a) == fields(b);
}

Status ValidateModelShape(const ModelShape& m, const std::string& ctx) {
  auto positive = [&](int v, const char* key) -> Status {
    if (v > 0) return Status::Ok();
    return Status::InvalidArgument(ctx + "." + key + ": expected a positive integer, got " +
                                   std::to_string(v));
  };
  TC_RETURN_IF_ERROR(positive(m.layers, "layers"));
  TC_RETURN_IF_ERROR(positive(m.hidden, "hidden"));
  TC_RETURN_IF_ERROR(positive(m.heads, "heads"));
  TC_RETURN_IF_ERROR(positive(m.kv_heads, "kv_heads"));
  TC_RETURN_IF_ERROR(positive(m.ffn_hidden, "ffn_hidden"));
  TC_RETURN_IF_ERROR(positive(m.seq_len, "seq_len"));
  TC_RETURN_IF_ERROR(positive(m.vocab, "vocab"));
  if (m.hidden % m.heads != 0) {
    return Status::InvalidArgument(ctx + ".heads: expected a divisor of hidden (" +
                                   std::to_string(m.hidden) + "), got " + std::to_string(m.heads));
  }
  if (m.heads % m.kv_heads != 0) {
    return Status::InvalidArgument(ctx + ".kv_heads: expected a divisor of heads (" +
                                   std::to_string(m.heads) + "), got " +
                                   std::to_string(m.kv_heads));
  }
  if (m.position == PositionKind::kRotary && m.head_dim() % 2 != 0) {
    return Status::InvalidArgument(ctx + ".heads: rotary positions need an even head size (hidden / heads), got " +
                                   std::to_string(m.head_dim()));
  }
  if (m.position == PositionKind::kLearned && m.seq_len > m.max_positions) {
    return Status::InvalidArgument(ctx + ".seq_len: expected at most max_positions (" +
                                   std::to_string(m.max_positions) + ") for learned positions, got " +
                                   std::to_string(m.seq_len));
  }
  return Status::Ok();
}

namespace {

ModelShape Gpt2(const char* name, int layers, int hidden, int heads) {
  ModelShape m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.seq_len = m.max_positions = 1024;
  m.vocab = 50257;
  m.fused_qkv = true;
  return m;
}

ModelShape Opt(const char* name, int layers, int hidden, int heads) {
  ModelShape m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.seq_len = m.max_positions = 2048;
  m.position_offset = 2;
  m.vocab = 50272;
  m.mlp = MlpKind::kRelu;
  return m;
}

ModelShape Llama2(const char* name, int layers, int hidden, int heads, int kv_heads, int ffn) {
  ModelShape m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.seq_len = m.max_positions = 4096;
  m.vocab = 32000;
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRotary;
  m.bias = false;
  m.tied_embeddings = false;
  return m;
}

std::vector<ModelShape> AllPresets() {
  std::vector<ModelShape> v;
  ModelShape tiny;  // trains in seconds on two CPU cores; byte-level vocabulary
  tiny.name = "tiny";
  tiny.layers = 4;
  tiny.hidden = 128;
  tiny.heads = tiny.kv_heads = 4;
  tiny.ffn_hidden = 512;
  tiny.seq_len = tiny.max_positions = 128;
  tiny.vocab = 256;
  tiny.fused_qkv = true;  // GPT-2 style
  v.push_back(tiny);
  v.push_back(Gpt2("gpt2", 12, 768, 12));
  v.push_back(Gpt2("gpt2-medium", 24, 1024, 16));
  v.push_back(Gpt2("gpt2-large", 36, 1280, 20));
  v.push_back(Gpt2("gpt2-xl", 48, 1600, 25));
  v.push_back(Opt("opt-1.3b", 24, 2048, 32));
  v.push_back(Opt("opt-6.7b", 32, 4096, 32));
  v.push_back(Opt("opt-13b", 40, 5120, 40));
  v.push_back(Opt("opt-30b", 48, 7168, 56));
  v.push_back(Llama2("llama-2-7b", 32, 4096, 32, 32, 11008));
  v.push_back(Llama2("llama-2-13b", 40, 5120, 40, 40, 13824));
  v.push_back(Llama2("llama-2-70b", 80, 8192, 64, 8, 28672));
  ModelShape falcon;  // parallel attention + MLP, multi-query attention
  falcon.name = "falcon-7b";
  falcon.layers = 32;
  falcon.hidden = 4544;
  falcon.heads = 71;
  falcon.kv_heads = 1;
  falcon.ffn_hidden = 4 * 4544;
  falcon.seq_len = falcon.max_positions = 2048;
  falcon.vocab = 65024;
  falcon.position = PositionKind::kRotary;
  falcon.bias = false;
  falcon.fused_qkv = true;
  falcon.parallel_block = true;
  falcon.mlp = MlpKind::kGeluExact;
  v.push_back(falcon);
  ModelShape bloom;  // ALiBi positions, a norm after the embedding
  bloom.name = "bloom-7b1";
  bloom.layers = 30;
  bloom.hidden = 4096;
  bloom.heads = bloom.kv_heads = 32;
  bloom.ffn_hidden = 4 * 4096;
  bloom.seq_len = bloom.max_positions = 2048;
  bloom.vocab = 250880;
  bloom.position = PositionKind::kAlibi;
  bloom.fused_qkv = true;
  bloom.embedding_norm = true;
  v.push_back(bloom);
  return v;
}

struct Alias { const char* alias; const char* name; };
const Alias kAliases[] = {
    {"gpt2-124m", "gpt2"}, {"gpt2-355m", "gpt2-medium"}, {"gpt2-774m", "gpt2-large"},
    {"gpt2-1.5b", "gpt2-xl"}, {"bloom-7b", "bloom-7b1"},
};

}  // namespace

StatusOr<ModelShape> FindPreset(std::string_view name) {
  std::string wanted(name);
  for (const Alias& a : kAliases) {
    if (wanted == a.alias) wanted = a.name;
  }
  for (const ModelShape& m : AllPresets()) {
    if (m.name == wanted) return m;
  }
  std::string list;
  for (const std::string& n : PresetNames()) list += (list.empty() ? "" : ", ") + n;
  return Status::NotFound("unknown model preset '" + std::string(name) + "'; expected one of: " + list);
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const ModelShape& m : AllPresets()) names.push_back(m.name);
  for (const Alias& a : kAliases) names.push_back(a.alias);
  return names;
}

}  // namespace tencache
