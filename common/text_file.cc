#include "common/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tencache {

std::string PathProblem(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return "";
  if (errno == ENOENT || errno == ENOTDIR) return "not found";
  if (errno == ELOOP) return "a symbolic link loop";
  return std::string("not reachable (") + std::strerror(errno) + ")";
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": cannot write (" + std::strerror(errno) + ")");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const int err = done == text.size() ? (::fdatasync(fd) == 0 ? 0 : errno) : errno;
  ::close(fd);
  if (err != 0 || done != text.size() || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(err != 0 ? err : errno);
    ::unlink(tmp.c_str());
    return Status::IoError(path + ": cannot write (" + why + ")");
  }
  return Status::Ok();
}

}  // namespace tencache
