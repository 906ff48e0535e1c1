#include "worker/decoder_model.h"

#include <torch/version.h>

#include <cmath>
#include <limits>
#include <random>

namespace tencache {

Status CheckWorkerSupports(const ModelShape& m) { return ValidateModelShape(m, "model"); }

std::vector<double> AlibiSlopes(int heads) {
  const int pow2 = 1 << int(std::floor(std::log2(double(heads))));
  std::vector<double> slopes;
  const double base = std::pow(2.0, -8.0 / pow2);
  for (int i = 1; i <= pow2; ++i) slopes.push_back(std::pow(base, i));
  if (pow2 != heads) {  // the odd powers of the next power of two's base fill the rest
    const double extra = std::pow(2.0, -4.0 / pow2);
    for (int i = 0; i < std::min(pow2, heads - pow2); ++i) slopes.push_back(std::pow(extra, 2 * i + 1));
  }
  return slopes;
}

namespace {

std::vector<BlockLayout> Layouts(const ModelShape& m) {
  std::vector<BlockLayout> out(m.num_blocks());
  for (const TensorShape& t : m.Tensors()) {
    BlockLayout& b = out[t.block];
    b.params.push_back({t.name, t.dims, b.numel, int64_t(t.numel)});
    b.numel += int64_t(t.numel);
  }
  return out;
}

std::string LayerPrefix(int block) { return "layers." + std::to_string(block - 1); }

}  // namespace

DecoderModel::DecoderModel(const ModelShape& m) : m_(m), layouts_(Layouts(m)) {
  if (m.position == PositionKind::kAlibi) alibi_slopes_ = AlibiSlopes(m.heads);
}

torch::Tensor DecoderModel::View(const BlockWeights& w, int block, const std::string& name) const {
  const std::vector<ParamSlot>& params = layouts_[block].params;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSlot& s = params[i];
    if (s.name != name) continue;
    return w.leaves().empty() ? w.flat().narrow(0, s.offset, s.numel).view(s.shape) : w.leaves()[i];
  }
  TORCH_CHECK(false, "DecoderModel::View: block ", block, " has no parameter ", name);
}

BlockWeights DecoderModel::WithGradients(const torch::Tensor& flat, int block, const torch::Tensor& grad) const {
  TORCH_CHECK(grad.numel() >= layouts_[block].numel && flat.numel() >= layouts_[block].numel,
              "DecoderModel::WithGradients: block ", block, " needs ", layouts_[block].numel, " elements");
  BlockWeights w(flat);
  for (const ParamSlot& s : layouts_[block].params) {
    torch::Tensor leaf = flat.narrow(0, s.offset, s.numel).view(s.shape).detach().requires_grad_(true);
    leaf.mutable_grad() = grad.narrow(0, s.offset, s.numel).view(s.shape);
    w.leaves_.push_back(std::move(leaf));
  }
  return w;
}

std::vector<torch::Tensor> Backward(const torch::Tensor& out, const torch::Tensor& d_out,
                                    const std::vector<torch::Tensor>& inputs,
                                    const std::vector<const BlockWeights*>& weights) {
  std::vector<torch::Tensor> leaves = inputs;
  for (const BlockWeights* w : weights) leaves.insert(leaves.end(), w->leaves().begin(), w->leaves().end());
  std::vector<torch::Tensor> d_outs;
  if (d_out.defined()) d_outs.push_back(d_out);
  torch::autograd::backward({out}, d_outs, /*retain_graph=*/false, /*create_graph=*/false, leaves);
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& in : inputs) {
    grads.push_back(in.grad());
    in.mutable_grad() = torch::Tensor();
  }
  return grads;
}

