#pragma once
// How the replicas' work runs each step: on threads that stay for the trainer's life when the
// replicas are GPUs (their work is launches and waits), one after the other when they share the
// host's cores (the cpu, emulated GPUs), and on one thread per device for hogwild's workers.
// Every runner waits for all parts and rethrows the first failure.
#include <locus/config.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace locus::train::detail {

/// Runs f(index_constant<i>) for i in [0, N).
template <std::size_t... I, class F>
void for_each_index(std::index_sequence<I...>, F&& f) {
  (f(std::integral_constant<std::size_t, I>{}), ...);
}

/// Runs one callable per device on its own thread (inline for one) and rethrows the first failure.
/// With `concurrent` false they run one after the other: host devices (the cpu, emulated GPUs)
/// share the same cores, and each step is already parallel inside (OpenMP, BLAS); threads on top
/// only contend (bench/RESULTS-train.md, "why": 8x slower per step).
LOCUS_RUNTIME_INLINE void run_parallel(std::vector<std::function<void()>>& work, bool concurrent = true);

/// Threads that stay: the replicas of a GPU trainer run every step's work on the same threads
/// (thread i runs work[i + 1]; the caller runs work[0]). A thread made per step, per replica, costs
/// little itself, but the OpenMP team it starts for the batch gather is made and torn down with it
/// (bench/RESULTS-train.md, "why": 10x the step time of one device on an H200).
class replica_threads {
public:
  replica_threads() = default;
  replica_threads(const replica_threads&) = delete;
  replica_threads& operator=(const replica_threads&) = delete;
  LOCUS_RUNTIME_INLINE ~replica_threads();

  /// Runs work[0] here and work[1..] on the threads, waits for all, rethrows the first failure.
  LOCUS_RUNTIME_INLINE void run(std::vector<std::function<void()>>& work);

private:
  LOCUS_RUNTIME_INLINE void loop(std::size_t slot);

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  std::vector<std::function<void()>>* work_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
  std::size_t pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
};

// The runners: part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void run_parallel(std::vector<std::function<void()>>& work, bool concurrent) {
  if (work.size() == 1 || !concurrent) {
    for (auto& w : work) w();
    return;
  }
  std::vector<std::exception_ptr> errors(work.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < work.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        work[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

LOCUS_RUNTIME_INLINE replica_threads::~replica_threads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}
LOCUS_RUNTIME_INLINE void replica_threads::run(std::vector<std::function<void()>>& work) {
  while (threads_.size() + 1 < work.size()) {
    const std::size_t slot = threads_.size() + 1;
    threads_.emplace_back([this, slot] { loop(slot); });
  }
  std::vector<std::exception_ptr> errors(work.size());
  {
    std::lock_guard lock(mutex_);
    work_ = &work;
    errors_ = &errors;
    pending_ = work.size() - 1;
    ++generation_;
  }
  wake_.notify_all();
  try {
    work[0]();
  } catch (...) {
    errors[0] = std::current_exception();
  }
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    work_ = nullptr;
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}
LOCUS_RUNTIME_INLINE void replica_threads::loop(std::size_t slot) {
  std::uint64_t seen = 0;
  for (;;) {
    std::function<void()>* job = nullptr;
    std::exception_ptr* error = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && work_ != nullptr); });
      if (stopping_) return;
      seen = generation_;
      if (slot < work_->size()) {
        job = &(*work_)[slot];
        error = &(*errors_)[slot];
      }
    }
    if (job != nullptr) {
      try {
        (*job)();
      } catch (...) {
        *error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
}
#endif

}  // namespace locus::train::detail
