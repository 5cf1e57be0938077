#pragma once
// The host's threads: one budget per process and one pool that runs every parallel host kernel.
//
// The budget is what the machine really gives the process: the CPUs of its affinity mask, at most
// its cgroup's CPU quota (v2 cpu.max, v1 cfs_quota_us), shared among the MPI ranks on the node;
// OMP_NUM_THREADS or set_host_threads() override it. host_parallelism() says what was chosen and why.
//
// The pool exists because a fork-join team cannot hold up on a shared machine: an OpenMP parallel
// region ends at a barrier every thread of the team must reach, so a kernel waits for the slowest
// thread to be scheduled, and libgomp's waiting threads spin (300,000 turns by default) on cores
// another process needs. A step of hundreds of kernels became 20-70x slower with one busy process
// per core beside it (issue 31). Here a kernel is cut into chunks that threads *claim*: the calling
// thread runs chunks itself and waits only for chunks another thread has started, never for a
// thread that has not come, so a kernel under load runs at worst at the caller's serial speed.
// Idle workers spin briefly, then sleep on a futex (std::atomic::wait). Which chunks a kernel is cut
// into depends on its size and the thread count only, never on timing: results do not depend on
// which thread ran what.
#include <locus/config.hpp>
#include <locus/errors.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace locus::backend {

/// Below this many elements a host kernel runs as a plain loop on the calling thread: handing work
/// to another thread costs about a microsecond, a serial pass over 16K floats a few (bench_host).
inline constexpr std::size_t serial_threshold = std::size_t{1} << 14;

/// The most threads a host kernel uses, whatever is asked for (the pool keeps at most this many
/// minus one workers).
inline constexpr int max_host_threads = 256;

/// How the host backend runs kernels: the thread count, why, and the grain.
struct host_parallelism {
  int threads = 1;                        ///< threads a host kernel uses (the caller one of them)
  std::size_t grain = serial_threshold;   ///< kernels below this many elements run serially
  int cores = 1;                          ///< CPUs in the process's affinity mask
  std::optional<double> cpu_quota;        ///< the cgroup's CPU quota in CPUs, when it sets one
  int local_ranks = 1;                    ///< MPI ranks on this node sharing the cores
  std::string source;                     ///< what set `threads`: "affinity", "cgroup quota", ...
};

/// The process's host budget (computed once, on first use; set_host_threads changes it).
[[nodiscard]] LOCUS_RUNTIME_INLINE host_parallelism host_parallelism_info();

/// Sets the process's host thread count (n >= 1, at most max_host_threads), or back to the
/// automatic choice (n == 0). Negative n throws config_error. Threads already inside a scoped_host_threads keep their limit.
LOCUS_RUNTIME_INLINE void set_host_threads(int n);

/// The CPUs of the process's affinity mask (the machine's CPU count where there is no mask).
[[nodiscard]] LOCUS_RUNTIME_INLINE int host_cores() noexcept;

/// The threads a host kernel started from the calling thread uses: the thread's own limit
/// (scoped_host_threads) or the process's budget.
[[nodiscard]] LOCUS_RUNTIME_INLINE int host_threads() noexcept;

namespace detail {
/// The calling thread's own limit (0: the process's budget).
[[nodiscard]] inline int& thread_limit() noexcept {
  thread_local int limit = 0;
  return limit;
}
/// A cgroup v2 `cpu.max` line ("max 100000", "150000 100000"): the quota in CPUs, if any.
[[nodiscard]] LOCUS_RUNTIME_INLINE std::optional<double> parse_cpu_max(std::string_view text);
/// OMP_NUM_THREADS's first value ("4", "4,2"): a positive count, or nothing when it is not one.
[[nodiscard]] LOCUS_RUNTIME_INLINE std::optional<int> parse_thread_count(const char* text);
/// The budget from its inputs: cores, a quota, ranks on the node, an override (OMP_NUM_THREADS or
/// set_host_threads, named by `override_source`).
[[nodiscard]] LOCUS_RUNTIME_INLINE host_parallelism choose_threads(int cores, std::optional<double> quota,
                                                                   int local_ranks, std::optional<int> override_count,
                                                                   const char* override_source);

/// Runs body(ctx, c) for c in [0, chunks) on up to `threads` threads, the caller one of them; returns
/// when every chunk has run, rethrowing the first exception a chunk threw (the others still finish
/// or are skipped; nothing is left running).
LOCUS_RUNTIME_INLINE void run_chunks(std::size_t chunks, int threads, void (*body)(const void*, std::size_t),
                                     const void* ctx);
}  // namespace detail

