#include "worker/communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace tencache {
namespace {

class SoloCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string Describe() const override { return "solo (1 rank, no collectives)"; }
  Status AllGather(const void* in, void* out, size_t bytes) override {
    if (in != out) std::memcpy(out, in, bytes);
    return Status::Ok();
  }
  Status ReduceScatterSum(const float* in, float* out, size_t count) override {
    if (in != out) std::memcpy(out, in, count * sizeof(float));
    return Status::Ok();
  }
  Status AllReduceSum(double*, size_t) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
};

// Shared state of a thread group. Each collective: every rank publishes its
// input pointer, waits until all have (phase 1), reads what it needs from the
// others, then waits until all have finished reading (phase 2) so that no input
// is overwritten early.
struct ThreadGroup {
  explicit ThreadGroup(int n, int timeout_ms) : size(n), inputs(n, nullptr), timeout(timeout_ms) {}

  // Sense-reversing barrier with a timeout.
  Status Wait(const char* what) {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return Status::Ok();
    }
    bool ok = cv.wait_for(lock, timeout, [&] { return generation != gen; });
    if (!ok) return Status::Timeout(std::string("thread communicator: ") + what + " waited " +
                                    std::to_string(timeout.count()) + " ms for the other ranks");
    return Status::Ok();
  }

  const int size;
  std::vector<const void*> inputs;  // written by each rank before phase 1
  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size; }
  std::string Describe() const override { return "threads (" + std::to_string(group_->size) + " ranks in-process)"; }

  Status AllGather(const void* in, void* out, size_t bytes) override {
    TC_RETURN_IF_ERROR(Publish(in, "all-gather"));
    for (int r = 0; r < size(); ++r) {
      char* dst = static_cast<char*>(out) + r * bytes;
      if (group_->inputs[r] != dst) std::memcpy(dst, group_->inputs[r], bytes);
    }
    return group_->Wait("all-gather");
  }

  Status ReduceScatterSum(const float* in, float* out, size_t count) override {
    TC_RETURN_IF_ERROR(Publish(in, "reduce-scatter"));
    // Sum in rank order on every rank, so that the result does not depend on timing.
    for (size_t i = 0; i < count; ++i) out[i] = 0.0f;
    for (int r = 0; r < size(); ++r) {
      const float* src = static_cast<const float*>(group_->inputs[r]) + rank_ * count;
      for (size_t i = 0; i < count; ++i) out[i] += src[i];
    }
    return group_->Wait("reduce-scatter");
  }

  Status AllReduceSum(double* data, size_t count) override {
    std::vector<double> mine(data, data + count);
    TC_RETURN_IF_ERROR(Publish(mine.data(), "all-reduce"));
    for (size_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int r = 0; r < size(); ++r) sum += static_cast<const double*>(group_->inputs[r])[i];
      data[i] = sum;
    }
    return group_->Wait("all-reduce");
  }

  Status Barrier() override { return group_->Wait("barrier"); }

 private:
  Status Publish(const void* in, const char* what) {
    {
      std::lock_guard<std::mutex> lock(group_->mu);
      group_->inputs[rank_] = in;
    }
    return group_->Wait(what);
  }

  std::shared_ptr<ThreadGroup> group_;
  const int rank_;
};

}  // namespace

std::unique_ptr<Communicator> MakeSoloCommunicator() { return std::make_unique<SoloCommunicator>(); }

std::vector<std::unique_ptr<Communicator>> MakeThreadCommunicators(int size, int timeout_ms) {
  auto group = std::make_shared<ThreadGroup>(size, timeout_ms);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<ThreadCommunicator>(group, r));
  return out;
}

}  // namespace tencache
