#include "worker/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace tencache {

ResidentBytes ReadResidentBytes() {
  ResidentBytes r;
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return r;
  char text[4096];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return r;
  text[n] = '\0';
  auto field = [&](const char* name) {  // "VmHWM:\t  501816 kB"
    const char* at = std::strstr(text, name);
    long long kib = -1;
    if (at == nullptr || std::sscanf(at + std::strlen(name), " %lld", &kib) != 1) return -1LL;
    return kib * 1024;
  };
  r.now = field("VmRSS:");
  r.peak = field("VmHWM:");
  return r;
}

bool ResetPeakResidentBytes() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace tencache