/// f(c) for c in [0, chunks), in parallel over the calling thread's host budget.
template <class F>
void parallel_chunks(std::size_t chunks, const F& f) {
  const int threads = chunks > 1 ? host_threads() : 1;
  if (threads <= 1) {
    for (std::size_t c = 0; c < chunks; ++c) f(c);
    return;
  }
  detail::run_chunks(
      chunks, threads, [](const void* p, std::size_t c) { (*static_cast<const F*>(p))(c); }, &f);
}

/// f(begin, end) over pieces of [0, n): one piece on the calling thread when n is below `grain` or
/// the budget is one thread; else pieces of at least grain / 4 elements (multiples of 64), up to 8
/// per thread, so that a thread the system has not scheduled leaves little for the others to take.
template <class F>
void parallel_ranges(std::size_t n, const F& f, std::size_t grain = serial_threshold) {
  const int threads = n >= grain ? host_threads() : 1;
  if (threads <= 1 || n == 0) {
    if (n != 0) f(std::size_t{0}, n);
    return;
  }
  const std::size_t min_piece = std::max<std::size_t>(64, grain / 4);
  std::size_t pieces = std::min<std::size_t>(std::size_t(threads) * 8, n / min_piece);
  if (pieces < 2) {
    f(std::size_t{0}, n);
    return;
  }
  // Written so that nothing wraps for n near SIZE_MAX.
  std::size_t piece = n / pieces + (n % pieces != 0);
  if (piece % 64 != 0 && piece <= SIZE_MAX - 64) piece += 64 - piece % 64;
  pieces = n / piece + (n % piece != 0);
  parallel_chunks(pieces, [&](std::size_t c) { f(c * piece, c * piece + std::min(piece, n - c * piece)); });
}

/// Limits the calling thread's host kernels to n threads while it lives, then restores the
/// thread's previous limit (hogwild's workers share the budget out this way).
class scoped_host_threads {
public:
  explicit scoped_host_threads(int n) noexcept : previous_(detail::thread_limit()) {
    detail::thread_limit() = std::clamp(n, 1, max_host_threads);
  }
  scoped_host_threads(const scoped_host_threads&) = delete;
  scoped_host_threads& operator=(const scoped_host_threads&) = delete;
  ~scoped_host_threads() { detail::thread_limit() = previous_; }

private:
  int previous_;
};

/// Limits the calling thread's host kernels to n threads (n < 1: one) until changed again.
inline void limit_host_threads(int n) noexcept { detail::thread_limit() = std::clamp(n, 1, max_host_threads); }

}  // namespace locus::backend

namespace locus {
using backend::host_parallelism;
using backend::host_parallelism_info;
using backend::set_host_threads;
}  // namespace locus

// ---- the run-time part -------------------------------------------------------------------------
#if LOCUS_RUNTIME_DEFINITIONS
#  include <algorithm>
#  include <cerrno>
#  include <cmath>
#  include <cstdlib>
#  include <fstream>
#  include <mutex>
#  include <sstream>
#  include <thread>
#  include <utility>
#  include <vector>
#  if defined(__linux__)
#    include <sched.h>
#  endif
#  if defined(__unix__)
#    include <pthread.h>
#  endif
#  if defined(__x86_64__) || defined(__i386__)
#    include <immintrin.h>
#  endif
#  if defined(_OPENMP)
#    include <omp.h>
#  endif

namespace locus::backend {
namespace detail {

LOCUS_RUNTIME_INLINE std::optional<double> parse_cpu_max(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  double period = 100000;
  if (!(in >> quota) || quota == "max") return std::nullopt;
  in >> period;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || *end != '\0' || !(q > 0) || !(period > 0) || !std::isfinite(q / period))
    return std::nullopt;
  return q / period;
}

LOCUS_RUNTIME_INLINE std::optional<int> parse_thread_count(const char* text) {
  if (text == nullptr) return std::nullopt;
  while (*text == ' ') ++text;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || v < 1 || v > 1 << 20) return std::nullopt;
  while (*end == ' ') ++end;
  if (*end != '\0' && *end != ',') return std::nullopt;
  return static_cast<int>(std::min<long>(v, max_host_threads));
}

