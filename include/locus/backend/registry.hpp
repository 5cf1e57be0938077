#pragma once
// The run-time registry of devices: how many GPUs this process has, logical GPUs over physical
// ones, one caching arena and (CUDA) one stream per device, and the availability check that turns
// "gpu<5> on a 2-GPU machine" into a device_error listing what exists.
//
// Logical GPUs (TensorFlow's logical device configuration): configure_logical_gpus(K), or the
// environment variable LOCUS_LOGICAL_GPUS=K read on first use, makes gpu<0>..gpu<K-1> available,
// logical GPU i running on physical GPU i % P. Each logical GPU has its own arena and stream.
// Arenas and streams are created on first need and never destroyed (logical GPU i always runs on
// physical GPU i % P, whatever K): reconfiguring only changes how many are available, so a thread
// allocating while another reconfigures never touches freed memory. K is at most max_logical_gpus.
// Emulated GPUs (LOCUS_EMULATE_GPUS): LOCUS_EMULATED_GPUS=P physical ones (default 4).
#include <locus/backend/caching_allocator.hpp>
#include <locus/backend/cuda.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace locus {
namespace backend {

/// Per-device counters that tests and benchmarks read: one kernel (or parallel loop) per launch;
/// one host wait each time the host blocks until a GPU's queued work is done (backend::synchronize:
/// a device-to-host copy, a copy that must be complete when it returns, a collective's end).
struct device_counters {
  std::atomic<std::size_t> launches{0};
  std::atomic<std::size_t> host_waits{0};
};

class registry;
namespace detail {
/// Defined by the run-time part alone, named after its configuration (config.hpp).
LOCUS_RUNTIME_INLINE registry* LOCUS_DETAIL_RUNTIME_CONFIGURATION();
#if !LOCUS_RUNTIME_DEFINITIONS
// Every file of a separate-runtime program refers to its configuration's function itself: the
// reference in instance() alone is one inline function's, of which the linker keeps one copy (at
// -O0), so a file of another configuration than the first would link unnoticed.
namespace {
[[maybe_unused, gnu::used]] registry* (*const runtime_configuration_check)() = &LOCUS_DETAIL_RUNTIME_CONFIGURATION;
}  // namespace
#endif
}  // namespace detail

class registry {
public:
  static registry& instance() {
    // Leaked on purpose: tensors with static storage duration may free into it during exit.
    static registry* r = detail::LOCUS_DETAIL_RUNTIME_CONFIGURATION();
    return *r;
  }

  [[nodiscard]] int physical_gpus() const noexcept { return physical_; }
  [[nodiscard]] int gpus() const {
    std::lock_guard lock(mutex_);
    return available_;
  }
  /// The most logical GPUs a process can configure (configure_logical_gpus, LOCUS_LOGICAL_GPUS).
  static constexpr int max_logical_gpus = 4096;
  [[nodiscard]] static constexpr bool emulated() noexcept { return LOCUS_EMULATE_GPUS != 0; }

  /// Makes gpu<0>..gpu<k-1> available over the physical GPUs. Throws device_error when k < 1,
  /// when there is no physical GPU, or while any GPU tensor is alive.
  void configure_logical_gpus(int k);

  /// Throws device_error unless `d` exists in this process.
  void require(device_id d) const;

  [[nodiscard]] std::vector<std::string> available() const;

  /// The physical CUDA ordinal (or emulated GPU) behind logical GPU `logical`.
  [[nodiscard]] int physical_of(int logical) const { return physical_ == 0 ? 0 : logical % physical_; }

  [[nodiscard]] caching_arena& arena(device_id d) {
    require(d);
    if (!d.is_gpu()) return *host_arena_;
    std::lock_guard lock(mutex_);
    return *gpu_arenas_[static_cast<std::size_t>(d.index)];
  }

  /// The arena a block of `d` returns to: it exists even after reconfiguring made `d` unavailable
  /// (a tensor that outlives the configuration it was made under frees into it). Never throws.
  [[nodiscard]] caching_arena& owner_arena(device_id d) noexcept {
    if (!d.is_gpu()) return *host_arena_;
    std::lock_guard lock(mutex_);
    return *gpu_arenas_[static_cast<std::size_t>(d.index)];
  }

