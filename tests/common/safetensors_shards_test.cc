// ShardedSafetensorsWriter: shards cut as transformers cuts them, an index the
// reader follows, one file when everything fits, stale files of another
// layout removed, nothing left of an unfinished checkpoint.
#include "common/safetensors_shards.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

namespace tencache {
namespace {

namespace fs = std::filesystem;

class ShardedSafetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tencache_shards_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Tensors t0..t{n-1} of `numel` fp32 values each; tensor i holds i*1000 + j.
  Status WriteCheckpoint(int n, int64_t numel, uint64_t max_shard_bytes) {
    std::vector<SafetensorsWriter::Entry> entries;
    for (int i = 0; i < n; ++i) entries.push_back({"t" + std::to_string(i), StDType::kF32, {numel}});
    StatusOr<ShardedSafetensorsWriter> w = ShardedSafetensorsWriter::Begin(dir_.string(), entries, {{"format", "pt"}},
                                                                           max_shard_bytes);
    if (!w.ok()) return w.status();
    for (int i = n - 1; i >= 0; --i) {  // any order
      std::vector<float> v(numel);
      std::iota(v.begin(), v.end(), float(i * 1000));
      TC_RETURN_IF_ERROR(w->Write("t" + std::to_string(i), v.data(), v.size() * sizeof(float)));
    }
    files_ = w->files();
    return w->Finish();
  }
  void ExpectReadsBack(int n, int64_t numel) {
    StatusOr<SafetensorsReader> r = SafetensorsReader::Open(dir_.string());
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->tensors().size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      const StTensor* t = r->Find("t" + std::to_string(i));
      ASSERT_NE(t, nullptr);
      std::vector<float> v(numel);
      ASSERT_TRUE(r->ReadF32(*t, v.data()).ok());
      EXPECT_EQ(v.front(), float(i * 1000));
      EXPECT_EQ(v.back(), float(i * 1000 + numel - 1));
    }
  }
  std::vector<std::string> Listing() {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
  std::vector<std::string> files_;
};

TEST_F(ShardedSafetensors, CutsInOrderAtTheLimitAndIndexesEveryTensor) {
  // 100 bytes each, 250 a shard: [t0 t1] [t2 t3] [t4].
  ASSERT_TRUE(WriteCheckpoint(5, 25, 250).ok());
  EXPECT_EQ(Listing(), (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                                  "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  std::ifstream in(dir_ / "model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), 500u);
  EXPECT_EQ(index["weight_map"]["t1"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["t2"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["t4"], "model-00003-of-00003.safetensors");
  ExpectReadsBack(5, 25);
}

TEST_F(ShardedSafetensors, ATensorLargerThanTheLimitHasAShardOfItsOwn) {
  ASSERT_TRUE(WriteCheckpoint(3, 100, 250).ok());  // 400 bytes each
  EXPECT_EQ(files_.size(), 3u);
  ExpectReadsBack(3, 100);
}

TEST_F(ShardedSafetensors, EverythingInOneShardIsOneFileWithoutIndex) {
  ASSERT_TRUE(WriteCheckpoint(4, 25, kDefaultMaxShardBytes).ok());
  EXPECT_EQ(Listing(), std::vector<std::string>{"model.safetensors"});
  ExpectReadsBack(4, 25);
}

TEST_F(ShardedSafetensors, ANewLayoutRemovesTheOldOnesFiles) {
  ASSERT_TRUE(WriteCheckpoint(5, 25, 250).ok());
  ASSERT_TRUE(WriteCheckpoint(5, 25, kDefaultMaxShardBytes).ok());  // sharded -> one file
  EXPECT_EQ(Listing(), std::vector<std::string>{"model.safetensors"});
  ExpectReadsBack(5, 25);
  ASSERT_TRUE(WriteCheckpoint(5, 25, 300).ok());  // one file -> two shards
  EXPECT_EQ(Listing(), (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                                  "model.safetensors.index.json"}));
  ExpectReadsBack(5, 25);
}

TEST_F(ShardedSafetensors, AnUnfinishedCheckpointLeavesNoFile) {
  {
    StatusOr<ShardedSafetensorsWriter> w = ShardedSafetensorsWriter::Begin(
        dir_.string(), {{"a", StDType::kF32, {4}}, {"b", StDType::kF32, {4}}}, {}, 16);
    ASSERT_TRUE(w.ok());
    float v[4] = {1, 2, 3, 4};
    ASSERT_TRUE(w->Write("a", v, sizeof v).ok());
    EXPECT_FALSE(w->Finish().ok());  // b was never written
  }
  for (const std::string& name : Listing()) EXPECT_EQ(name.find("model-"), std::string::npos) << name;
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
}

TEST_F(ShardedSafetensors, RefusesRepeatedNamesUnknownTensorsAndAZeroLimit) {
  EXPECT_EQ(ShardedSafetensorsWriter::Begin(dir_.string(), {{"a", StDType::kF32, {1}}, {"a", StDType::kF32, {1}}}, {}, 8)
                .status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardedSafetensorsWriter::Begin(dir_.string(), {{"a", StDType::kF32, {1}}}, {}, 0).status().code(),
            StatusCode::kInvalidArgument);
  StatusOr<ShardedSafetensorsWriter> w = ShardedSafetensorsWriter::Begin(dir_.string(), {{"a", StDType::kF32, {1}}}, {}, 8);
  ASSERT_TRUE(w.ok());
  float x = 1;
  EXPECT_EQ(w->Write("zz", &x, 4).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tencache
