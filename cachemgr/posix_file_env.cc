// The POSIX FileEnv: O_DIRECT files driven by io_uring, with a pread/pwrite
// engine for kernels (or sandboxes) where the ring cannot be set up.
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "cachemgr/file_env.h"

namespace tencache {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Completes every request synchronously inside Submit(); Reap() hands the results back.
class SyncBlockFile final : public BlockFile {
 public:
  SyncBlockFile(int fd, std::string path, uint64_t size, uint32_t depth, std::string why)
      : fd_(fd), path_(std::move(path)), size_(size), depth_(depth), why_(std::move(why)) {}
  ~SyncBlockFile() override { ::close(fd_); }

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  uint32_t queue_depth() const override { return depth_; }
  std::string engine() const override { return "pread/pwrite (" + why_ + ")"; }
  Status RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>&) override {
    return Status::Unavailable(path_ + ": the pread/pwrite engine has no fixed buffers");
  }

  Status Submit(const IoRequest& r) override {
    if (done_.size() >= depth_) return Status::Internal(path_ + ": submit beyond queue depth");
    const size_t len = static_cast<size_t>(std::min(r.len, kMaxIoTransfer));
    ssize_t n = r.op == IoOp::kRead ? ::pread(fd_, r.buf, len, static_cast<off_t>(r.offset))
                                    : ::pwrite(fd_, r.buf, len, static_cast<off_t>(r.offset));
    done_.push_back({r.tag, n < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(n)});
    return Status::Ok();
  }
  Status Flush() override { return Status::Ok(); }
  StatusOr<size_t> Reap(std::vector<IoCompletion>* out, size_t max, size_t,
                        std::chrono::milliseconds) override {
    size_t n = 0;
    while (n < max && !done_.empty()) {
      out->push_back(done_.front());
      done_.pop_front();
      ++n;
    }
    return n;
  }
  uint32_t in_flight() const override { return static_cast<uint32_t>(done_.size()); }
  void Interrupt() override {}  // Reap never waits: every request completed in Submit

 private:
  const int fd_;
  const std::string path_;
  const uint64_t size_;
  const uint32_t depth_;
  const std::string why_;
  std::deque<IoCompletion> done_;
};

// The ring also watches an eventfd (one poll request, re-armed after each
// wake-up) so that Interrupt() ends a Reap() that waits for completions.
class UringBlockFile final : public BlockFile {
 public:
  UringBlockFile(int fd, std::string path, uint64_t size, uint32_t depth, io_uring ring, int wake_fd)
      : fd_(fd), path_(std::move(path)), size_(size), depth_(depth), ring_(ring), wake_fd_(wake_fd) {}
  ~UringBlockFile() override {
    io_uring_queue_exit(&ring_);
    ::close(wake_fd_);
    ::close(fd_);
  }

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  uint32_t queue_depth() const override { return depth_; }
  std::string engine() const override { return fixed_ ? "io_uring (fixed buffers)" : "io_uring"; }

  Status RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>& buffers) override {
    std::vector<iovec> iov;
    for (const auto& [base, len] : buffers) {
      if (len > kMaxFixedBuffer)
        return Status::InvalidArgument(path_ + ": a fixed buffer of " + std::to_string(len) +
                                       " bytes is beyond io_uring's 1 GiB per buffer");
      iov.push_back({base, len});
    }
    if (fixed_) io_uring_unregister_buffers(&ring_);
    const int rc = io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
    fixed_ = rc == 0;
    if (!fixed_)
      return Status::Unavailable(path_ + ": io_uring_register_buffers of " + std::to_string(iov.size()) +
                                 " buffer(s): " + ErrnoText(-rc) +
                                 (rc == -ENOMEM ? " (RLIMIT_MEMLOCK too low?)" : ""));
    return Status::Ok();
  }

  Status Submit(const IoRequest& r) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      TC_RETURN_IF_ERROR(Flush());
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return Status::Internal(path_ + ": io_uring submission queue full");
    }
    // The SQE's length is 32 bits: a longer request would be cut to its low bits.
    const unsigned len = static_cast<unsigned>(std::min(r.len, kMaxIoTransfer));
    const bool fixed = fixed_ && r.fixed_buffer >= 0;
    if (r.op == IoOp::kRead) {
      if (fixed) io_uring_prep_read_fixed(sqe, fd_, r.buf, len, r.offset, r.fixed_buffer);
      else io_uring_prep_read(sqe, fd_, r.buf, len, r.offset);
    } else {
      if (fixed) io_uring_prep_write_fixed(sqe, fd_, r.buf, len, r.offset, r.fixed_buffer);
      else io_uring_prep_write(sqe, fd_, r.buf, len, r.offset);
    }
    sqe->user_data = r.tag;
    ++in_flight_;
    return Status::Ok();
  }

  Status Flush() override {
    int rc = io_uring_submit(&ring_);
    if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR)
      return Status::IoError(path_ + ": io_uring_submit: " + ErrnoText(-rc));
    return Status::Ok();
  }

  StatusOr<size_t> Reap(std::vector<IoCompletion>* out, size_t max, size_t min_wait,
                        std::chrono::milliseconds timeout) override {
    size_t n = 0;
    while (n < max) {
      io_uring_cqe* cqe = nullptr;
      int rc;
      if (n < min_wait) {
        TC_RETURN_IF_ERROR(ArmWake());
        __kernel_timespec ts{timeout.count() / 1000, (timeout.count() % 1000) * 1000000};
        rc = io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
      } else {
        rc = io_uring_peek_cqe(&ring_, &cqe);
      }
      if (rc == -ETIME || rc == -EAGAIN || rc == -EINTR) break;
      if (rc < 0) return Status::IoError(path_ + ": io_uring wait: " + ErrnoText(-rc));
      const uint64_t tag = cqe->user_data;
      const int64_t res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (tag == kWakeTag) {  // Interrupt(): hand back what we have
        uint64_t count;
        while (::read(wake_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
        }
        wake_armed_ = false;
        if (n > 0 || min_wait > 0) break;
        continue;
      }
      out->push_back({tag, res});
      --in_flight_;
      ++n;
    }
    return n;
  }
  uint32_t in_flight() const override { return in_flight_; }

  void Interrupt() override {
    const uint64_t one = 1;
    while (::write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }

 private:
  static constexpr uint64_t kWakeTag = ~uint64_t{0};  // request tags are chunk indices

  // Keeps one poll on the eventfd in the ring while a Reap may wait.
  Status ArmWake() {
    if (wake_armed_) return Status::Ok();
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      TC_RETURN_IF_ERROR(Flush());
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return Status::Internal(path_ + ": io_uring submission queue full");
    }
    io_uring_prep_poll_add(sqe, wake_fd_, POLLIN);
    sqe->user_data = kWakeTag;
    wake_armed_ = true;
    return Flush();
  }

  const int fd_;
  const std::string path_;
  const uint64_t size_;
  const uint32_t depth_;
  io_uring ring_;
  const int wake_fd_;
  bool fixed_ = false;
  bool wake_armed_ = false;
  uint32_t in_flight_ = 0;
};

