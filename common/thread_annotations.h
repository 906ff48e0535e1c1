// Clang thread-safety annotations, and a mutex and lock the analysis can see.
// Under clang with -Wthread-safety the compiler checks that every member marked
// GUARDED_BY(mu_) is touched only with mu_ held and that REQUIRES/EXCLUDES hold
// at each call; under other compilers the macros expand to nothing.
// std::mutex and std::unique_lock carry no annotations in libstdc++, so guarded
// state uses Mutex and MutexLock below (same behaviour, same cost).
// tests/cachemgr/CMakeLists.txt runs the analysis over cachemgr with clang++-14.
#pragma once

#include <mutex>

#if defined(__clang__)
#define TENCACHE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TENCACHE_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) TENCACHE_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TENCACHE_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) TENCACHE_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TENCACHE_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) TENCACHE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) TENCACHE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) TENCACHE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TENCACHE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) TENCACHE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) TENCACHE_THREAD_ANNOTATION(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS TENCACHE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace tencache {

// A std::mutex the analysis knows as a capability. Not recursive.
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For std::condition_variable, through MutexLock::native().
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope, as std::unique_lock does: may be unlocked and
// locked again (each REQUIRES the opposite state), and lends its
// std::unique_lock to a std::condition_variable, whose wait releases the mutex
// and holds it again on return (so, to the analysis, it stays held).
// Used by one thread at a time.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : lock_(mu->native()) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }
  // The same, in a function handed the lock by pointer under REQUIRES(*mu):
  // there the analysis cannot tie this lock to *mu, so the caller names it.
  // REQUIRES: mu is the Mutex this lock holds.
  void Unlock(Mutex* mu) RELEASE(mu) NO_THREAD_SAFETY_ANALYSIS { lock_.unlock(); }
  void Lock(Mutex* mu) ACQUIRE(mu) NO_THREAD_SAFETY_ANALYSIS { lock_.lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace tencache
