// FileEnv and BlockFile: every touch of a file by the NVMe tier goes through
// these, as LevelDB's Env, so that tests can swap in a fault-injecting layer.
//
// A BlockFile is an asynchronous engine over one preallocated file: Submit()
// queues a read or write of `len` bytes at `offset` to/from a caller-owned buffer,
// Reap() returns completions with the byte count or -errno, exactly as io_uring
// reports them. The POSIX env opens files with O_DIRECT and drives them with an
// io_uring ring, probing the kernel's features; when the ring cannot be set up it
// falls back to pread/pwrite and says so in engine(). Buffers, offsets and lengths
// must be aligned to kDirectIoAlignment.
//
// Thread safety: a BlockFile is used by one thread (the NVMe tier's submitting
// thread owns it), except Interrupt(), which any thread may call. A FileEnv is
// safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tencache {

constexpr uint64_t kDirectIoAlignment = 4096;
// io_uring refuses a fixed buffer larger than this (one registration entry).
constexpr uint64_t kMaxFixedBuffer = uint64_t{1} << 30;
// The most bytes one request transfers: Linux's cap on one read or write
// (INT_MAX rounded down to a page), which also keeps an io_uring completion's
// 32-bit result exact. A longer request completes short, after this many bytes.
constexpr uint64_t kMaxIoTransfer = 0x7ffff000;

enum class IoOp : uint8_t { kRead, kWrite };

struct IoRequest {
  IoOp op = IoOp::kRead;
  void* buf = nullptr;
  uint64_t len = 0;
  uint64_t offset = 0;
  uint64_t tag = 0;        // returned unchanged in the completion
  int fixed_buffer = -1;   // index of a registered buffer holding buf, or -1
};

struct IoCompletion {
  uint64_t tag = 0;
  int64_t result = 0;  // bytes transferred (may be short), or -errno
};

struct BlockFileOptions {
  uint32_t queue_depth = 16;
  bool direct_io = true;         // O_DIRECT: bypass the page cache
  bool force_sync_engine = false;  // skip io_uring and use pread/pwrite (tests, benchmarks)
};

class BlockFile {
 public:
  virtual ~BlockFile() = default;
  virtual const std::string& path() const = 0;
  virtual uint64_t size() const = 0;
  virtual uint32_t queue_depth() const = 0;
  // "io_uring (fixed buffers)", "io_uring", "pread/pwrite (io_uring unavailable: ...)".
  virtual std::string engine() const = 0;
  // Registers buffers for fixed-buffer I/O, replacing any registered before.
  // REQUIRES: each buffer at most kMaxFixedBuffer bytes (the kernel's cap).
  // Unavailable, saying why, when the engine, the kernel or RLIMIT_MEMLOCK
  // refuses; I/O keeps working without them.
  virtual Status RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>& buffers) = 0;
  // Queues one request, of any length: it moves at most kMaxIoTransfer bytes
  // (a short completion; the caller submits the rest).
  // REQUIRES: fewer than queue_depth() requests in flight.
  virtual Status Submit(const IoRequest& request) = 0;
  // Pushes queued requests to the kernel.
  virtual Status Flush() = 0;
  // Appends up to `max` completions to `out`, waiting until at least `min_wait`
  // are available or `timeout` passes. Returns how many were appended.
  virtual StatusOr<size_t> Reap(std::vector<IoCompletion>* out, size_t max, size_t min_wait,
                                std::chrono::milliseconds timeout) = 0;
  virtual uint32_t in_flight() const = 0;
  // Makes a Reap() waiting on the owning thread return now with what it has,
  // or the next Reap() if none is waiting (a new request for the owner to
  // submit). Safe from any thread; wake-ups do not accumulate beyond one.
  virtual void Interrupt() = 0;
};

class FileEnv {
 public:
  virtual ~FileEnv() = default;
  // Creates `path` if needed, preallocates `size` bytes (fallocate) and opens it.
  // Unavailable when direct_io was asked for and the file system refuses O_DIRECT.
  virtual StatusOr<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                             const BlockFileOptions& options) = 0;
  virtual Status CreateDir(const std::string& path) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
};

// The process-wide POSIX env (O_DIRECT + io_uring, pread/pwrite fallback).
FileEnv* PosixFileEnv();

}  // namespace tencache
