#include "common/status.h"

#include <gtest/gtest.h>

namespace tencache {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  TC_ASSIGN_OR_RETURN(int h, Half(x));
  TC_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = Status::IoError("disk.bin: EIO");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "IoError: disk.bin: EIO");
  EXPECT_EQ(s.WithContext("tensor 7").message(), "tensor 7: disk.bin: EIO");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(Status, ExitCodesSeparateBadInputFromFailures) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(Status::InvalidArgument("x")), 2);
  EXPECT_EQ(ExitCodeFor(Status::NotFound("x")), 2);
  EXPECT_EQ(ExitCodeFor(Status::IoError("x")), 1);
  EXPECT_EQ(ExitCodeFor(Status::Internal("x")), 1);
}

TEST(StatusOr, MacrosPropagateErrors) {
  int out = 0;
  EXPECT_TRUE(Quarter(12, &out).ok());
  EXPECT_EQ(out, 3);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

}  // namespace
}  // namespace tencache
