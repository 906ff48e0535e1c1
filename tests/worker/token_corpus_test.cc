#include "common/token_corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace tencache {
namespace {

namespace fs = std::filesystem;

class TokenCorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_corpus_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream((dir_ / name).string(), std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(TokenCorpusTest, TextIsByteLevel) {
  auto c = TokenCorpus::Open(Write("a.txt", "hello"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->size(), 5u);
  EXPECT_EQ((*c)->token_bytes(), 1);
  EXPECT_EQ((*c)->Token(1), 'e');
}

TEST_F(TokenCorpusTest, Uint16Tokens) {
  std::string raw = {char(0x34), char(0x12), char(0xff), char(0x00)};
  auto c = TokenCorpus::Open(Write("t.bin", raw));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->size(), 2u);
  EXPECT_EQ((*c)->Token(0), 0x1234);
  EXPECT_EQ((*c)->Token(1), 0xff);
  EXPECT_EQ((*c)->max_token(), 0x1234);
}

TEST_F(TokenCorpusTest, Uint32TokensForLargeVocabularies) {
  std::string raw = {char(0xa0), char(0x86), char(0x01), char(0x00), char(0x07), char(0), char(0), char(0)};
  auto c = TokenCorpus::Open(Write("t.u32", raw));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->size(), 2u);
  EXPECT_EQ((*c)->token_bytes(), 4);
  EXPECT_EQ((*c)->Token(0), 100000);  // beyond uint16
  EXPECT_EQ((*c)->max_token(), 100000);
  Status s = TokenCorpus::Open(Write("big.u32", std::string(3, char(0)) + char(0x80))).status();
  EXPECT_NE(s.message().find("token 0 is 2147483648: expected ids below 2^31"), std::string::npos) << s.message();
  EXPECT_NE(TokenCorpus::Open(Write("odd.u32", "abcdef")).status().message().find("whole number of 4-byte tokens"),
            std::string::npos);
}

TEST_F(TokenCorpusTest, BadFiles) {
  auto missing = TokenCorpus::Open((dir_ / "nope.txt").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.txt"), std::string::npos);
  EXPECT_EQ(TokenCorpus::Open(Write("e.txt", "")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(TokenCorpus::Open(Write("odd.u16", "abc")).status().message().find("whole number of 2-byte tokens"),
            std::string::npos);
}

TEST_F(TokenCorpusTest, SamplerIsDeterministicAndVisitsEveryWindowOncePerEpoch) {
  std::string text;  // pseudo-random bytes: every window's content is distinct
  uint64_t x = 12345;
  for (int i = 0; i < 1001; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text.push_back(char(x >> 56));
  }
  auto corpus = *TokenCorpus::Open(Write("c.txt", text));
  BatchSampler a(corpus, 10, 4, 7), b(corpus, 10, 4, 7), other(corpus, 10, 4, 8);
  ASSERT_EQ(a.windows(), 100u);
  std::set<int64_t> starts;
  int64_t seq[11], seq2[11];
  bool differs = false;
  for (int step = 0; step < 25; ++step) {  // 25 steps x 4 = one epoch
    for (int j = 0; j < 4; ++j) {
      a.Sequence(step, j, seq);
      b.Sequence(step, j, seq2);
      EXPECT_TRUE(std::equal(seq, seq + 11, seq2));
      other.Sequence(step, j, seq2);
      differs |= !std::equal(seq, seq + 11, seq2);
      // Which window is it? (Windows start every 10 tokens.)
      for (int64_t w = 0; w < 100; ++w) {
        bool match = true;
        for (int i = 0; i <= 10 && match; ++i) match = seq[i] == corpus->Token(w * 10 + i);
        if (match) starts.insert(w);
      }
    }
  }
  EXPECT_TRUE(differs);  // another seed, another order
  EXPECT_EQ(starts.size(), 100u);
}

TEST_F(TokenCorpusTest, SequencesDoNotDependOnTheOrderTheyAreAskedFor) {
  std::string text(5000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char(i * 7919 % 251);
  auto corpus = *TokenCorpus::Open(Write("d.txt", text));
  BatchSampler forward(corpus, 16, 8, 3), backward(corpus, 16, 8, 3);
  int64_t x[17], y[17];
  for (int j = 7; j >= 0; --j) {
    backward.Sequence(400, j, y);  // epoch change in between
    backward.Sequence(0, j, y);
    forward.Sequence(0, j, x);
    EXPECT_TRUE(std::equal(x, x + 17, y)) << j;
  }
}

}  // namespace
}  // namespace tencache
