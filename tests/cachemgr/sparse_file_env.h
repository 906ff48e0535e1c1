// SparseFileEnv: the POSIX env with files that are sized by ftruncate instead
// of fallocate, so a file of many GiB takes only the blocks written to it and
// offsets past 4 GiB are tested with a few KiB of disk. Its files' size()
// reports the 4 KiB preallocated before the file is extended; I/O anywhere in
// the extended size works as in the POSIX env. Thread-safe as the POSIX env.
//
// SparseFilesUnsupported(dir) says why the file system under `dir` cannot
// keep such a file ("" when it can), for tests to GTEST_SKIP with.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cachemgr/file_env.h"

namespace tencache::testing {

class SparseFileEnv final : public FileEnv {
 public:
  StatusOr<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                     const BlockFileOptions& options) override {
    TC_ASSIGN_OR_RETURN(std::unique_ptr<BlockFile> file,
                        PosixFileEnv()->OpenBlockFile(path, kDirectIoAlignment, options));
    if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0)
      return Status::IoError(path + ": truncate to " + std::to_string(size) + ": " + std::strerror(errno));
    return file;
  }
  Status CreateDir(const std::string& path) override { return PosixFileEnv()->CreateDir(path); }
  Status RemoveFile(const std::string& path) override { return PosixFileEnv()->RemoveFile(path); }
};

// Extends a probe file to 8 GiB, writes 4 KiB past 4 GiB and checks that the
// file holds well under 1 MiB of blocks.
inline std::string SparseFilesUnsupported(const std::string& dir) {
  const std::string path = dir + "/sparse-probe";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return path + ": open: " + std::strerror(errno);
  std::string why;
  const char page[4096] = {1};
  struct stat st {};
  if (::ftruncate(fd, off_t{8} << 30) != 0) {
    why = "ftruncate to 8 GiB: " + std::string(std::strerror(errno));
  } else if (::pwrite(fd, page, sizeof page, (off_t{1} << 32) + 4096) != ssize_t(sizeof page)) {
    why = "pwrite past 4 GiB: " + std::string(std::strerror(errno));
  } else if (::fstat(fd, &st) != 0) {
    why = "fstat: " + std::string(std::strerror(errno));
  } else if (uint64_t(st.st_blocks) * 512 >= (uint64_t{1} << 20)) {
    why = "an 8 GiB file with 4 KiB written holds " + std::to_string(uint64_t(st.st_blocks) * 512) +
          " bytes of blocks: the file system does not keep holes";
  }
  ::close(fd);
  ::unlink(path.c_str());
  return why.empty() ? "" : path + ": " + why;
}

}  // namespace tencache::testing
