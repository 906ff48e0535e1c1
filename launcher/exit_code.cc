#include "launcher/exit_code.h"

#include <cstdio>

namespace tencache {

int FailCommand(const Status& s) {
  std::fprintf(stderr, "tencache-launch: %s\n", s.message().c_str());
  return ExitCodeFor(s);
}

int FailNoFeasiblePlan(const std::string& job_path) {
  std::fprintf(stderr, "tencache-launch: no feasible plan for %s; `tencache-launch plan %s` lists each instance "
                       "type's reason\n", job_path.c_str(), job_path.c_str());
  return kExitNoFeasiblePlan;
}

}  // namespace tencache
