#include "reference_gpt.h"

#include <cmath>

namespace tencache {

RefLayerImpl::RefLayerImpl(const ModelShape& m) : heads(m.heads) {
  const int64_t h = m.hidden;
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  qkv = register_module("qkv", torch::nn::Linear(h, 3 * h));
  out = register_module("out", torch::nn::Linear(h, h));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  up = register_module("up", torch::nn::Linear(h, m.ffn_hidden));
  down = register_module("down", torch::nn::Linear(m.ffn_hidden, h));
}

torch::Tensor RefLayerImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hd = C / heads;
  auto parts = qkv(norm1(x)).chunk(3, -1);
  auto split = [&](const torch::Tensor& t) { return t.reshape({B, T, heads, hd}).permute({0, 2, 1, 3}); };
  torch::Tensor q = split(parts[0]), k = split(parts[1]), v = split(parts[2]);
  torch::Tensor scores = q.matmul(k.transpose(2, 3)) / std::sqrt(double(hd));
  torch::Tensor mask = torch::triu(torch::ones({T, T}), 1).to(torch::kBool);
  torch::Tensor att = scores.masked_fill(mask, -INFINITY).softmax(-1);
  torch::Tensor y = att.matmul(v).permute({0, 2, 1, 3}).reshape({B, T, C});
  torch::Tensor r = x + out(y);
  return r + down(torch::gelu(up(norm2(r)), "tanh"));
}

ReferenceGptImpl::ReferenceGptImpl(const ModelShape& m) : shape(m) {
  tokens = register_module("tokens", torch::nn::Embedding(m.vocab, m.hidden));
  positions = register_module("positions", torch::nn::Embedding(m.max_positions, m.hidden));
  for (int i = 0; i < m.layers; ++i) layers.push_back(register_module("layer" + std::to_string(i), RefLayer(m)));
  final_norm = register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({int64_t(m.hidden)})));
}

torch::Tensor ReferenceGptImpl::forward(const torch::Tensor& in, const torch::Tensor& targets) {
  const int64_t T = in.size(1);
  torch::Tensor x = tokens(in) + positions(torch::arange(T));
  for (RefLayer& layer : layers) x = layer(x);
  torch::Tensor logits = final_norm(x).matmul(tokens->weight.t());
  return torch::nn::functional::cross_entropy(logits.reshape({-1, shape.vocab}), targets.reshape({-1}));
}

namespace {

// Copies the next `t.numel()` floats of `flat` into t.
void Take(const std::vector<float>& flat, size_t* at, torch::Tensor t) {
  torch::NoGradGuard no_grad;
  t.copy_(torch::from_blob(const_cast<float*>(flat.data()) + *at, t.sizes(), torch::kFloat32));
  *at += t.numel();
}

}  // namespace

void ReferenceGptImpl::LoadBlock(int block, const std::vector<float>& flat) {
  size_t at = 0;
  if (block == 0) {
    Take(flat, &at, tokens->weight);
    Take(flat, &at, positions->weight);
  } else if (block <= shape.layers) {
    RefLayer& l = layers[block - 1];
    for (torch::Tensor t : {l->norm1->weight, l->norm1->bias, l->qkv->weight, l->qkv->bias, l->out->weight,
                            l->out->bias, l->norm2->weight, l->norm2->bias, l->up->weight, l->up->bias,
                            l->down->weight, l->down->bias}) {
      Take(flat, &at, t);
    }
  } else {
    Take(flat, &at, final_norm->weight);
    Take(flat, &at, final_norm->bias);
  }
  TORCH_CHECK(at == flat.size(), "LoadBlock: block ", block, " layout mismatch");
}

}  // namespace tencache
