// KeepFreedHostMemory at a large model's sizes: a freed heap top past 2 GiB
// stays mapped (a trim threshold of INT_MAX would give it back: 589,792 faults
// for the next 2.25 GiB), so the next allocation of that size faults in no new pages.
#include "worker/host_malloc.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

namespace tencache {
namespace {

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

TEST(HostMalloc, AFreedTopPastTwoGibStaysMapped) {
#if defined(__SANITIZE_ADDRESS__) || !defined(__GLIBC__)
  GTEST_SKIP() << "glibc's malloc only (AddressSanitizer has its own allocator)";
#endif
  KeepFreedHostMemory();
  const size_t n = (size_t(2) << 30) + (size_t(256) << 20);  // 2.25 GiB: 589,824 pages of 4 KiB
  char* a = static_cast<char*>(std::malloc(n));
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, n);
  asm volatile("" : : "r"(a) : "memory");  // the stores happen: no dead-store elimination before free
  std::free(a);
  const long before = MinorFaults();
  char* b = static_cast<char*>(std::malloc(n));
  ASSERT_NE(b, nullptr);
  std::memset(b, 2, n);
  asm volatile("" : : "r"(b) : "memory");
  const long faults = MinorFaults() - before;
  EXPECT_EQ(b[n - 1], 2);
  std::free(b);
  EXPECT_LT(faults, 1000) << "the freed 2.25 GiB were given back to the kernel and faulted in again";
}

}  // namespace
}  // namespace tencache
