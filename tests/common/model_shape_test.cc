#include "common/model_shape.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include "tests/common/big_vocab_shape.h"

namespace tencache {
namespace {

// Published parameter counts (Hugging Face model cards / config-derived counts
// reported by the model authors).
const std::map<std::string, uint64_t> kPublished = {
    {"gpt2", 124439808ull},          {"gpt2-medium", 354823168ull},   {"gpt2-large", 774030080ull},
    {"gpt2-xl", 1557611200ull},      {"opt-1.3b", 1315758080ull},     {"opt-6.7b", 6658473984ull},
    {"opt-13b", 12853473280ull},     {"opt-30b", 29974704128ull},     {"llama-2-7b", 6738415616ull},
    {"llama-2-13b", 13015864320ull}, {"llama-2-70b", 68976648192ull}, {"falcon-7b", 6921720704ull},
    {"bloom-7b1", 7069016064ull},
};

TEST(ModelShape, EveryPresetMatchesItsPublishedCountWithinOnePercent) {
  for (const auto& [name, published] : kPublished) {
    StatusOr<ModelShape> m = FindPreset(name);
    ASSERT_TRUE(m.ok()) << name;
    const double rel = std::fabs(double(m->ParamCount()) - double(published)) / double(published);
    EXPECT_LT(rel, 0.01) << name << ": " << m->ParamCount() << " vs published " << published;
  }
}

TEST(ModelShape, TinyPresetCountedByHand) {
  // embed 256x128 + positions 128x128 + 4 layers x (2 LN 512 + qkv 49536 + out 16512
  // + up 66048 + down 65664) + final LN 256.
  ModelShape tiny = *FindPreset("tiny");
  EXPECT_EQ(tiny.ParamCount(), 32768u + 16384u + 4u * 198272u + 256u);
  EXPECT_EQ(tiny.vocab, 256);
}

TEST(ModelShape, Llama70bUsesGroupedQueryAttention) {
  ModelShape m = *FindPreset("llama-2-70b");
  EXPECT_EQ(m.kv_heads, 8);
  for (const TensorShape& t : m.Tensors()) {
    if (t.name == "layers.0.attn.k.weight") {
      EXPECT_EQ(t.numel, 8192u * 1024u);
    } else if (t.name == "layers.0.attn.q.weight") {
      EXPECT_EQ(t.numel, 8192u * 8192u);
    }
  }
}

TEST(ModelShape, Opt67bSizeHistogramMatchesThePaper) {
  // 10Cache reports for OPT-6.7B (fp16): 33.5 MB x128 (q, k, v, out) and
  // 134 MB x64 (fc1, fc2) and one 412 MB embedding.
  ModelShape m = *FindPreset("opt-6.7b");
  std::map<uint64_t, int> hist;
  for (const TensorShape& t : m.Tensors()) hist[t.numel * 2]++;
  EXPECT_EQ(hist[4096ull * 4096 * 2], 128);
  EXPECT_EQ(hist[4096ull * 16384 * 2], 64);
  EXPECT_EQ(hist[50272ull * 4096 * 2], 1);
}

TEST(ModelShape, BlocksPartitionTheParameters) {
  for (const char* name : {"gpt2", "llama-2-7b", "falcon-7b", "bloom-7b1"}) {
    ModelShape m = *FindPreset(name);
    std::vector<uint64_t> blocks = m.BlockParamCounts();
    ASSERT_EQ(int(blocks.size()), m.layers + 2);
    uint64_t sum = 0;
    for (uint64_t b : blocks) sum += b;
    EXPECT_EQ(sum, m.ParamCount()) << name;
    EXPECT_EQ(blocks[1], blocks[m.layers]) << name;  // layers are identical
    EXPECT_EQ(m.BlockParams(1), blocks[1]);
  }
}

TEST(ModelShape, ValidationNamesTheKey) {
  ModelShape m = *FindPreset("gpt2");
  m.heads = 7;  // does not divide 768
  Status s = ValidateModelShape(m, "model");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model.heads: expected a divisor of hidden (768), got 7"), std::string::npos);
  m = *FindPreset("gpt2");
  m.kv_heads = 5;
  EXPECT_NE(ValidateModelShape(m, "model").message().find("model.kv_heads"), std::string::npos);
  m = *FindPreset("gpt2");
  m.seq_len = 4096;  // beyond the learned position table
  EXPECT_NE(ValidateModelShape(m, "model").message().find("model.seq_len"), std::string::npos);
}

TEST(ModelShape, UnknownPresetListsTheKnownOnes) {
  StatusOr<ModelShape> m = FindPreset("llama-3-8b");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("llama-2-7b"), std::string::npos);
  EXPECT_TRUE(FindPreset("gpt2-1.5b").ok());  // alias
}

ModelShape BigVocab() { return BigVocabShape(); }  // tests/common/big_vocab_shape.h

TEST(ModelShape, AnEmbeddingOfMoreThanTwoToThe32ElementsIsCountedExactly) {
  const ModelShape m = BigVocab();
  ASSERT_TRUE(ValidateModelShape(m, "model").ok());
  const std::vector<TensorShape> t = m.Tensors();
  EXPECT_EQ(t[0].name, "embed.tokens");
  EXPECT_EQ(t[0].numel, 4194304000ull);
  EXPECT_EQ(t[0].dims, (std::vector<int64_t>{256000, 16384}));
  // A layer: four 16384^2 attention matrices, up and down of 16384 x 65536, two norms.
  EXPECT_EQ(m.BlockParamCounts(), (std::vector<uint64_t>{4194304000ull, 3221258240ull, 3221258240ull, 16384}));
  EXPECT_EQ(m.ParamCount(), 10636836864ull);
}

}  // namespace
}  // namespace tencache
