#include "worker/decoder_model.h"

#include <gtest/gtest.h>

#include "reference_gpt.h"
#include "worker/process_memory.h"

namespace tencache {
namespace {

ModelShape Tiny() {
  ModelShape m = *FindPreset("tiny");
  m.layers = 2;
  m.seq_len = 16;
  return m;
}

TEST(DecoderModel, LayoutsMatchTheModelShape) {
  for (const std::string& name : PresetNames()) {
    ModelShape m = *FindPreset(name);
    ASSERT_TRUE(CheckWorkerSupports(m).ok()) << name;
    DecoderModel model(m);
    std::vector<uint64_t> blocks = m.BlockParamCounts();
    std::vector<TensorShape> tensors = m.Tensors();
    size_t t = 0;
    for (int b = 0; b < model.num_blocks(); ++b) {
      EXPECT_EQ(uint64_t(model.layout(b).numel), blocks[b]) << name << " block " << b;
      for (const ParamSlot& s : model.layout(b).params) {
        ASSERT_LT(t, tensors.size());
        EXPECT_EQ(s.name, tensors[t].name);
        EXPECT_EQ(uint64_t(s.numel), tensors[t].numel);
        EXPECT_EQ(s.shape, tensors[t].dims) << s.name;
        ++t;
      }
    }
  }
}

TEST(DecoderModel, TrainsEveryPresetAndRejectsOnlyInvalidShapes) {
  for (const std::string& name : PresetNames()) EXPECT_TRUE(CheckWorkerSupports(*FindPreset(name)).ok()) << name;
  ModelShape m = *FindPreset("llama-2-7b");
  m.kv_heads = 5;
  Status s = CheckWorkerSupports(m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.kv_heads"), std::string::npos) << s.message();
  m = *FindPreset("llama-2-7b");
  m.hidden = 4096 + 32;  // head size 129: rotary needs pairs
  m.heads = 32;
  EXPECT_NE(CheckWorkerSupports(m).message().find("even head size"), std::string::npos);
}

TEST(DecoderModel, AlibiSlopesFollowBloom) {
  const std::vector<double> four = AlibiSlopes(4);
  ASSERT_EQ(four.size(), 4u);
  EXPECT_DOUBLE_EQ(four[0], 0.25);
  EXPECT_DOUBLE_EQ(four[3], 0.25 * 0.25 * 0.25 * 0.25);
  const std::vector<double> six = AlibiSlopes(6);  // 4 of 2^(-2i), then 2^(-1), 2^(-3)
  ASSERT_EQ(six.size(), 6u);
  EXPECT_DOUBLE_EQ(six[4], 0.5);
  EXPECT_DOUBLE_EQ(six[5], 0.125);
}

TEST(DecoderModel, InitIsAPureFunctionOfSeedAndBlock) {
  DecoderModel model(Tiny());
  std::vector<float> a(model.layout(1).numel), b(a.size()), c(a.size());
  model.InitBlock(1, 5, a.data());
  model.InitBlock(1, 5, b.data());
  model.InitBlock(1, 6, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a[0], 1.0f);  // norm1.weight
  double sum2 = 0;
  const ParamSlot& up = model.layout(1).params[8];
  ASSERT_EQ(up.name, "layers.0.mlp.up.weight");
  for (int64_t i = 0; i < up.numel; ++i) sum2 += double(a[up.offset + i]) * a[up.offset + i];
  EXPECT_NEAR(std::sqrt(sum2 / up.numel), 0.02, 0.002);
}

TEST(DecoderModel, ForwardAndGradientsMatchTheReferenceModel) {
  torch::manual_seed(0);
  const ModelShape m = Tiny();
  DecoderModel model(m);
  ReferenceGpt ref(m);
  std::vector<std::vector<float>> flats(model.num_blocks());
  for (int b = 0; b < model.num_blocks(); ++b) {
    flats[b].resize(model.layout(b).numel);
    model.InitBlock(b, 1, flats[b].data());
    ref->LoadBlock(b, flats[b]);
  }
  torch::Tensor tokens = torch::randint(0, 256, {2, 16}, torch::kLong);
  torch::Tensor targets = torch::randint(0, 256, {2, 16}, torch::kLong);

  std::vector<torch::Tensor> params;
  for (auto& f : flats) params.push_back(torch::from_blob(f.data(), {int64_t(f.size())}).requires_grad_(true));
  torch::Tensor x = model.Embed(params[0], tokens);
  for (int b = 1; b <= m.layers; ++b) x = model.Layer(b, params[b], x);
  torch::Tensor loss = model.HeadLoss(params.back(), params[0], x, targets);
  loss.backward();

  torch::Tensor ref_loss = ref->forward(tokens, targets);
  ref_loss.backward();
  EXPECT_NEAR(loss.item<float>(), ref_loss.item<float>(), 1e-5);
  EXPECT_NEAR(loss.item<float>(), std::log(256.0f), 0.1);  // untrained: near uniform
  // Gradients of the tied embedding and of a layer's weights agree.
  torch::Tensor g_tokens = model.View(params[0].grad(), 0, "embed.tokens");
  EXPECT_TRUE(torch::allclose(g_tokens, ref->tokens->weight.grad(), 1e-4, 1e-6));
  torch::Tensor g_up = model.View(params[1].grad(), 1, "layers.0.mlp.up.weight");
  EXPECT_TRUE(torch::allclose(g_up, ref->layers[0]->up->weight.grad(), 1e-4, 1e-6));
}

TEST(DecoderModel, ViewsShareTheFlatStorage) {
  DecoderModel model(Tiny());
  std::vector<float> flat(model.layout(1).numel, 0.0f);
  torch::Tensor t = torch::from_blob(flat.data(), {int64_t(flat.size())});
  model.View(t, 1, "layers.0.norm1.bias").fill_(3.0f);
  EXPECT_EQ(flat[128], 3.0f);  // norm1.bias follows the 128 weights of norm1
  EXPECT_EQ(flat[127], 0.0f);
}

// A Llama layer and untied head large enough that a block dwarfs the
// activations (a layer 16.8 M parameters, 67 MB in fp32).
ModelShape WideLlama() {
  ModelShape m = Tiny();
  m.hidden = 1024, m.heads = 8, m.kv_heads = 8, m.ffn_hidden = 4096, m.vocab = 4096, m.seq_len = 16;
  m.mlp = MlpKind::kSwiGlu, m.norm = NormKind::kRmsNorm, m.position = PositionKind::kRotary;
  m.bias = false, m.tied_embeddings = false;
  return m;
}

TEST(DecoderModel, LeafGradientsEqualTheFlatBuffersBitForBit) {
  torch::manual_seed(0);
  for (bool tied : {false, true}) {
    ModelShape m = Tiny();
    m.tied_embeddings = tied;
    DecoderModel model(m);
    std::vector<torch::Tensor> flats;
    for (int b = 0; b < model.num_blocks(); ++b) flats.push_back(torch::randn({model.layout(b).numel}) * 0.02);
    const int last = m.layers + 1;
    torch::Tensor tokens = torch::randint(0, m.vocab, {2, 16}, torch::kLong), targets = torch::randint(0, m.vocab, {2, 16}, torch::kLong);
    torch::Tensor x = torch::randn({2, 16, m.hidden});
    // Through flat leaves, as autograd does by itself.
    std::vector<torch::Tensor> leaves;
    for (const torch::Tensor& f : flats) leaves.push_back(f.detach().requires_grad_(true));
    torch::Tensor xin = x.detach().requires_grad_(true);
    torch::Tensor out = model.Layer(1, leaves[1], xin);
    torch::Tensor loss = model.HeadLoss(leaves[last], leaves[0], out, targets) + model.Embed(leaves[0], tokens).sum();
    loss.backward();
    // Through WithGradients, each block's gradient accumulating into one buffer.
    std::vector<torch::Tensor> grads;
    std::vector<BlockWeights> ws;
    for (int b = 0; b < model.num_blocks(); ++b) {
      grads.push_back(torch::zeros({model.layout(b).numel + 3}));  // padding past the block stays as it is
      grads.back().narrow(0, model.layout(b).numel, 3).fill_(7.0f);
      ws.push_back(model.WithGradients(flats[b], b, grads.back()));
    }
    torch::Tensor xin2 = x.detach().requires_grad_(true);
    torch::Tensor out2 = model.Layer(1, ws[1], xin2);
    torch::Tensor loss2 = model.HeadLoss(ws[last], ws[0], out2, targets) + model.Embed(ws[0], tokens).sum();
    std::vector<torch::Tensor> d = Backward(loss2, torch::Tensor(), {xin2}, {&ws[0], &ws[1], &ws[last]});
    ASSERT_EQ(d.size(), 1u);
    EXPECT_TRUE(torch::equal(d[0], xin.grad())) << "tied " << tied;
    EXPECT_FALSE(xin2.grad().defined());
    for (int b : {0, 1, last}) {
      const int64_t n = model.layout(b).numel;
      EXPECT_TRUE(torch::equal(grads[b].narrow(0, 0, n), leaves[b].grad())) << "tied " << tied << " block " << b;
      EXPECT_TRUE(torch::equal(grads[b].narrow(0, n, 3), torch::full({3}, 7.0f))) << "block " << b;
    }
  }
}

// A flat leaf's backward allocates a whole block of zeros for each weight and
// sums them (its peak about three blocks); through the leaves of WithGradients
// a weight's gradient or two are alive at once beside the buffer (the head's
// one weight: its gradient, then added into the buffer).
TEST(DecoderModel, BackwardAllocatesNoBlockSizedTemporaries) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator keeps freed memory in quarantine";
#endif
  torch::manual_seed(0);
  const ModelShape m = WideLlama();
  DecoderModel model(m);
  for (int b : {1, m.layers + 1}) {
    const int64_t n = model.layout(b).numel;
    int64_t largest = 0;  // the head's one weight is the whole block
    for (const ParamSlot& s : model.layout(b).params) largest = std::max(largest, s.numel);
    torch::Tensor flat = torch::randn({n}) * 0.02, grad = torch::zeros({n});
    torch::Tensor x = torch::randn({1, 16, m.hidden}), dx = torch::randn({1, 16, m.hidden});
    torch::Tensor targets = torch::randint(0, m.vocab, {1, 16}, torch::kLong);
    if (!ResetPeakResidentBytes()) GTEST_SKIP() << "the kernel does not reset the resident peak";
    const long long before = ReadResidentBytes().now;
    {
      BlockWeights w = model.WithGradients(flat, b, grad);
      torch::Tensor in = x.detach().requires_grad_(true);
      if (b == 1) {
        Backward(model.Layer(b, w, in), dx, {in}, {&w});
      } else {
        Backward(model.HeadLoss(w, BlockWeights(torch::Tensor()), in, targets), torch::Tensor(), {in}, {&w});
      }
    }
    const double grown = double(ReadResidentBytes().peak - before);
    EXPECT_LT(grown, double(largest + 3 * n / 4) * sizeof(float)) << "block " << b << ": " << n << " parameters";
    EXPECT_GT(grad.abs().sum().item<double>(), 0.0);
  }
}

}  // namespace
}  // namespace tencache
