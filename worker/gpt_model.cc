#include "worker/gpt_model.h"

#include <torch/version.h>

#include <cmath>
#include <random>

namespace tencache {

Status CheckWorkerSupports(const ModelShape& m) {
  auto no = [&](const std::string& key, const std::string& got, const std::string& want) {
    return Status::InvalidArgument("model." + key + ": the worker trains GPT-style models (" + want +
                                   "), got " + got + " for model '" + m.name + "'");
  };
  if (m.mlp != MlpKind::kGelu) return no("mlp", MlpKindName(m.mlp), "mlp gelu");
  if (m.norm != NormKind::kLayerNorm) return no("norm", NormKindName(m.norm), "norm layernorm");
  if (m.position != PositionKind::kLearned) return no("position", PositionKindName(m.position), "position learned");
  if (m.parallel_block || m.embedding_norm) return no("preset", m.name, "sequential pre-LayerNorm blocks");
  return Status::Ok();
}

namespace {

void Add(BlockLayout* b, const std::string& name, std::vector<int64_t> shape) {
  ParamSlot s;
  s.name = name;
  s.shape = std::move(shape);
  s.numel = 1;
  for (int64_t d : s.shape) s.numel *= d;
  s.offset = b->numel;
  b->numel += s.numel;
  b->params.push_back(std::move(s));
}

void AddLinear(const ModelShape& m, BlockLayout* b, const std::string& name, int64_t in, int64_t out) {
  Add(b, name + ".weight", {out, in});
  if (m.bias) Add(b, name + ".bias", {out});
}

std::vector<BlockLayout> Layouts(const ModelShape& m) {
  std::vector<BlockLayout> out(m.num_blocks());
  const int64_t h = m.hidden, q = int64_t(m.heads) * m.head_dim(), kv = int64_t(m.kv_heads) * m.head_dim();
  Add(&out[0], "embed.tokens", {m.vocab, h});
  Add(&out[0], "embed.positions", {m.max_positions + m.position_offset, h});
  for (int i = 0; i < m.layers; ++i) {
    BlockLayout* b = &out[i + 1];
    const std::string p = "layers." + std::to_string(i);
    Add(b, p + ".norm1.weight", {h});
    Add(b, p + ".norm1.bias", {h});
    if (m.fused_qkv) {
      AddLinear(m, b, p + ".attn.qkv", h, q + 2 * kv);
    } else {
      AddLinear(m, b, p + ".attn.q", h, q);
      AddLinear(m, b, p + ".attn.k", h, kv);
      AddLinear(m, b, p + ".attn.v", h, kv);
    }
    AddLinear(m, b, p + ".attn.out", q, h);
    Add(b, p + ".norm2.weight", {h});
    Add(b, p + ".norm2.bias", {h});
    AddLinear(m, b, p + ".mlp.up", h, m.ffn_hidden);
    AddLinear(m, b, p + ".mlp.down", m.ffn_hidden, h);
  }
  Add(&out[m.layers + 1], "final_norm.weight", {h});
  Add(&out[m.layers + 1], "final_norm.bias", {h});
  if (!m.tied_embeddings) Add(&out[m.layers + 1], "lm_head.weight", {m.vocab, h});
  return out;
}

std::string LayerPrefix(int block) { return "layers." + std::to_string(block - 1); }

}  // namespace

GptModel::GptModel(const ModelShape& m) : m_(m), layouts_(Layouts(m)) {}

torch::Tensor GptModel::View(const torch::Tensor& flat, int block, const std::string& name) const {
  for (const ParamSlot& s : layouts_[block].params) {
    if (s.name == name) return flat.narrow(0, s.offset, s.numel).view(s.shape);
  }
  TORCH_CHECK(false, "GptModel::View: block ", block, " has no parameter ", name);
}

torch::Tensor GptModel::Embed(const torch::Tensor& flat0, const torch::Tensor& tokens) const {
  const int64_t T = tokens.size(1);
  torch::Tensor wte = View(flat0, 0, "embed.tokens");
  torch::Tensor wpe = View(flat0, 0, "embed.positions").narrow(0, m_.position_offset, T);
  return torch::embedding(wte, tokens) + wpe.unsqueeze(0);
}

torch::Tensor GptModel::Attention(int block, const torch::Tensor& flat, const torch::Tensor& h) const {
  const std::string p = LayerPrefix(block);
  const int64_t B = h.size(0), T = h.size(1), hd = m_.head_dim();
  const int64_t nq = m_.heads, nkv = m_.kv_heads;
  auto bias = [&](const std::string& n) { return m_.bias ? View(flat, block, n) : torch::Tensor(); };
  torch::Tensor q, k, v;
  if (m_.fused_qkv) {
    torch::Tensor qkv = torch::linear(h, View(flat, block, p + ".attn.qkv.weight"), bias(p + ".attn.qkv.bias"));
    std::vector<torch::Tensor> parts = qkv.split_with_sizes({nq * hd, nkv * hd, nkv * hd}, -1);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = torch::linear(h, View(flat, block, p + ".attn.q.weight"), bias(p + ".attn.q.bias"));
    k = torch::linear(h, View(flat, block, p + ".attn.k.weight"), bias(p + ".attn.k.bias"));
    v = torch::linear(h, View(flat, block, p + ".attn.v.weight"), bias(p + ".attn.v.bias"));
  }
  q = q.view({B, T, nq, hd}).transpose(1, 2);
  k = k.view({B, T, nkv, hd}).transpose(1, 2);
  v = v.view({B, T, nkv, hd}).transpose(1, 2);
  if (nkv != nq) {  // grouped-query attention: each kv head serves nq / nkv query heads
    k = k.repeat_interleave(nq / nkv, 1);
    v = v.repeat_interleave(nq / nkv, 1);
  }
#if TORCH_VERSION_MAJOR >= 2
  // The fused kernel (flash attention on a GPU): the same formula, no [T, T] scores in memory.
  torch::Tensor y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true)
                        .transpose(1, 2).contiguous().view({B, T, nq * hd});
#else
  torch::Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
  torch::Tensor causal = torch::ones({T, T}, torch::dtype(torch::kBool).device(h.device())).triu(1);
  att = torch::softmax(att.masked_fill(causal, -std::numeric_limits<float>::infinity()), -1);
  torch::Tensor y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, nq * hd});
