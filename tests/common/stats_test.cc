#include "common/stats.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

TEST(Median, OddCountIsTheMiddleValueWhateverTheOrder) {
  EXPECT_DOUBLE_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(Median({5.0, 9.0, 1.0, 7.0, 3.0}), 5.0);
  EXPECT_DOUBLE_EQ(Median({4.5}), 4.5);
}

TEST(Median, EvenCountIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_DOUBLE_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(Median({10.0, 0.0}), 5.0);
  EXPECT_DOUBLE_EQ(Median({2.0, 2.0, 8.0, 8.0, 1.0, 9.0}), 5.0);
}

TEST(Median, EmptyIsZeroAndOutliersDoNotMoveIt) {
  EXPECT_DOUBLE_EQ(Median({}), 0.0);
  EXPECT_DOUBLE_EQ(Median({1.0, 1.1, 1e9, 0.9, -1e9}), 1.0);
}

}  // namespace
}  // namespace tencache
