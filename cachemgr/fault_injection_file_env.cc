#include "cachemgr/fault_injection_file_env.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <unordered_map>

namespace tencache {
namespace {

using Clock = std::chrono::steady_clock;

class FaultyBlockFile final : public BlockFile {
 public:
  FaultyBlockFile(std::unique_ptr<BlockFile> base, FaultInjectionFileEnv* env)
      : base_(std::move(base)), env_(env), seen_generation_(env->release_generation()) {
    env_->Register(this);
  }
  ~FaultyBlockFile() override { env_->Unregister(this); }

  const std::string& path() const override { return base_->path(); }
  uint64_t size() const override { return base_->size(); }
  uint32_t queue_depth() const override { return base_->queue_depth(); }
  std::string engine() const override { return base_->engine() + " + fault injection"; }
  Status RegisterBuffers(const std::vector<std::pair<void*, uint64_t>>& b) override {
    return base_->RegisterBuffers(b);
  }

  Status Submit(const IoRequest& r) override {
    FaultRule rule;
    if (!env_->TakeFault(r.op, r.offset, &rule)) return Forward(r, Effect{});
    switch (rule.kind) {
      case FaultKind::kEio:
        synthetic_.push_back({r.tag, -EIO});
        return Status::Ok();
      case FaultKind::kNoSpace:
        synthetic_.push_back({r.tag, -ENOSPC});
        return Status::Ok();
      case FaultKind::kShortIo: {
        IoRequest shorter = r;
        shorter.len = (r.len / 2) / kDirectIoAlignment * kDirectIoAlignment;
        if (shorter.len == 0) {
          synthetic_.push_back({r.tag, 0});
          return Status::Ok();
        }
        return Forward(shorter, Effect{});
      }
      case FaultKind::kCorruptRead:
        return Forward(r, Effect{static_cast<uint8_t*>(r.buf), {}});
      case FaultKind::kSlowIo:
        return Forward(r, Effect{nullptr, rule.delay});
      case FaultKind::kHeld:
        parked_.push_back(r);
        env_->CountHeld(1);
        return Status::Ok();
      case FaultKind::kDirectIoRefused:  // TakeFault never returns open-time rules
        return Forward(r, Effect{});
    }
    return Status::Internal("unknown fault kind");
  }

  Status Flush() override { return base_->Flush(); }

  StatusOr<size_t> Reap(std::vector<IoCompletion>* out, size_t max, size_t min_wait,
                        std::chrono::milliseconds timeout) override {
    const Clock::time_point deadline = Clock::now() + timeout;
    size_t n = 0;
    for (;;) {
      TC_RETURN_IF_ERROR(StartReleased());
      n += DrainReady(out, max - n);
      if (n >= max || n >= min_wait || TakeInterrupt()) break;
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        env_->CountReapTimeout();
        break;
      }
      Clock::time_point until = deadline;
      for (const auto& h : held_) until = std::min(until, h.release);
      if (base_->in_flight() > 0) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now) +
                    std::chrono::milliseconds(1);
        std::vector<IoCompletion> got;
        TC_ASSIGN_OR_RETURN(size_t k, base_->Reap(&got, max, 1, wait));
        (void)k;
        for (const IoCompletion& c : got) Arrive(c);
      } else if (!held_.empty() || !parked_.empty()) {
        // The injected latency, or a hold: until a release time, Interrupt() or ReleaseHeld().
        MutexLock lock(&wake_mu_);
        wake_cv_.wait_until(lock.native(), until, [&]() REQUIRES(wake_mu_) { return interrupted_; });
      } else {
        break;
      }
    }
    return n;
  }

  uint32_t in_flight() const override {
    return base_->in_flight() + static_cast<uint32_t>(synthetic_.size() + held_.size() + parked_.size());
  }

  void Interrupt() override {
    {
      MutexLock lock(&wake_mu_);
      interrupted_ = true;
    }
    wake_cv_.notify_all();
    base_->Interrupt();
  }

 private:
  struct Effect {
    uint8_t* corrupt = nullptr;
    std::chrono::milliseconds delay{0};
  };
  struct Held {
    IoCompletion completion;
    Clock::time_point release;
  };

  bool TakeInterrupt() {
    MutexLock lock(&wake_mu_);
    const bool was = interrupted_;
    interrupted_ = false;
    return was;
  }

  // Submits the held requests once ReleaseHeld() was called.
  Status StartReleased() {
    const uint64_t generation = env_->release_generation();
    if (generation == seen_generation_) return Status::Ok();
    seen_generation_ = generation;
    env_->CountHeld(-int64_t(parked_.size()));
    for (const IoRequest& r : parked_) TC_RETURN_IF_ERROR(base_->Submit(r));
    parked_.clear();
    return base_->Flush();
  }

  Status Forward(const IoRequest& r, Effect effect) {
    if (effect.corrupt != nullptr || effect.delay.count() > 0) effects_[r.tag] = effect;
    return base_->Submit(r);
  }

  void Arrive(IoCompletion c) {
    auto it = effects_.find(c.tag);
    if (it == effects_.end()) {
      synthetic_.push_back(c);
      return;
    }
    Effect e = it->second;
    effects_.erase(it);
    if (e.corrupt != nullptr && c.result > 0) e.corrupt[c.result / 2] ^= 0x5A;
    if (e.delay.count() > 0) {
      held_.push_back({c, Clock::now() + e.delay});
    } else {
      synthetic_.push_back(c);
    }
  }

  size_t DrainReady(std::vector<IoCompletion>* out, size_t max) {
    size_t n = 0;
    while (n < max && !synthetic_.empty()) {
      out->push_back(synthetic_.front());
      synthetic_.pop_front();
      ++n;
    }
    const Clock::time_point now = Clock::now();
    for (auto it = held_.begin(); it != held_.end() && n < max;) {
      if (it->release <= now) {
        out->push_back(it->completion);
        it = held_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    return n;
  }

  std::unique_ptr<BlockFile> base_;
  FaultInjectionFileEnv* const env_;
  std::deque<IoCompletion> synthetic_;  // completed, ready to hand out
  std::deque<Held> held_;               // completed, held back by kSlowIo
  std::vector<IoRequest> parked_;       // not started: kHeld, until ReleaseHeld()
  uint64_t seen_generation_;
  std::unordered_map<uint64_t, Effect> effects_;
  Mutex wake_mu_;  // Interrupt() comes from other threads
  std::condition_variable wake_cv_;
  bool interrupted_ GUARDED_BY(wake_mu_) = false;
};

}  // namespace

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kEio: return "EIO";
    case FaultKind::kShortIo: return "short I/O";
    case FaultKind::kNoSpace: return "ENOSPC";
    case FaultKind::kCorruptRead: return "corrupt read";
    case FaultKind::kSlowIo: return "slow I/O";
    case FaultKind::kDirectIoRefused: return "O_DIRECT refused";
    case FaultKind::kHeld: return "held";
  }
  return "unknown";
}