LOCUS_RUNTIME_INLINE host_parallelism choose_threads(int cores, std::optional<double> quota, int local_ranks,
                                                     std::optional<int> override_count, const char* override_source) {
  host_parallelism p;
  p.cores = std::max(1, cores);
  p.cpu_quota = quota;
  p.local_ranks = std::max(1, local_ranks);
  if (override_count) {
    p.threads = std::clamp(*override_count, 1, max_host_threads);
    p.source = override_source;
    return p;
  }
  int n = p.cores;
  p.source = "affinity";
  if (quota && std::ceil(*quota) < double(n)) {
    n = std::max(1, static_cast<int>(std::ceil(*quota)));
    p.source = "cgroup quota";
  }
  if (p.local_ranks > 1) {
    n = std::max(1, n / p.local_ranks);
    p.source += ", shared by " + std::to_string(p.local_ranks) + " MPI ranks on the node";
  }
  p.threads = n;
  return p;
}

/// The CPUs of the affinity mask.
LOCUS_RUNTIME_INLINE int affinity_cpus() noexcept {
#  if defined(__linux__)
  for (int cpus = 1024; cpus <= (1 << 16); cpus *= 4) {  // machines past 1024 CPUs need a larger set
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) break;
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    const bool ok = sched_getaffinity(0, size, set) == 0;
    const int n = ok ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (ok) {
      if (n > 0) return n;
      break;
    }
    if (errno != EINVAL) break;
  }
#  endif
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

inline std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

/// The smallest CPU quota of the process's cgroup and its parents (v2), or of its v1 cpu controller.
LOCUS_RUNTIME_INLINE std::optional<double> cgroup_quota() {
  std::optional<double> best;
  auto take = [&](std::optional<double> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  std::ifstream groups("/proc/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {
    // "0::/user.slice/..." (v2) or "4:cpu,cpuacct:/docker/..." (v1)
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controllers.empty()) {
      for (;;) {
        take(parse_cpu_max(read_first_line("/sys/fs/cgroup" + path + "/cpu.max")));
        if (path.empty() || path == "/") break;
        path = path.substr(0, path.rfind('/'));
      }
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      // The group and its parents; inside a container the mount's root is the group itself
      // (the path names the host's view), so the walk ends at the root's own files.
      for (const char* root : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        for (std::string sub = path == "/" ? "" : path;;) {
          const std::string dir = std::string(root) + sub;
          const std::string q = read_first_line(dir + "/cpu.cfs_quota_us"),
                            p = read_first_line(dir + "/cpu.cfs_period_us");
          if (!q.empty() && !p.empty()) take(parse_cpu_max(q + " " + p));
          if (sub.empty()) break;
          sub = sub.substr(0, sub.rfind('/'));
        }
      }
    }
  }
  return best;
}

/// The ranks on this node, from the MPI launcher's environment (Open MPI, MPICH/Hydra, MVAPICH).
LOCUS_RUNTIME_INLINE int local_mpi_ranks() noexcept {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"})
    if (auto n = parse_thread_count(std::getenv(name))) return *n;
  return 1;
}

struct budget_state {
  std::mutex mutex;
  std::optional<host_parallelism> info;
  std::atomic<int> threads{0};  // 0: not computed yet
};
inline budget_state& budget() {
  static auto* b = new budget_state();  // never destroyed: kernels may run during static destruction
  return *b;
}

LOCUS_RUNTIME_INLINE host_parallelism compute_budget(std::optional<int> api) {
  if (api) return choose_threads(affinity_cpus(), cgroup_quota(), local_mpi_ranks(), api, "set_host_threads");
  return choose_threads(affinity_cpus(), cgroup_quota(), local_mpi_ranks(),
                        parse_thread_count(std::getenv("OMP_NUM_THREADS")), "OMP_NUM_THREADS");
}

