#include "worker/communicator.h"

#include <gtest/gtest.h>

#include <thread>

namespace tencache {
namespace {

// Runs fn(rank, comm) on `size` threads.
template <typename Fn>
void OnRanks(int size, Fn fn) {
  auto comms = MakeThreadCommunicators(size, 10000);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, comms[r].get()); });
  for (auto& t : threads) t.join();
}

class CommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorTest, AllGatherPlacesEachShard) {
  const int n = GetParam();
  OnRanks(n, [&](int rank, Communicator* comm) {
    ASSERT_EQ(comm->rank(), rank);
    ASSERT_EQ(comm->size(), n);
    std::vector<float> shard(5), full(5 * n, -1);
    for (int i = 0; i < 5; ++i) shard[i] = rank * 100 + i;
    ASSERT_TRUE(comm->AllGather(shard.data(), full.data(), 5 * sizeof(float)).ok());
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < 5; ++i) EXPECT_EQ(full[r * 5 + i], r * 100 + i);
    }
    // In place: the shard already sits in the gathered buffer.
    std::vector<float> inplace(5 * n, 0);
    for (int i = 0; i < 5; ++i) inplace[rank * 5 + i] = rank + i;
    ASSERT_TRUE(comm->AllGather(inplace.data() + rank * 5, inplace.data(), 5 * sizeof(float)).ok());
    for (int r = 0; r < n; ++r) EXPECT_EQ(inplace[r * 5 + 4], r + 4);
  });
}

TEST_P(CommunicatorTest, ReduceScatterSumsEachChunk) {
  const int n = GetParam();
  OnRanks(n, [&](int rank, Communicator* comm) {
    std::vector<float> full(3 * n), out(3);
    for (int i = 0; i < 3 * n; ++i) full[i] = float(rank + 1) * i;
    ASSERT_TRUE(comm->ReduceScatterSum(full.data(), out.data(), 3).ok());
    const float ranks_sum = n * (n + 1) / 2.0f;  // sum of (r + 1)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], ranks_sum * (rank * 3 + i));
    double x[2] = {double(rank), 1.0};
    ASSERT_TRUE(comm->AllReduceSum(x, 2).ok());
    EXPECT_EQ(x[0], n * (n - 1) / 2.0);
    EXPECT_EQ(x[1], double(n));
    EXPECT_TRUE(comm->Barrier().ok());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CommunicatorTest, ::testing::Values(1, 2, 3, 4, 7));

TEST(Communicator, SoloCopiesNothingInPlace) {
  auto comm = MakeSoloCommunicator();
  float buf[4] = {1, 2, 3, 4};
  ASSERT_TRUE(comm->AllGather(buf, buf, sizeof buf).ok());
  float out[4];
  ASSERT_TRUE(comm->ReduceScatterSum(buf, out, 4).ok());
  EXPECT_EQ(out[3], 4);
}

TEST(Communicator, MissingRankTimesOut) {
  auto comms = MakeThreadCommunicators(2, 50);
  Status s = comms[0]->Barrier();  // rank 1 never arrives
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("barrier"), std::string::npos);
}

}  // namespace
}  // namespace tencache
