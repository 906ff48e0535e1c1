// tencache-bench's command line, as a user runs it: --version, --help on the
// program and on each subcommand, and bad flags (exit 2, the flag named). No
// benchmark runs: every command here stops while parsing.
#include <gtest/gtest.h>

#include <string>

#include "command_runner.h"

namespace tencache {
namespace {

testing::CommandResult Bench(const std::string& args) {
  return testing::RunCommand(std::string(TENCACHE_BENCH_BIN) + " " + args + " 2>&1");
}

TEST(BenchCliTest, VersionPrintsTheProgramAndExitsZero) {
  const testing::CommandResult r = Bench("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, std::string("tencache-bench ") + TENCACHE_VERSION + "\n");
}

TEST(BenchCliTest, HelpListsSubcommandsAndEachSubcommandHasItsOwn) {
  const testing::CommandResult top = Bench("--help");
  EXPECT_EQ(top.code, 0);
  for (const char* sub : {"nvme", "cache"}) EXPECT_NE(top.out.find(sub), std::string::npos) << top.out;
  testing::CommandResult r = Bench("nvme --help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--dir DIR", "--size SIZE=1GiB", "--block SIZE=1MiB", "--depth N=16", "--rounds N=3",
                           "--json"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
  if (top.out.find("train") != std::string::npos) {  // built with the worker
    const testing::CommandResult train = Bench("train --help");
    EXPECT_EQ(train.code, 0);
    EXPECT_NE(train.out.find("--regime"), std::string::npos) << train.out;
    EXPECT_NE(train.out.find("--variants"), std::string::npos) << train.out;
    const testing::CommandResult bad = Bench("train --variants tencache,fifo");
    EXPECT_EQ(bad.code, 2) << bad.out;
    EXPECT_NE(bad.out.find("--variants"), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("fifo"), std::string::npos) << bad.out;
    const testing::CommandResult threads = Bench("train --threads 0");
    EXPECT_EQ(threads.code, 2) << threads.out;
    EXPECT_NE(threads.out.find("--threads: got '0'"), std::string::npos) << threads.out;
  }
  r = Bench("cache -h");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--device-budget SIZE=40MiB", "--layers N=24", "--steps N=5", "--lookahead N=8"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
}

TEST(BenchCliTest, BadFlagsExitTwoNamingTheFlag) {
  struct Case {
    const char* args;
    const char* needle;
  };
  for (const Case& c : {Case{"nvme --dir /tmp --bogus", "--bogus"},
                        Case{"nvme --dir=/tmp --depth=0", "--depth: got '0', expected a whole number from 1 to 4096"},
                        Case{"nvme --dir /tmp --size lots", "--size: 'lots' is not a byte size"},
                        Case{"nvme --dir /tmp --block 6KiB", "--block: got '6144', expected a multiple of 4KiB"},
                        Case{"nvme --size 1GiB", "--dir is required"},
                        Case{"nvme --dir /tmp --request 0", "--request: got '0', expected a size of more than 0"},
                        Case{"nvme --dir /tmp --request 6KiB", "--request: got '6144', expected a positive multiple of 4KiB"},
                        Case{"nvme --dir /tmp --outstanding 0", "--outstanding: got '0', expected a whole number"},
                        Case{"nvme --dir /tmp --deepspeed-aio /nonexistent/deepspeed-aio-pass",
                             "--deepspeed-aio: got '/nonexistent/deepspeed-aio-pass', expected an executable"},
                        Case{"cache --steps 1", "--steps: got '1', expected a whole number from 2 to 100"},
                        Case{"cache --device-budget=0", "--device-budget: got '0', expected a size of more than 0"},
                        Case{"disk", "not expected: disk"},
                        Case{"", "expected a subcommand: nvme, cache"}}) {
    const testing::CommandResult r = Bench(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("tencache-bench: ", 0), 0u) << r.out;
  }
}

}  // namespace
}  // namespace tencache