void FaultInjectionFileEnv::AddFault(const FaultRule& rule) {
  MutexLock lock(&mu_);
  rules_.push_back(rule);
}

void FaultInjectionFileEnv::ClearFaults() {
  MutexLock lock(&mu_);
  rules_.clear();
}

uint64_t FaultInjectionFileEnv::faults_injected() const {
  MutexLock lock(&mu_);
  return injected_;
}

void FaultInjectionFileEnv::ReleaseHeld() {
  MutexLock lock(&mu_);  // held: a file unregisters before it is destroyed
  ++release_generation_;
  for (BlockFile* f : files_) f->Interrupt();
}

uint64_t FaultInjectionFileEnv::reap_timeouts() const {
  MutexLock lock(&mu_);
  return reap_timeouts_;
}

void FaultInjectionFileEnv::Register(BlockFile* file) {
  MutexLock lock(&mu_);
  files_.push_back(file);
}

void FaultInjectionFileEnv::Unregister(BlockFile* file) {
  MutexLock lock(&mu_);
  files_.erase(std::remove(files_.begin(), files_.end(), file), files_.end());
}

uint64_t FaultInjectionFileEnv::release_generation() const {
  MutexLock lock(&mu_);
  return release_generation_;
}

uint64_t FaultInjectionFileEnv::held_requests() const {
  MutexLock lock(&mu_);
  return held_;
}

void FaultInjectionFileEnv::CountHeld(int64_t delta) {
  MutexLock lock(&mu_);
  held_ = uint64_t(int64_t(held_) + delta);
}

void FaultInjectionFileEnv::CountReapTimeout() {
  MutexLock lock(&mu_);
  ++reap_timeouts_;
}

bool FaultInjectionFileEnv::TakeFault(IoOp op, uint64_t offset, FaultRule* fired) {
  MutexLock lock(&mu_);
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    const IoOp rule_op = it->kind == FaultKind::kNoSpace ? IoOp::kWrite
                         : it->kind == FaultKind::kCorruptRead ? IoOp::kRead
                                                               : it->op;
    if (it->on_open || it->kind == FaultKind::kDirectIoRefused || rule_op != op || offset < it->offset_begin || offset >= it->offset_end) continue;
    *fired = *it;
    ++injected_;
    if (it->count > 0 && --it->count == 0) rules_.erase(it);
    return true;
  }
  return false;
}

StatusOr<std::unique_ptr<BlockFile>> FaultInjectionFileEnv::OpenBlockFile(
    const std::string& path, uint64_t size, const BlockFileOptions& options) {
  {
    MutexLock lock(&mu_);
    for (const FaultRule& r : rules_) {
      if (r.kind == FaultKind::kNoSpace && r.on_open)
        return Status::IoError(path + ": preallocating " + std::to_string(size) +
                               " bytes: No space left on device (injected)");
      if (r.kind == FaultKind::kDirectIoRefused && options.direct_io) {
        ++injected_;
        return Status::Unavailable(path + ": open with O_DIRECT: Invalid argument (injected)");
      }
    }
  }
  TC_ASSIGN_OR_RETURN(std::unique_ptr<BlockFile> file, base_->OpenBlockFile(path, size, options));
  return std::unique_ptr<BlockFile>(new FaultyBlockFile(std::move(file), this));
}

}  // namespace tencache
