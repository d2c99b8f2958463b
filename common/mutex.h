// The locking primitives psflow code uses: Mutex, MutexLock,
// ReaderMutexLock, Condition and Notification, with abseil's API.
//
// In every normal build they are abseil's own types (plain aliases, no
// cost). Under ThreadSanitizer (--config=tsan) they are a small
// implementation over the standard library's mutex and condition variable
// instead: Debian ships abseil uninstrumented, so TSan cannot see an
// absl::Mutex being taken and would report every guarded access as a
// race, while pthread mutexes and condition variables are intercepted by
// the TSan runtime. Both versions carry the same thread-safety
// annotations, so the clang build checks ABSL_GUARDED_BY either way.
#ifndef PSFLOW_COMMON_MUTEX_H_
#define PSFLOW_COMMON_MUTEX_H_

#if defined(__SANITIZE_THREAD__)
#define PSFLOW_TSAN_MUTEX 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PSFLOW_TSAN_MUTEX 1
#endif
#endif

#ifndef PSFLOW_TSAN_MUTEX

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace psflow {

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using ReaderMutexLock = absl::ReaderMutexLock;
using Condition = absl::Condition;
using Notification = absl::Notification;

}  // namespace psflow

#else  // PSFLOW_TSAN_MUTEX

#include <condition_variable>
#include <functional>
#include <shared_mutex>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psflow {

// A predicate evaluated with the mutex held, as absl::Condition. (The
// predicates are annotated as needing the lock, which Await holds: the
// analysis cannot follow that through a stored function.)
class Condition {
 public:
  // Calls (*callable)(); the callable must outlive the Condition.
  template <typename Callable>
  explicit Condition(const Callable* callable)
      : eval_([callable] { return CallLocked(*callable); }) {}
  // Calls (object->*method)().
  template <typename T>
  Condition(T* object, bool (T::*method)())
      : eval_([object, method] { return CallLocked(object, method); }) {}
  template <typename T>
  Condition(const T* object, bool (T::*method)() const)
      : eval_([object, method] { return CallLocked(object, method); }) {}
  // Calls function(arg).
  template <typename T>
  Condition(bool (*function)(T*), T* arg)
      : eval_([function, arg] { return CallLocked(function, arg); }) {}
  // True once *flag is.
  explicit Condition(const bool* flag) : eval_([flag] { return *flag; }) {}

  bool Eval() const { return eval_(); }

 private:
  template <typename Callable>
  static bool CallLocked(const Callable& callable)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return callable();
  }
  template <typename T, typename Method>
  static bool CallLocked(T* object,
                         Method method) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return (object->*method)();
  }
  template <typename T>
  static bool CallLocked(bool (*function)(T*),
                         T* arg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return function(arg);
  }

  std::function<bool()> eval_;
};

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  // Static mutexes are declared ABSL_CONST_INIT with absl::kConstInit,
  // which only clang enforces; the TSan build uses gcc.
  explicit Mutex(absl::ConstInitType) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Like absl::Mutex, every unlock lets waiters re-check their conditions.
  // They are woken before the unlock: once it returns, a waiter may
  // destroy the mutex (the last user's unlock must not touch it).
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    changed_.notify_all();
    mu_.unlock();
  }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}
  void AssertReaderHeld() const ABSL_ASSERT_SHARED_LOCK() {}

  // With the lock held exclusively: releases it until `condition` holds.
  // Releasing it lets waiters re-check their conditions, as an unlock
  // does (and as absl::Mutex::Await does): what this thread changed under
  // the lock may be what another waits for.
  void Await(const Condition& condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Exclusive held{mu_};
    if (!condition.Eval()) changed_.notify_all();
    while (!condition.Eval()) changed_.wait(held);
  }
  // Like Await, giving up at `deadline`; returns whether `condition` holds.
  bool AwaitWithDeadline(const Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Exclusive held{mu_};
    const auto until = absl::ToChronoTime(deadline);
    if (!condition.Eval()) changed_.notify_all();
    while (!condition.Eval()) {
      if (changed_.wait_until(held, until) == std::cv_status::timeout) {
        return condition.Eval();
      }
    }
    return true;
  }
  bool AwaitWithTimeout(const Condition& condition, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(condition, absl::Now() + timeout);
  }

 private:
  // What condition_variable_any waits with: the exclusive side of mu_.
  struct Exclusive {
    std::shared_mutex& mu;
    void lock() { mu.lock(); }
    void unlock() { mu.unlock(); }
  };

  std::shared_mutex mu_;
  std::condition_variable_any changed_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }

 private:
  Mutex* const mu_;
};

class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await(Condition(&notified_));
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(Condition(&notified_), timeout);
  }
  bool WaitForNotificationWithDeadline(absl::Time deadline) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(Condition(&notified_), deadline);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psflow

#endif  // PSFLOW_TSAN_MUTEX

#endif  // PSFLOW_COMMON_MUTEX_H_