/// The process's budget, chosen on first use; b.mutex held by the caller.
inline const host_parallelism& budget_locked(budget_state& b) {
  if (!b.info) {
    b.info = compute_budget(std::nullopt);
    b.threads.store(b.info->threads, std::memory_order_release);
  }
  return *b.info;
}

inline int process_threads() noexcept {
  auto& b = budget();
  int n = b.threads.load(std::memory_order_acquire);
  if (n > 0) return n;
  try {
    std::lock_guard lock(b.mutex);
    return budget_locked(b).threads;
  } catch (...) {
    return 1;
  }
}

inline void cpu_relax() noexcept {
#  if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#  elif defined(__aarch64__)
  asm volatile("yield");
#  endif
}

/// One kernel's chunks, on the calling thread's stack while it runs.
struct pool_job {
  void (*body)(const void*, std::size_t);
  const void* ctx;
  std::size_t chunks;
  int max_helpers;
  int threads;  // the caller's budget: a helper's nested kernels keep to it too
  std::atomic<std::size_t> next{0};
  std::atomic<int> helpers{0};     // workers attached: each holds the job alive until it detaches
  std::exception_ptr error;        // the first failure, under the pool's mutex
  pool_job* newer = nullptr;
  pool_job* older = nullptr;
};

/// The workers. Immortal (never destroyed, its threads detached): a kernel may run during static
/// destruction, and a forked child (which has only the forking thread) still runs every kernel
/// itself, since no caller waits for a worker that has not attached.
class host_pool {
public:
  static host_pool& instance() {
    static auto* p = new host_pool();
    return *p;
  }
  host_pool() {
#  if defined(__unix__)
    pthread_atfork(&before_fork, &after_fork_parent, &after_fork_child);
#  endif
  }