// Returns "" when the ring supports what we need, else why not.
std::string ProbeRing(io_uring* ring) {
  io_uring_probe* probe = io_uring_get_probe_ring(ring);
  if (probe == nullptr) return "io_uring probe failed";
  const bool ok = io_uring_opcode_supported(probe, IORING_OP_READ) &&
                  io_uring_opcode_supported(probe, IORING_OP_WRITE) &&
                  io_uring_opcode_supported(probe, IORING_OP_READ_FIXED) &&
                  io_uring_opcode_supported(probe, IORING_OP_WRITE_FIXED) &&
                  io_uring_opcode_supported(probe, IORING_OP_POLL_ADD);
  io_uring_free_probe(probe);
  return ok ? "" : "kernel lacks IORING_OP_READ/WRITE/POLL_ADD";
}

StatusOr<int> OpenAndPreallocate(const std::string& path, uint64_t size, bool direct) {
  // O_NOFOLLOW: a symlink planted at the swap file's name is refused (ELOOP).
  int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (direct ? O_DIRECT : 0);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0 && direct && errno == EINVAL)  // e.g. tmpfs before Linux 6.6: the caller may go buffered
    return Status::Unavailable(path + ": open with O_DIRECT: " + ErrnoText(EINVAL));
  if (fd < 0 && errno == ELOOP)
    return Status::InvalidArgument(path + ": is a symlink; the NVMe swap file must be a plain file");
  if (fd < 0) return Status::IoError(path + ": open: " + ErrnoText(errno));
  FdCloser closer(fd);
  if (::fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    if (err == ENOSPC)
      return Status::IoError(path + ": preallocating " + std::to_string(size) + " bytes: " + ErrnoText(err));
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0)
      return Status::IoError(path + ": ftruncate: " + ErrnoText(errno));
  }
  return closer.release();
}

class PosixEnv final : public FileEnv {
 public:
  StatusOr<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                     const BlockFileOptions& options) override {
    if (options.queue_depth == 0) return Status::InvalidArgument(path + ": queue depth must be > 0");
    TC_ASSIGN_OR_RETURN(int fd, OpenAndPreallocate(path, size, options.direct_io));
    std::string why = "forced";
    if (!options.force_sync_engine) {
      io_uring ring;
      const int wake_fd = ::eventfd(0, EFD_CLOEXEC);
      // One entry beyond the depth: the wake-up poll.
      int rc = wake_fd < 0 ? -errno : io_uring_queue_init(options.queue_depth + 1, &ring, 0);
      if (rc == 0) {
        why = ProbeRing(&ring);
        if (why.empty())
          return std::unique_ptr<BlockFile>(
              new UringBlockFile(fd, path, size, options.queue_depth, ring, wake_fd));
        io_uring_queue_exit(&ring);
      } else {
        why = (wake_fd < 0 ? "eventfd: " : "io_uring_queue_init: ") + ErrnoText(-rc);
      }
      if (wake_fd >= 0) ::close(wake_fd);
    }
    return std::unique_ptr<BlockFile>(new SyncBlockFile(fd, path, size, options.queue_depth, why));
  }

  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::IoError(path + ": mkdir: " + ErrnoText(errno));
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return Status::IoError(path + ": unlink: " + ErrnoText(errno));
    return Status::Ok();
  }
};

}  // namespace

FileEnv* PosixFileEnv() {
  static PosixEnv env;
  return &env;
}

}  // namespace tencache