#endif
  return torch::linear(y, View(flat, block, p + ".attn.out.weight"), bias(p + ".attn.out.bias"));
}

torch::Tensor GptModel::Layer(int block, const torch::Tensor& flat, const torch::Tensor& x) const {
  const std::string p = LayerPrefix(block);
  const std::vector<int64_t> c{m_.hidden};
  auto bias = [&](const std::string& n) { return m_.bias ? View(flat, block, n) : torch::Tensor(); };
  torch::Tensor h = torch::layer_norm(x, c, View(flat, block, p + ".norm1.weight"), View(flat, block, p + ".norm1.bias"));
  torch::Tensor out = x + Attention(block, flat, h);
  h = torch::layer_norm(out, c, View(flat, block, p + ".norm2.weight"), View(flat, block, p + ".norm2.bias"));
  h = torch::gelu(torch::linear(h, View(flat, block, p + ".mlp.up.weight"), bias(p + ".mlp.up.bias")), "tanh");
  return out + torch::linear(h, View(flat, block, p + ".mlp.down.weight"), bias(p + ".mlp.down.bias"));
}

torch::Tensor GptModel::Logits(const torch::Tensor& flat_last, const torch::Tensor& flat0,
                               const torch::Tensor& x) const {
  const int last = m_.layers + 1;
  torch::Tensor h = torch::layer_norm(x, {m_.hidden}, View(flat_last, last, "final_norm.weight"),
                                      View(flat_last, last, "final_norm.bias"));
  torch::Tensor head = m_.tied_embeddings ? View(flat0, 0, "embed.tokens") : View(flat_last, last, "lm_head.weight");
  return torch::linear(h, head);
}

torch::Tensor GptModel::HeadLoss(const torch::Tensor& flat_last, const torch::Tensor& flat0, const torch::Tensor& x,
                                 const torch::Tensor& targets) const {
  // The loss in fp32 whatever the compute dtype (a no-op in fp32).
  torch::Tensor logits = Logits(flat_last, flat0, x).to(torch::kFloat32);
  return torch::nn::functional::cross_entropy(logits.view({-1, m_.vocab}), targets.reshape({-1}));
}

torch::Tensor GptModel::HeadLogits(const torch::Tensor& flat_last, const torch::Tensor& flat0,
                                   const torch::Tensor& x) const {
  return Logits(flat_last, flat0, x.narrow(1, x.size(1) - 1, 1)).squeeze(1).to(torch::kFloat32);
}

void GptModel::InitBlock(int block, uint64_t seed, float* out) const {
  std::mt19937_64 rng(seed * 1000003ull + uint64_t(block) * 7919ull + 17);
  // Box-Muller on our own uniform draws: std::normal_distribution differs between
  // standard libraries.
  auto normal = [&]() {
    const double u1 = (double(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    const double u2 = double(rng() >> 11) * (1.0 / 9007199254740992.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  };
  const double residual_std = 0.02 / std::sqrt(2.0 * m_.layers);
  for (const ParamSlot& s : layouts_[block].params) {
    float* p = out + s.offset;
    const bool is_bias = s.name.size() > 5 && s.name.compare(s.name.size() - 5, 5, ".bias") == 0;
    const bool is_norm = s.name.find("norm") != std::string::npos;
    const bool residual = s.name.find("attn.out.weight") != std::string::npos ||
                          s.name.find("mlp.down.weight") != std::string::npos;
    for (int64_t i = 0; i < s.numel; ++i) {
      if (is_bias) p[i] = 0.0f;
      else if (is_norm) p[i] = 1.0f;
      else p[i] = static_cast<float>(normal() * (residual ? residual_std : 0.02));
    }
  }
}

}  // namespace tencache
