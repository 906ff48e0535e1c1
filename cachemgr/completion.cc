#include "cachemgr/completion.h"

namespace tencache {

std::shared_ptr<Completion> Completion::Done(Status status) {
  auto c = std::make_shared<Completion>();
  c->Set(std::move(status));
  return c;
}

void Completion::Set(Status status) {
  {
    MutexLock lock(&mu_);
    done_ = true;
    status_ = std::move(status);
  }
  cv_.notify_all();
}

bool Completion::done() const {
  MutexLock lock(&mu_);
  return done_;
}

Status Completion::Peek(bool* done) const {
  MutexLock lock(&mu_);
  *done = done_;
  return done_ ? status_ : Status::Ok();
}

Status Completion::Wait(std::chrono::milliseconds timeout, const std::string& what) const {
  MutexLock lock(&mu_);
  if (!cv_.wait_for(lock.native(), timeout, [&]() REQUIRES(mu_) { return done_; })) {
    return Status::Timeout(what + " did not complete within " + std::to_string(timeout.count()) + " ms");
  }
  return status_;
}

}  // namespace tencache
