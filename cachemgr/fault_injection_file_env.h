// FaultInjectionFileEnv: wraps another FileEnv and makes chosen requests fail the
// way real disks do — EIO, short reads/writes, ENOSPC, silently corrupted reads,
// slow completions, file systems that refuse O_DIRECT — so tests can check that every fault surfaces as a Status
// naming the tensor and the file, and that a corrupt extent never reaches a caller.
//
// Rules match on the operation and an offset range and fire `count` times (or
// forever). Thread safety: AddFault/ClearFaults/ReleaseHeld and the counters may
// be called from any thread while the wrapped files are in use on their own thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "cachemgr/file_env.h"
#include "common/thread_annotations.h"

namespace tencache {

enum class FaultKind : uint8_t {
  kEio,          // the request completes with -EIO
  kShortIo,      // the request transfers half its bytes (rounded down to 4 KiB, possibly 0)
  kNoSpace,      // a write completes with -ENOSPC (and OpenBlockFile fails with ENOSPC)
  kCorruptRead,  // a read succeeds but one byte of the data is flipped
  kSlowIo,       // the completion is held back for `delay`
  kDirectIoRefused,  // OpenBlockFile with direct_io fails as on a file system without O_DIRECT
                     // (Unavailable); buffered opens pass. Applies at open only.
  kHeld,         // the request does not start until ReleaseHeld(): a write then
                 // takes the buffer's bytes as they are at that moment
};
const char* FaultKindName(FaultKind kind);

struct FaultRule {
  FaultKind kind = FaultKind::kEio;
  IoOp op = IoOp::kRead;  // kNoSpace applies to writes whatever this says
  uint64_t offset_begin = 0;
  uint64_t offset_end = std::numeric_limits<uint64_t>::max();  // exclusive
  int64_t count = -1;  // how many requests it hits; -1: every one
  std::chrono::milliseconds delay{0};  // kSlowIo only
  bool on_open = false;  // kNoSpace only: fail OpenBlockFile's preallocation instead of writes
};

class FaultInjectionFileEnv final : public FileEnv {
 public:
  // REQUIRES: base outlives this env and the files it opens.
  explicit FaultInjectionFileEnv(FileEnv* base) : base_(base) {}

  void AddFault(const FaultRule& rule);
  void ClearFaults();
  uint64_t faults_injected() const;
  // Starts every request a kHeld rule is holding, in every file of this env.
  void ReleaseHeld();
  // Requests a kHeld rule is holding now (submitted to a file, not started).
  uint64_t held_requests() const;
  // Reap() calls that waited for a completion and returned because their
  // timeout passed (not because one arrived or Interrupt() was called).
  uint64_t reap_timeouts() const;

  StatusOr<std::unique_ptr<BlockFile>> OpenBlockFile(const std::string& path, uint64_t size,
                                                     const BlockFileOptions& options) override;
  Status CreateDir(const std::string& path) override { return base_->CreateDir(path); }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }

  // Returns the first rule matching (op, offset) and consumes one of its shots;
  // false when none matches. Used by the files this env opens.
  bool TakeFault(IoOp op, uint64_t offset, FaultRule* fired);
  // For the files: their registration, the ReleaseHeld generation, and timeouts.
  void Register(BlockFile* file);
  void Unregister(BlockFile* file);
  uint64_t release_generation() const;
  void CountReapTimeout();
  void CountHeld(int64_t delta);

 private:
  FileEnv* const base_;
  mutable Mutex mu_;
  std::vector<FaultRule> rules_ GUARDED_BY(mu_);
  uint64_t injected_ GUARDED_BY(mu_) = 0;
  std::vector<BlockFile*> files_ GUARDED_BY(mu_);
  uint64_t release_generation_ GUARDED_BY(mu_) = 0;
  uint64_t reap_timeouts_ GUARDED_BY(mu_) = 0;
  uint64_t held_ GUARDED_BY(mu_) = 0;
};

}  // namespace tencache
