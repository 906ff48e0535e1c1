// ShardBytes: one rank's bytes of every block under ZeRO-3, the cut of fp32
// state shards into pieces and the worker's host buffers, for a model whose
// embedding has more than 2^32 elements (every number checked exactly).
#include "common/shard_bytes.h"

#include <gtest/gtest.h>

#include <numeric>
#include "tests/common/big_vocab_shape.h"

namespace tencache {
namespace {

ModelShape BigVocab() { return BigVocabShape(); }  // tests/common/big_vocab_shape.h

TEST(ShardBytes, EightRanksOfABf16RunHoldEveryByte) {
  const ShardBytes s = ShardBytesPerRank(BigVocab(), DType::kBf16, 8);
  const uint64_t elements = 524288000ull + 2 * 402657280ull + 2048;  // ceil(block / 8), per block
  EXPECT_EQ(s.bytes[kStateParam], elements * 2);
  EXPECT_EQ(s.bytes[kStateMaster], elements * 4);
  EXPECT_EQ(s.bytes[kStateAdamM] + s.bytes[kStateAdamV], elements * 8);
  EXPECT_EQ(s.bytes[kStateGrad], elements * 4);
  EXPECT_EQ(s.total(), 23932882944ull);
  // The embedding's state shards come in 3 pieces (2 would be its parameter's size), the rest whole.
  EXPECT_EQ(StatePieces({524288000ull, 402657280ull, 402657280ull, 2048}, 2, DType::kBf16),
            (std::vector<int>{3, 1, 1, 1}));
  EXPECT_EQ(s.tensors, 13u + 5 + 5 + 5);
}

TEST(ShardBytes, OneRankOfAnFp32RunHasTensorsOfMoreThanFourGib) {
  const ShardTensors t = ShardTensorBytes(BigVocab(), DType::kFp32, 1);
  EXPECT_EQ(t.params, (std::vector<uint64_t>{16777216000ull, 12885032960ull, 12885032960ull, 65536}));
  ASSERT_EQ(t.all.size(), 7u + 4 + 4 + 4);
  EXPECT_EQ(t.all[0], 16777216000ull);
  for (size_t i = 1; i < 7; ++i) EXPECT_EQ(t.all[i], 8388608000ull) << i;  // 3 kinds x 2 pieces of 2097152000
  const uint64_t sum = std::accumulate(t.all.begin(), t.all.end(), uint64_t{0});
  EXPECT_EQ(sum, ShardBytesPerRank(BigVocab(), DType::kFp32, 1).total());
  EXPECT_EQ(StatePieceBegin(4194304000ull, 2, 1), 2097152000ull);
  EXPECT_EQ(StatePieceElements(4194304000ull, 3, 0), 1398101334ull);
}

TEST(ShardBytes, TheWorkersHostBuffersForTheLargestShard) {
  JobSpec job;
  job.model = BigVocab();
  job.dtype = DType::kBf16;
  job.train.micro_batch = 1;
  // The split embedding update holds the rows 8 ranks x 2048 tokens may look up.
  EXPECT_EQ(HeldRowElements(job.model, 8, 1), 16384ull * 16384);
  const WorkerHostBuffers b = WorkerHostBufferBytes(job, 8, RankCompute{/*gpu=*/true, 0, 12});
  EXPECT_EQ(b.scatter, (524288000ull + 1) * 4);
  EXPECT_EQ(b.grad_staging, 524288000ull * 8 * 4);
  EXPECT_EQ(b.deferred_grad, 0u);
  EXPECT_EQ(b.embed_grad, 524288000ull * 4);
  EXPECT_EQ(b.held_rows, uint64_t(kHeldRowArrays) * 16384 * 16384 * 4);
}

}  // namespace
}  // namespace tencache