  [[nodiscard]] device_counters& counters(device_id d) {
    const std::size_t slot = d.is_gpu() ? 1 + std::min<std::size_t>(static_cast<std::size_t>(d.index), max_counted - 1) : 0;
    return counters_[slot];
  }

#if LOCUS_HAS_CUDA
  /// The stream of a logical GPU, created on first use.
  [[nodiscard]] cudaStream_t stream(device_id d) {
    require(d);
    std::lock_guard lock(mutex_);
    auto& s = streams_[static_cast<std::size_t>(d.index)];
    if (s == nullptr) {
      cuda::device_guard guard(physical_of(d.index), d);
      LOCUS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), d);
    }
    return s;
  }
#endif

private:
  static constexpr std::size_t max_counted = 64;

  registry();

  static int env_int(const char* name, int fallback);

  static void* host_allocate(std::size_t n) noexcept { return ::operator new(n, std::align_val_t{64}, std::nothrow); }
  static void host_free(void* p) noexcept { ::operator delete(p, std::align_val_t{64}); }

  /// Makes gpu<0>..gpu<k-1> the available ones: creates the arenas (and stream slots) that do not
  /// exist yet, all of them before any is published, and returns the cached blocks of the arenas
  /// that stop being available to the system. Nothing is destroyed.
  void build_gpus_locked(int k);

  [[nodiscard]] std::unique_ptr<caching_arena> make_gpu_arena(int i) const;

  [[nodiscard]] std::vector<std::string> available_locked() const;
  [[nodiscard]] std::string list_locked() const;

  friend registry* detail::LOCUS_DETAIL_RUNTIME_CONFIGURATION();

  mutable std::mutex mutex_;
  int physical_ = 0;
  std::unique_ptr<caching_arena> host_arena_;
  std::vector<std::unique_ptr<caching_arena>> gpu_arenas_;  // grow-only: references to arenas stay valid
  int available_ = 0;
  std::string env_error_;  // why the environment gave no GPUs, thrown at the first GPU use                                         // gpu<0>..gpu<available_-1>
  std::array<device_counters, max_counted + 1> counters_{};
#if LOCUS_HAS_CUDA
  std::vector<cudaStream_t> streams_;
#endif
};

#if LOCUS_RUNTIME_DEFINITIONS
/// The registry, made once by instance().
LOCUS_RUNTIME_INLINE registry* detail::LOCUS_DETAIL_RUNTIME_CONFIGURATION() { return new registry(); }

LOCUS_RUNTIME_INLINE void registry::configure_logical_gpus(int k) {
  if (k < 1 || k > max_logical_gpus)
    throw device_error("locus: configure_logical_gpus(" + std::to_string(k) + "): need 1 to " +
                       std::to_string(max_logical_gpus) + " logical GPUs");
  std::lock_guard lock(mutex_);
  if (physical_ == 0)
    throw device_error("locus: configure_logical_gpus(" + std::to_string(k) +
                       "): this process has no physical GPU; available devices are " + list_locked() +
                       (env_error_.empty() ? "" : " (" + env_error_ + ")"));
  for (int i = 0; i < available_; ++i)
    if (const auto& a = gpu_arenas_[static_cast<std::size_t>(i)]; a->stats().live_blocks != 0)
      throw device_error("locus: configure_logical_gpus: " + a->device().full_name() +
                         " still holds tensors; logical GPUs can only be reconfigured while no GPU tensor "
                         "is alive");
  build_gpus_locked(k);
}

LOCUS_RUNTIME_INLINE void registry::require(device_id d) const {
  if (!d.is_gpu()) return;
  std::lock_guard lock(mutex_);
  if (d.index < available_) return;
  if (!env_error_.empty()) throw device_error(env_error_ + " (so " + d.full_name() + " is not available)");
  throw device_error("locus: " + d.full_name() + " (" + d.type_name() +
                     ") is not available in this process; available devices are " + list_locked());
}