// LayerNorm (weight and bias), or RMSNorm (weight only) with its statistics in
// fp32: x / sqrt(mean(x^2) + eps) * weight.
torch::Tensor DecoderModel::Norm(int block, const BlockWeights& flat, const std::string& prefix,
                                 const torch::Tensor& x) const {
  torch::Tensor w = View(flat, block, prefix + ".weight");
  if (m_.norm == NormKind::kLayerNorm) {
    return torch::layer_norm(x, {m_.hidden}, w, View(flat, block, prefix + ".bias"), m_.norm_eps);
  }
  torch::Tensor xf = x.to(torch::promote_types(x.scalar_type(), torch::kFloat32));
  xf = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + m_.norm_eps);
  return w * xf.to(x.scalar_type());
}

torch::Tensor DecoderModel::Linear(int block, const BlockWeights& flat, const std::string& prefix,
                                   const torch::Tensor& x) const {
  return torch::linear(x, View(flat, block, prefix + ".weight"),
                       m_.bias ? View(flat, block, prefix + ".bias") : torch::Tensor());
}

torch::Tensor DecoderModel::Embed(const BlockWeights& flat0, const torch::Tensor& tokens) const {
  const int64_t T = tokens.size(1);
  torch::Tensor x = torch::embedding(View(flat0, 0, "embed.tokens"), tokens);
  if (m_.position == PositionKind::kLearned) {
    x = x + View(flat0, 0, "embed.positions").narrow(0, m_.position_offset, T).unsqueeze(0);
  }
  if (m_.embedding_norm) x = Norm(0, flat0, "embed.norm", x);
  return x;
}

// Rotary positions as Llama and Falcon apply them: dimension pairs (i, i + d/2)
// of each head turn by angle t x theta^(-2i/d) at position t.
torch::Tensor DecoderModel::Rotate(const torch::Tensor& t) const {
  const int64_t T = t.size(2), d = t.size(3), half = d / 2;
  const auto f32 = torch::TensorOptions().dtype(torch::promote_types(t.scalar_type(), torch::kFloat32)).device(t.device());
  torch::Tensor inv_freq =
      torch::pow(m_.rope_theta, torch::arange(0, half, f32) * (-2.0 / double(d)));  // [d/2]
  torch::Tensor angle = torch::outer(torch::arange(0, T, f32), inv_freq);        // [T, d/2]
  torch::Tensor cos = torch::cat({angle, angle}, -1).cos().to(t.scalar_type());  // [T, d]
  torch::Tensor sin = torch::cat({angle, angle}, -1).sin().to(t.scalar_type());
  torch::Tensor rotated = torch::cat({-t.narrow(3, half, half), t.narrow(3, 0, half)}, 3);
  return t * cos + rotated * sin;
}

torch::Tensor DecoderModel::Attention(int block, const BlockWeights& flat, const torch::Tensor& h) const {
  const std::string p = LayerPrefix(block);
  const int64_t B = h.size(0), T = h.size(1), hd = m_.head_dim();
  const int64_t nq = m_.heads, nkv = m_.kv_heads;
  torch::Tensor q, k, v;
  if (m_.fused_qkv) {
    std::vector<torch::Tensor> parts = Linear(block, flat, p + ".attn.qkv", h).split_with_sizes({nq * hd, nkv * hd, nkv * hd}, -1);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = Linear(block, flat, p + ".attn.q", h);
    k = Linear(block, flat, p + ".attn.k", h);
    v = Linear(block, flat, p + ".attn.v", h);
  }
  q = q.view({B, T, nq, hd}).transpose(1, 2);  // [B, heads, T, hd]
  k = k.view({B, T, nkv, hd}).transpose(1, 2);
  v = v.view({B, T, nkv, hd}).transpose(1, 2);
  if (m_.position == PositionKind::kRotary) {
    q = Rotate(q);
    k = Rotate(k);
  }
  if (nkv != nq) {  // grouped-query attention: each kv head serves nq / nkv query heads
    k = k.repeat_interleave(nq / nkv, 1);
    v = v.repeat_interleave(nq / nkv, 1);
  }
  torch::Tensor y;
#if TORCH_VERSION_MAJOR >= 2
  if (m_.position != PositionKind::kAlibi) {
    // The fused kernel (flash attention on a GPU): the same formula, no [T, T] scores in memory.
    y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  }
#endif
  if (!y.defined()) {
    torch::Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));  // [B, heads, T, T]
    if (m_.position == PositionKind::kAlibi) {
      // Head i adds slope_i x (j - t) to the score of key j at query t.
      const auto f32 =
          torch::TensorOptions().dtype(torch::promote_types(h.scalar_type(), torch::kFloat32)).device(h.device());
      torch::Tensor pos = torch::arange(0, T, f32);
      torch::Tensor slopes = torch::tensor(alibi_slopes_, torch::kFloat64).to(f32).view({nq, 1, 1});
      att = att + (slopes * (pos.view({1, 1, T}) - pos.view({1, T, 1}))).to(att.scalar_type());
    }
    torch::Tensor causal = torch::ones({T, T}, torch::dtype(torch::kBool).device(h.device())).triu(1);
    att = torch::softmax(att.masked_fill(causal, -std::numeric_limits<float>::infinity()), -1);
    y = torch::matmul(att, v);
  }
  y = y.transpose(1, 2).contiguous().view({B, T, nq * hd});
  return Linear(block, flat, p + ".attn.out", y);
}