  void run(std::size_t chunks, int threads, void (*body)(const void*, std::size_t), const void* ctx) {
    pool_job job;
    job.body = body;
    job.ctx = ctx;
    job.chunks = chunks;
    job.max_helpers = static_cast<int>(std::min<std::size_t>(std::size_t(threads - 1), chunks - 1));
    job.threads = threads;
    {
      std::lock_guard lock(mutex_);
      while (workers_ < job.max_helpers && workers_ < max_workers) {
        try {
          std::thread([this] { loop(); }).detach();
        } catch (...) {
          break;  // no more threads to be had: the caller and the workers there are run the kernel
        }
        ++workers_;
      }
      job.older = newest_;
      if (newest_ != nullptr) newest_->newer = &job;
      newest_ = &job;
    }
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();
    work(job);
    {
      std::lock_guard lock(mutex_);  // no worker attaches after this
      if (job.newer != nullptr) job.newer->older = job.older;
      else newest_ = job.older;
      if (job.older != nullptr) job.older->newer = job.newer;
    }
    // Wait for the workers that took chunks (not for any that did not come).
    for (int spins = 0;;) {
      const std::uint32_t seen = detached_.load(std::memory_order_seq_cst);
      if (job.helpers.load(std::memory_order_acquire) == 0) break;
      if (++spins < 4000) {
        cpu_relax();
        continue;
      }
      waiting_.fetch_add(1, std::memory_order_seq_cst);
      if (job.helpers.load(std::memory_order_acquire) != 0) detached_.wait(seen, std::memory_order_seq_cst);
      waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (job.error) std::rethrow_exception(job.error);
  }

private:
  static constexpr int max_workers = 255;
  static constexpr int idle_spins = 2000;  // ~50-100 us of pause before a worker sleeps

  /// Runs chunk `first` (if below the count) and then every chunk it can claim.
  void work(pool_job& job, std::size_t first = SIZE_MAX) {
    for (std::size_t c = first;; c = job.next.fetch_add(1, std::memory_order_relaxed)) {
      if (c == SIZE_MAX) continue;
      if (c >= job.chunks) return;
      try {
        job.body(job.ctx, c);
      } catch (...) {
        job.next.store(job.chunks, std::memory_order_relaxed);  // the rest is skipped
        std::lock_guard lock(mutex_);
        if (!job.error) job.error = std::current_exception();
      }
    }
  }

  /// A job with room for a helper and a chunk left, that chunk claimed: a worker counts as a
  /// helper only once it holds a chunk, so a caller never waits for one that has not started.
  std::pair<pool_job*, std::size_t> attach() {
    std::lock_guard lock(mutex_);
    for (pool_job* j = newest_; j != nullptr; j = j->older) {
      if (j->helpers.load(std::memory_order_relaxed) >= j->max_helpers) continue;
      const std::size_t c = j->next.fetch_add(1, std::memory_order_relaxed);
      if (c < j->chunks) {
        j->helpers.fetch_add(1, std::memory_order_relaxed);
        return {j, c};
      }
    }
    return {nullptr, 0};
  }

  // fork(): the child has the forking thread only. The handlers keep the pool's and the budget's
  // mutexes from being copied locked, and the child starts with no workers and no jobs (a fork
  // from inside a kernel's piece is not supported, as with OpenMP).
  static void before_fork() {
    budget().mutex.lock();
    instance().mutex_.lock();
  }
  static void after_fork_parent() {
    instance().mutex_.unlock();
    budget().mutex.unlock();
  }
  static void after_fork_child() {
    host_pool& p = instance();
    p.newest_ = nullptr;
    p.workers_ = 0;
    p.sleepers_.store(0);
    p.waiting_.store(0);
    p.mutex_.unlock();
    budget().mutex.unlock();
  }

  void loop() {
#  if defined(_OPENMP)
    omp_set_num_threads(1);  // a BLAS call in a chunk stays on this thread (an OpenMP BLAS reads this)
#  endif
    for (;;) {
      const std::uint32_t seen = epoch_.load(std::memory_order_seq_cst);
      if (const auto [j, first] = attach(); j != nullptr) {
        {
          const int own = thread_limit();
          thread_limit() = j->threads;
          work(*j, first);
          thread_limit() = own;
        }
        j->helpers.fetch_sub(1, std::memory_order_acq_rel);  // j may be gone after this
        detached_.fetch_add(1, std::memory_order_seq_cst);
        if (waiting_.load(std::memory_order_seq_cst) > 0) detached_.notify_all();
        continue;
      }
      bool woken = false;
      for (int i = 0; i < idle_spins && !woken; ++i) {
        cpu_relax();
        woken = epoch_.load(std::memory_order_relaxed) != seen;
      }
      if (woken) continue;
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      epoch_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  std::mutex mutex_;
  pool_job* newest_ = nullptr;
  int workers_ = 0;
  std::atomic<std::uint32_t> epoch_{0}, detached_{0};
  std::atomic<int> sleepers_{0}, waiting_{0};
};

// The pool and the budget are made at program start, not at a first kernel: a fork() while another
// thread was making them would copy a half-made function-local static into the child, whose first
// kernel then waits forever on its initialisation guard (seen in CI: a child hung at its first
// kernel while the parent's other thread ran its first one).
inline const bool pool_made_at_start = (host_pool::instance(), budget(), true);

LOCUS_RUNTIME_INLINE void run_chunks(std::size_t chunks, int threads, void (*body)(const void*, std::size_t),
                                     const void* ctx) {
  if (chunks == 0) return;
  if (threads <= 1 || chunks == 1) {
    for (std::size_t c = 0; c < chunks; ++c) body(ctx, c);
    return;
  }
  host_pool::instance().run(chunks, threads, body, ctx);
}
}  // namespace detail

LOCUS_RUNTIME_INLINE host_parallelism host_parallelism_info() {
  auto& b = detail::budget();
  std::lock_guard lock(b.mutex);
  return detail::budget_locked(b);
}

LOCUS_RUNTIME_INLINE void set_host_threads(int n) {
  if (n < 0)
    throw config_error("locus: set_host_threads(" + std::to_string(n) +
                       "): the thread count must be 1 or more (0: the automatic choice)");
  auto& b = detail::budget();
  std::lock_guard lock(b.mutex);
  b.info = n == 0 ? detail::compute_budget(std::nullopt) : detail::compute_budget(n);
  b.threads.store(b.info->threads, std::memory_order_release);
}

LOCUS_RUNTIME_INLINE int host_cores() noexcept { return detail::affinity_cpus(); }

LOCUS_RUNTIME_INLINE int host_threads() noexcept {
  const int own = detail::thread_limit();
  return own > 0 ? own : detail::process_threads();
}

}  // namespace locus::backend
#endif