LOCUS_RUNTIME_INLINE std::vector<std::string> registry::available() const {
  std::lock_guard lock(mutex_);
  return available_locked();
}

LOCUS_RUNTIME_INLINE registry::registry() {
  host_arena_ = std::make_unique<caching_arena>(
      id_of<cpu>, [](std::size_t n) { return host_allocate(n); }, [](void* p) { host_free(p); });
  // A malformed LOCUS_EMULATED_GPUS / LOCUS_LOGICAL_GPUS leaves this process without GPUs: code
  // that uses only the cpu runs on, and the first use of a GPU throws the variable's error.
  try {
#if LOCUS_HAS_CUDA
    physical_ = cuda::physical_device_count();
#elif LOCUS_EMULATE_GPUS
    physical_ = env_int("LOCUS_EMULATED_GPUS", 4);
#endif
    int logical = physical_;
    if (physical_ > 0) {
      const int requested = env_int("LOCUS_LOGICAL_GPUS", 0);
      if (requested > 0) logical = requested;
    }
    build_gpus_locked(logical);
  } catch (const device_error& e) {
    env_error_ = e.what();
    physical_ = 0;
    build_gpus_locked(0);
  }
}

LOCUS_RUNTIME_INLINE int registry::env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  // Digits only: strtol would also take " +2" (and refuses "2 "): neither is a count as written.
  if (*v < '0' || *v > '9' || *end != '\0' || x < 0 || x > max_logical_gpus)
    throw device_error(std::string("locus: environment variable ") + name + "=\"" + v +
                       "\" is not a device count");
  return static_cast<int>(x);
}

LOCUS_RUNTIME_INLINE void registry::build_gpus_locked(int k) {
  const auto want = static_cast<std::size_t>(k);
  std::vector<std::unique_ptr<caching_arena>> added;
  for (std::size_t i = gpu_arenas_.size(); i < want; ++i) added.push_back(make_gpu_arena(static_cast<int>(i)));
  gpu_arenas_.reserve(std::max(want, gpu_arenas_.size()));
#if LOCUS_HAS_CUDA
  if (streams_.size() < want) streams_.resize(want, nullptr);
#endif
  for (auto& a : added) gpu_arenas_.push_back(std::move(a));
  for (std::size_t i = want; i < gpu_arenas_.size(); ++i) gpu_arenas_[i]->release_cached();
  available_ = k;
}

LOCUS_RUNTIME_INLINE std::unique_ptr<caching_arena> registry::make_gpu_arena(int i) const {
  const device_id d{device_kind::gpu, i};
#if LOCUS_HAS_CUDA
  const int phys = physical_of(i);
  return std::make_unique<caching_arena>(
      d,
      [d, phys](std::size_t n) -> void* {
        cuda::device_guard guard(phys, d);
        void* p = nullptr;
        if (cudaMalloc(&p, n) != cudaSuccess) {
          (void)cudaGetLastError();
          return nullptr;
        }
        return p;
      },
      [](void* p) { (void)cudaFree(p); });
#else
  // Emulated GPUs: host memory, but an arena of their own so that a pointer of gpu<0>
  // is never mistaken for one of gpu<1>.
  return std::make_unique<caching_arena>(d, [](std::size_t n) { return host_allocate(n); },
                                         [](void* p) { host_free(p); });
#endif
}

LOCUS_RUNTIME_INLINE std::vector<std::string> registry::available_locked() const {
  const std::string job = "/job:localhost/replica:0/task:0";
  std::vector<std::string> out{job + "/cpu:0"};
  for (int i = 0; i < available_; ++i) out.push_back(job + "/gpu:" + std::to_string(i));
  return out;
}

LOCUS_RUNTIME_INLINE std::string registry::list_locked() const {
  std::string s = "[ ";
  const auto names = available_locked();
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s + " ]";
}
#endif  // LOCUS_RUNTIME_DEFINITIONS

}  // namespace backend

