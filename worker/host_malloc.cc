#include "worker/host_malloc.h"

#include <malloc.h>


namespace tencache {

void KeepFreedHostMemory() {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  mallopt(M_MMAP_MAX, 0);                                     // every block from a heap
  // Never give a heap's top back: -1 (SIZE_MAX) disables trimming, where
  // INT_MAX still trims a free top past 2 GiB, as a large model's steps leave.
  mallopt(M_TRIM_THRESHOLD, -1);
#endif
}

}  // namespace tencache
