#include "worker/omp_wait_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace tencache {

void ExecAgainWithPassiveOmpWaitUnlessSet(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // An environment change after load does not reach libgomp (nor does one made
  // in .preinit_array: glibc resets the environment after it), so the program
  // starts again with it.
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OMP_WAIT_POLICY");  // not executed again: libgomp keeps its default, and the logs say so
}

const char* OmpWaitPolicy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  return policy != nullptr ? policy : "unset";
}

}  // namespace tencache
