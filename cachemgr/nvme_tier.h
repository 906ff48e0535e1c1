// NvmeTier: the bottom tier — one preallocated file per rank under a directory,
// opened O_DIRECT and driven by one io_uring ring that is owned by one submitting
// thread (the "ring thread"). Callers hand it requests (SubmitRead/SubmitWrite,
// or the blocking TierStore Read/Write); the ring thread cuts them into
// block_size chunks, keeps up to queue_depth chunks in flight (backpressure: the
// rest wait in the queue), requeues chunks that complete with -EAGAIN/-EINTR or
// short, and finishes each request's IoTicket with the first error it met.
//
// Where the file system refuses O_DIRECT (e.g. tmpfs before Linux 6.6) the file
// is opened buffered instead, with one warning on stderr, and Describe() says so.
//
// Integrity: with checksums on (the default) every chunk written gets a CRC32C,
// kept in memory per chunk written (a table keyed by the chunk's offset: its
// size follows the chunks written, not the file's size), and every chunk read is
// verified before its request completes; a mismatch completes the request with
// Corruption and the chunk's bytes are zeroed, so corrupt data never reaches the
// caller. Reads of extents that were not written with the same chunking fail as
// Corruption too. Errors name the tensor (the `what` argument) and the file.
//
// Thread safety: all public methods are thread-safe. Buffers must stay valid
// until the ticket completes.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cachemgr/completion.h"
#include "cachemgr/file_env.h"
#include "cachemgr/tier.h"
#include "common/thread_annotations.h"

namespace tencache {

struct NvmeTierOptions {
  std::string dir;              // the directory holding the per-rank file (created if missing)
  int rank = 0;                 // the file is <dir>/rank-<rank>.tcnvme
  uint32_t queue_depth = 16;    // chunks in flight at most
  uint64_t block_size = 1 << 20;  // chunk size; a multiple of 4 KiB
  bool checksums = true;        // CRC32C per extent, verified on every read
  bool direct_io = true;        // O_DIRECT; buffered, with one warning, where the file system refuses it
  bool force_sync_engine = false;  // use pread/pwrite instead of io_uring
  FileEnv* env = nullptr;       // nullptr: PosixFileEnv()
};

// Completion of one asynchronous NVMe request.
class IoTicket {
 public:
  IoTicket() = default;
  bool ready() const;
  // Waits for completion up to `timeout`; Timeout if it has not completed.
  Status Wait(std::chrono::milliseconds timeout) const;

 private:
  friend class NvmeTier;
  std::shared_ptr<Completion> state_;
};

class NvmeTier final : public TierStore {
 public:
  // Validates options and creates the directory (0700); the file is created by
  // Reserve() (0600, never through a symlink) and removed when the tier is destroyed.
  static StatusOr<std::unique_ptr<NvmeTier>> Open(const NvmeTierOptions& options);
  ~NvmeTier() override;

  Tier tier() const override { return Tier::kNvme; }
  std::string Describe() const override;
  // Creates and preallocates the file and starts the ring thread. Only one
  // region: a second call returns ResourceExhausted.
  StatusOr<uint64_t> Reserve(uint64_t bytes) override;
  uint64_t reserved_bytes() const override;
  uint64_t allocations() const override;
  Status Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
               std::chrono::milliseconds timeout) override;
  Status Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
              std::chrono::milliseconds timeout) override;
  void* Address(uint64_t) override { return nullptr; }

  // REQUIRES: Reserve() succeeded; offset, len and buffer aligned to 4 KiB.
  IoTicket SubmitWrite(uint64_t offset, const void* src, uint64_t len, std::string what);
  IoTicket SubmitRead(uint64_t offset, void* dst, uint64_t len, std::string what);
  // Waits up to `timeout` for `ticket` (a request of this tier's for tensor
  // `what`); a Timeout names the tensor, the file and the direction, and leaves
  // the request running.
  Status Await(const IoTicket& ticket, bool write, const std::string& what, std::chrono::milliseconds timeout) const;

  // Registers host memory (e.g. the host tier's arena) as io_uring fixed
  // buffers, cut into pieces of at most kMaxFixedBuffer. When the engine or the
  // kernel refuses (e.g. RLIMIT_MEMLOCK) it returns why, I/O continues
  // unregistered, and Describe() says "fixed buffers off: <why>".
  // REQUIRES: Reserve() succeeded.
  Status RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>& buffers,
                         std::chrono::milliseconds timeout);

  const std::string& file_path() const { return path_; }
  const NvmeTierOptions& options() const { return options_; }

 private:
  enum class Kind : uint8_t { kRead, kWrite, kRegister };
  struct Request;
  struct Chunk;
  struct Extent {  // checksum of the chunk that starts at this offset
    uint32_t crc = 0;
    uint32_t len = 0;
  };
  struct PendingVerify {  // a chunk read and not yet checked
    Request* request;
    uint8_t* buf;
    uint64_t offset;
    uint64_t len;
  };

  explicit NvmeTier(NvmeTierOptions options);
  IoTicket Enqueue(std::unique_ptr<Request> request);
  Status CheckRange(uint64_t offset, const void* buf, uint64_t len, const std::string& what) const;
  void RingLoop();
  bool TakeRequests(std::deque<std::unique_ptr<Request>>* local) EXCLUDES(mu_);
  bool NextChunk(std::deque<std::unique_ptr<Request>>* local, Chunk* chunk);
  Status SubmitChunk(Chunk* chunk);
  void OnCompletion(Chunk* chunk, int64_t result);
  void FinishChunk(Chunk* chunk, Status status);
  void VerifyRead(const PendingVerify& v);
  void ChecksumPass();
  std::string Where(const Request& r, uint64_t offset, uint64_t len) const;
  std::string Where(const Chunk& chunk) const;
  void HandleRegister(Request* request);

  // Constant after Reserve().
  const NvmeTierOptions options_;
  FileEnv* const env_;
  std::string path_;
  std::unique_ptr<BlockFile> file_;  // used only by the ring thread after Reserve()
  uint64_t file_bytes_ = 0;
  std::thread ring_thread_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Request>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::string engine_ GUARDED_BY(mu_);
  std::string buffered_reason_ GUARDED_BY(mu_);   // why O_DIRECT was dropped, "" if not
  std::string fixed_off_reason_ GUARDED_BY(mu_);  // why registration failed, "" if not
  bool ring_may_reap_ GUARDED_BY(mu_) = false;    // the ring thread may wait in Reap()

  // Owned by the ring thread.
  std::vector<Chunk> chunks_;         // queue_depth slots; tag = index
  std::vector<uint32_t> free_chunks_;
  std::deque<uint32_t> retry_;        // chunks to resubmit (EAGAIN, short I/O)
  std::unordered_map<uint64_t, Extent> extents_;  // by chunk offset; grows with the chunks written
  std::vector<std::pair<uint8_t*, uint64_t>> fixed_;  // registered buffers
  std::vector<IoCompletion> completions_;
  std::vector<uint32_t> to_checksum_;        // write chunks submitted this pass, CRC not yet computed
  std::vector<PendingVerify> to_verify_;     // read chunks reaped, not yet verified
};

}  // namespace tencache