torch::Tensor DecoderModel::Mlp(int block, const BlockWeights& flat, const torch::Tensor& h) const {
  const std::string p = LayerPrefix(block);
  torch::Tensor up = Linear(block, flat, p + ".mlp.up", h);
  switch (m_.mlp) {
    case MlpKind::kGelu: up = torch::gelu(up, "tanh"); break;
    case MlpKind::kGeluExact: up = torch::gelu(up); break;
    case MlpKind::kRelu: up = torch::relu(up); break;
    case MlpKind::kSwiGlu: up = torch::silu(Linear(block, flat, p + ".mlp.gate", h)) * up; break;
  }
  return Linear(block, flat, p + ".mlp.down", up);
}

torch::Tensor DecoderModel::Layer(int block, const BlockWeights& flat, const torch::Tensor& x) const {
  const std::string p = LayerPrefix(block);
  torch::Tensor h = Norm(block, flat, p + ".norm1", x);
  if (m_.parallel_block) return x + Attention(block, flat, h) + Mlp(block, flat, h);
  torch::Tensor out = x + Attention(block, flat, h);
  return out + Mlp(block, flat, Norm(block, flat, p + ".norm2", out));
}

torch::Tensor DecoderModel::Logits(const BlockWeights& flat_last, const BlockWeights& flat0,
                                   const torch::Tensor& x) const {
  const int last = m_.layers + 1;
  torch::Tensor h = Norm(last, flat_last, "final_norm", x);
  torch::Tensor head = m_.tied_embeddings ? View(flat0, 0, "embed.tokens") : View(flat_last, last, "lm_head.weight");
  return torch::linear(h, head);
}

torch::Tensor DecoderModel::HeadLoss(const BlockWeights& flat_last, const BlockWeights& flat0, const torch::Tensor& x,
                                     const torch::Tensor& targets) const {
  // The loss in fp32 whatever the compute dtype (a no-op in fp32).
  torch::Tensor logits = Logits(flat_last, flat0, x).to(torch::kFloat32);
  return torch::nn::functional::cross_entropy(logits.view({-1, m_.vocab}), targets.reshape({-1}));
}

torch::Tensor DecoderModel::HeadLogits(const BlockWeights& flat_last, const BlockWeights& flat0,
                                       const torch::Tensor& x) const {
  return Logits(flat_last, flat0, x.narrow(1, x.size(1) - 1, 1)).squeeze(1).to(torch::kFloat32);
}

void DecoderModel::InitBlock(int block, uint64_t seed, float* out) const {
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
