// GatedTierStore: a TierStore decorator for the tensor cache's interleaving
// tests. While the gate is closed, every Write (a copy into the store) blocks
// on entry until the test opens it, so a test can hold a mover in the middle of
// a copy, observe the cache from another thread, and then let the copy finish.
// Reads and everything else pass straight through.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "cachemgr/tier.h"

namespace tencache::testing {

class GatedTierStore final : public TierStore {
 public:
  explicit GatedTierStore(std::unique_ptr<TierStore> base) : base_(std::move(base)) {}

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  // Waits until `n` Writes in all have reached the gate; false after `timeout`.
  bool WaitEntered(uint64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return entered_ >= n; });
  }

  Tier tier() const override { return base_->tier(); }
  std::string Describe() const override { return base_->Describe() + " (gated)"; }
  StatusOr<uint64_t> Reserve(uint64_t bytes) override { return base_->Reserve(bytes); }
  uint64_t reserved_bytes() const override { return base_->reserved_bytes(); }
  uint64_t allocations() const override { return base_->allocations(); }
  Status Write(uint64_t offset, const void* src, uint64_t len, const std::string& what,
               std::chrono::milliseconds timeout) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++entered_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !closed_; });
    }
    return base_->Write(offset, src, len, what, timeout);
  }
  Status Read(uint64_t offset, void* dst, uint64_t len, const std::string& what,
              std::chrono::milliseconds timeout) override {
    return base_->Read(offset, dst, len, what, timeout);
  }
  void* Address(uint64_t offset) override { return base_->Address(offset); }

 private:
  const std::unique_ptr<TierStore> base_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;   // guarded by mu_
  uint64_t entered_ = 0;  // guarded by mu_
};

}  // namespace tencache::testing
