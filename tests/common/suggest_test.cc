#include "common/suggest.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

TEST(Suggest, EditDistance) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("same", "same"), 0u);
}

TEST(Suggest, DidYouMeanPicksClosestOrNothing) {
  std::vector<std::string> keys = {"micro_batch", "global_batch", "steps"};
  EXPECT_EQ(DidYouMean("micro_bach", keys), " (did you mean 'micro_batch'?)");
  EXPECT_EQ(DidYouMean("stpes", keys), " (did you mean 'steps'?)");
  EXPECT_EQ(DidYouMean("completely_unrelated", keys), "");
}

}  // namespace
}  // namespace tencache
