// Completion: the outcome of one asynchronous operation (an NVMe request, a
// move between tiers), set once by the thread that performs it and read by any
// number of waiters, each with its own timeout. IoTicket and PrefetchHandle are
// thin handles on one. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace tencache {

class Completion {
 public:
  // An already completed operation.
  static std::shared_ptr<Completion> Done(Status status);

  // REQUIRES: called once.
  void Set(Status status) EXCLUDES(mu_);
  bool done() const EXCLUDES(mu_);
  // The status if done (`*done` true), else OK with `*done` false.
  Status Peek(bool* done) const EXCLUDES(mu_);
  // Waits up to `timeout`: the operation's status, or Timeout ("<what> did not
  // complete within N ms").
  Status Wait(std::chrono::milliseconds timeout, const std::string& what) const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ GUARDED_BY(mu_) = false;
  Status status_ GUARDED_BY(mu_);
};

}  // namespace tencache