/// The devices of this process in TensorFlow's form, the CPU first:
/// "/job:localhost/replica:0/task:0/cpu:0", "/job:localhost/replica:0/task:0/gpu:0", ...
[[nodiscard]] inline std::vector<std::string> available_devices() { return backend::registry::instance().available(); }

/// The same devices as device_ids (cpu first, then gpu 0, 1, ...): what dispatch<MaxGpus>(id, f)
/// takes; `id.full_name()` is TensorFlow's "/job:localhost/replica:0/task:0/device:GPU:0".
[[nodiscard]] inline std::vector<device_id> available_device_ids() {
  std::vector<device_id> out{id_of<cpu>};
  for (int i = 0, n = backend::registry::instance().gpus(); i < n; ++i) out.push_back({device_kind::gpu, i});
  return out;
}

/// The number of (logical) GPUs gpu<0>..gpu<N-1> available in this process.
[[nodiscard]] inline int gpu_count() { return backend::registry::instance().gpus(); }

/// Configures K logical GPUs over the physical (or emulated) ones; see backend/registry.hpp.
inline void configure_logical_gpus(int k) { backend::registry::instance().configure_logical_gpus(k); }

/// Statistics of a device's caching arena.
[[nodiscard]] inline backend::arena_stats memory_stats(device_id d) { return backend::registry::instance().arena(d).stats(); }

/// Makes d the calling thread's current GPU while it lives (for the cpu: none), so that code
/// compiled for any_gpu runs on d; the previous one comes back at its end (scopes nest). Checks
/// that d exists.
class device_scope {
public:
  explicit device_scope(device_id d) : previous_(detail::current_gpu_slot()) {
    backend::registry::instance().require(d);
    detail::current_gpu_slot() = d.is_gpu() ? d.index : -1;
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  ~device_scope() { detail::current_gpu_slot() = previous_; }

private:
  int previous_;
};

namespace detail {
/// device_scope without the check (the caller has required d): evaluations of gpu<N> expressions
/// run as any_gpu inside one (placement/on.hpp).
class checked_gpu_scope {
public:
  explicit checked_gpu_scope(device_id d) noexcept : previous_(current_gpu_slot()) { current_gpu_slot() = d.index; }
  checked_gpu_scope(const checked_gpu_scope&) = delete;
  checked_gpu_scope& operator=(const checked_gpu_scope&) = delete;
  ~checked_gpu_scope() { current_gpu_slot() = previous_; }

private:
  int previous_;
};
}  // namespace detail

/// Returns every block cached by d's arena to the system (cudaFree, operator delete) now. Blocks
/// in use are untouched; later allocations on d take memory from the system again.
inline void release_cached(device_id d) { backend::registry::instance().arena(d).release_cached(); }

/// The most bytes d's arena keeps cached after frees, the oldest blocks going back to the system
/// first: 0 caches nothing, SIZE_MAX sets no limit, std::nullopt restores the default (the arena's
/// peak of live bytes, at least 64 MiB). Applied at once.
inline void set_cache_limit(device_id d, std::optional<std::size_t> bytes) {
  backend::registry::instance().arena(d).set_cache_limit(bytes);
}

/// Kernel launches (one per fused expression or reduction) on a device since the start.
[[nodiscard]] inline std::size_t kernel_launches(device_id d) {
  return backend::registry::instance().counters(d).launches.load(std::memory_order_relaxed);
}

/// The times the host has blocked until GPU d's queued work was done, since the start: each
/// synchronisation, so each copy from d to the host (a scalar read, to_vector, printing), each copy
/// to d that returns complete (from the host, from another GPU), each collective's end. A wait is
/// counted where a real GPU makes the host wait, so emulated GPUs count the same waits as the
/// hardware (their work is done by then already) and tests on the host can keep a step free of
/// them. A kernel launch is not a wait. Always 0 for the cpu.
[[nodiscard]] inline std::size_t host_waits(device_id d) {
  return backend::registry::instance().counters(d).host_waits.load(std::memory_order_relaxed);
}

}  // namespace locus
