#include "worker/optimizer_lane.h"

#include <utility>

namespace tencache {

OptimizerLane::OptimizerLane(size_t grad_floats, RunFn run)
    : run_(std::move(run)), grad_(grad_floats, 0.0f), thread_([this] { Loop(); }) {}

OptimizerLane::~OptimizerLane() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !issued_ || finished_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OptimizerLane::Issue(int block) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    block_ = block;
    issued_ = true;
    finished_ = false;
  }
  in_flight_ = true;
  cv_.notify_all();
}

Status OptimizerLane::Retire(LaneUpdate* done) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return finished_; });
  issued_ = finished_ = false;
  in_flight_ = false;
  *done = done_;
  return std::move(status_);
}

void OptimizerLane::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (issued_ && !finished_); });
    if (stop_) return;
    const int block = block_;
    lock.unlock();
    LaneUpdate done;
    done.block = block;
    Status st = run_(block, grad_.data(), &done);
    lock.lock();
    status_ = std::move(st);
    done_ = done;
    finished_ = true;
    cv_.notify_all();
  }
}

}  // namespace tencache
