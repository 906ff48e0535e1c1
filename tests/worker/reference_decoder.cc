#include "reference_decoder.h"

#include <cmath>
#include <vector>

namespace tencache {
namespace {

using Weights = std::map<std::string, torch::Tensor>;

const torch::Tensor& W(const Weights& w, const std::string& name) {
  auto it = w.find(name);
  TORCH_CHECK(it != w.end(), "reference: no weight ", name);
  return it->second;
}

torch::Tensor Norm(const ModelShape& m, const Weights& w, const std::string& p, const torch::Tensor& x) {
  if (m.norm == NormKind::kRmsNorm) {
    return x / torch::sqrt((x * x).mean(-1, true) + m.norm_eps) * W(w, p + ".weight");
  }
  torch::Tensor mean = x.mean(-1, true);
  torch::Tensor var = ((x - mean) * (x - mean)).mean(-1, true);
  return (x - mean) / torch::sqrt(var + m.norm_eps) * W(w, p + ".weight") + W(w, p + ".bias");
}

torch::Tensor Lin(const ModelShape& m, const Weights& w, const std::string& p, const torch::Tensor& x) {
  torch::Tensor y = torch::matmul(x, W(w, p + ".weight").t());
  return m.bias ? y + W(w, p + ".bias") : y;
}

torch::Tensor Act(MlpKind k, const torch::Tensor& x) {
  switch (k) {
    case MlpKind::kGelu: return 0.5 * x * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case MlpKind::kGeluExact: return 0.5 * x * (1 + torch::erf(x / std::sqrt(2.0)));
    case MlpKind::kRelu: return torch::clamp_min(x, 0);
    case MlpKind::kSwiGlu: return x * torch::sigmoid(x);  // silu, of the gate
  }
  return x;
}

// Pairs (i, i + d/2) of [T, d] rows turned by t * theta^(-2i/d).
torch::Tensor Rope(const ModelShape& m, const torch::Tensor& x) {  // x [T, d]
  const int64_t T = x.size(0), d = x.size(1), half = d / 2;
  torch::Tensor out = x.clone();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(t) * std::pow(m.rope_theta, -2.0 * double(i) / double(d));
      torch::Tensor x1 = x[t][i], x2 = x[t][i + half];
      out[t][i] = x1 * std::cos(a) - x2 * std::sin(a);
      out[t][i + half] = x2 * std::cos(a) + x1 * std::sin(a);
    }
  }
  return out;
}

// BLOOM's slopes: a geometric series for the largest power of two, then every
// other term of the next power's series.
std::vector<double> Slopes(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  std::vector<double> s;
  for (int i = 0; i < p; ++i) s.push_back(std::pow(std::pow(2.0, -std::pow(2.0, -(std::log2(double(p)) - 3))), i + 1));
  const double extra = std::pow(2.0, -std::pow(2.0, -(std::log2(2.0 * p) - 3)));
  for (int i = 0; i < n - p && i < p; ++i) s.push_back(std::pow(extra, 2 * i + 1));
  return s;
}

torch::Tensor Attention(const ModelShape& m, const Weights& w, const std::string& p, const torch::Tensor& h) {
  const int64_t B = h.size(0), T = h.size(1), hd = m.hidden / m.heads;
  const int64_t nq = m.heads, nkv = m.kv_heads;
  torch::Tensor q, k, v;
  if (m.fused_qkv) {
    torch::Tensor all = Lin(m, w, p + ".attn.qkv", h);
    q = all.narrow(-1, 0, nq * hd);
    k = all.narrow(-1, nq * hd, nkv * hd);
    v = all.narrow(-1, (nq + nkv) * hd, nkv * hd);
  } else {
    q = Lin(m, w, p + ".attn.q", h);
    k = Lin(m, w, p + ".attn.k", h);
    v = Lin(m, w, p + ".attn.v", h);
  }
  const std::vector<double> slopes = Slopes(int(nq));
  torch::Tensor y = torch::zeros({B, T, nq * hd}, h.options());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t head = 0; head < nq; ++head) {
      const int64_t kvh = head / (nq / nkv);
      torch::Tensor qh = q[b].narrow(-1, head * hd, hd), kh = k[b].narrow(-1, kvh * hd, hd);
      torch::Tensor vh = v[b].narrow(-1, kvh * hd, hd);
      if (m.position == PositionKind::kRotary) {
        qh = Rope(m, qh);
        kh = Rope(m, kh);
      }
      torch::Tensor s = torch::matmul(qh, kh.t()) / std::sqrt(double(hd));  // [T, T]
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < T; ++j) {
          if (j > t) s[t][j] = -INFINITY;
          else if (m.position == PositionKind::kAlibi) s[t][j] = s[t][j] + slopes[head] * double(j - t);
        }
      }
      torch::Tensor e = torch::exp(s - std::get<0>(s.max(-1, true)));
      y[b].narrow(-1, head * hd, hd).copy_(torch::matmul(e / e.sum(-1, true), vh));
    }
  }
  return Lin(m, w, p + ".attn.out", y);
}

torch::Tensor Mlp(const ModelShape& m, const Weights& w, const std::string& p, const torch::Tensor& h) {
  torch::Tensor up = Lin(m, w, p + ".mlp.up", h);
  torch::Tensor inner = m.mlp == MlpKind::kSwiGlu ? Act(m.mlp, Lin(m, w, p + ".mlp.gate", h)) * up : Act(m.mlp, up);
  return Lin(m, w, p + ".mlp.down", inner);
}

}  // namespace

torch::Tensor ReferenceLogits(const ModelShape& m, const Weights& w, const torch::Tensor& tokens) {
  const int64_t T = tokens.size(1);
  torch::Tensor x = W(w, "embed.tokens").index_select(0, tokens.reshape({-1})).view({tokens.size(0), T, m.hidden});
  if (m.position == PositionKind::kLearned) {
    x = x + W(w, "embed.positions").narrow(0, m.position_offset, T);
  }
  if (m.embedding_norm) x = Norm(m, w, "embed.norm", x);
  for (int i = 0; i < m.layers; ++i) {
    const std::string p = "layers." + std::to_string(i);
    torch::Tensor h = Norm(m, w, p + ".norm1", x);
    if (m.parallel_block) {
      x = x + Attention(m, w, p, h) + Mlp(m, w, p, h);
    } else {
      x = x + Attention(m, w, p, h);
      x = x + Mlp(m, w, p, Norm(m, w, p + ".norm2", x));
    }
  }
  x = Norm(m, w, "final_norm", x);
  return torch::matmul(x, W(w, m.tied_embeddings ? "embed.tokens" : "lm_head.weight").t());
}

}  // namespace tencache
