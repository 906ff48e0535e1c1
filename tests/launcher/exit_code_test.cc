// FailCommand: every Status code of every tencache-launch command maps to the
// documented exit code, with the message on stderr.
#include "launcher/exit_code.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tencache {
namespace {

TEST(ExitCode, EveryStatusCodeMapsToTheDocumentedExitCode) {
  const std::vector<std::pair<Status, int>> cases = {
      {Status::InvalidArgument("job.yaml: key 'train.steps': expected a whole number"), kExitBadInput},
      {Status::NotFound("--resume runs/x: no such run folder"), kExitBadInput},
      {Status::IoError("runs/x/run.json: cannot write"), kExitFailed},
      {Status::Corruption("checkpoint step-3: checksum mismatch"), kExitFailed},
      {Status::ResourceExhausted("host budget"), kExitFailed},
      {Status::Timeout("probe"), kExitFailed},
      {Status::FailedPrecondition("state"), kExitFailed},
      {Status::Unavailable("cannot reach host 'b'"), kExitFailed},
      {Status::Internal("bug"), kExitFailed},
  };
  for (const auto& [status, code] : cases) {
    testing::internal::CaptureStderr();
    EXPECT_EQ(FailCommand(status), code) << status.ToString();
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "tencache-launch: " + status.message() + "\n");
  }
}

TEST(ExitCode, TheCodesAreTheDocumentedNumbers) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitFailed, 1);
  EXPECT_EQ(kExitBadInput, 2);
  EXPECT_EQ(kExitNoFeasiblePlan, 3);
  EXPECT_EQ(kExitInterrupted, 130);
}

}  // namespace
}  // namespace tencache
