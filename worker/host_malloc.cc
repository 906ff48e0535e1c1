#include "worker/host_malloc.h"

#include <malloc.h>

#include <limits>

namespace tencache {

void KeepFreedHostMemory() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  mallopt(M_MMAP_MAX, 0);                                     // every block from a heap
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());  // never give a heap's top back
#endif
}

}  // namespace tencache
