// ReferenceGpt: the same GPT written the ordinary libtorch way — nn::Module
// layers that own their parameters, whole-model autograd, no sharding, no
// cache — against which the worker's flat-buffer model is checked.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "common/model_shape.h"

namespace tencache {

struct RefLayerImpl : torch::nn::Module {
  RefLayerImpl(const ModelShape& m);
  torch::Tensor forward(const torch::Tensor& x);
  int heads;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(RefLayer);

struct ReferenceGptImpl : torch::nn::Module {
  explicit ReferenceGptImpl(const ModelShape& m);
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets);
  // Copies block b's flat buffer (layout of DecoderModel) into the modules.
  void LoadBlock(int block, const std::vector<float>& flat);
  ModelShape shape;
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  std::vector<RefLayer> layers;
  torch::nn::LayerNorm final_norm{nullptr};
};
TORCH_MODULE(ReferenceGpt);

}  // namespace tencache
