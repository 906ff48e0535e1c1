// RunCommand: runs a shell command as a user would, for the tests that drive
// the programs (tencache-launch, tencache-worker under mpirun, tencache-sim).
// Returns the exit code and everything the command printed (stdout, and stderr
// when the command redirects it). Blocks until the command exits.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tencache::testing {

struct CommandResult {
  int code = -1;    // exit status, or -1 when it did not exit normally
  std::string out;  // what it printed
};

inline CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tencache::testing
