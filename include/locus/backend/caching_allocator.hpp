#pragma once
// A caching allocator: one arena per device. Freed blocks go back to the arena and are handed out
// again, so a loop such as `auto c = on<D>(a + b)` allocates from the system only on its first pass
// (a fresh 128 MiB host block costs ~100 ms of page faults; a cached one costs nothing).
//
// The cache is bounded: after a free, cached blocks beyond the limit go back to the system, the
// oldest first. The default limit is the arena's peak of live bytes (at least 64 MiB): a loop
// that repeats its allocations never needs more cached than it once held live, while tensors of
// growing size no longer pile up (1..60 MiB one at a time left 1830 MiB cached before).
// set_cache_limit(d, bytes) sets another; release_cached(d) empties the cache now.
//
// Holds: hold(p) keeps the block holding p out of the cache after its tensor frees it, until the
// hold is released. ad's steps hold the operands their backward reads (ad/var.hpp): a tensor made
// inside a loss function dies when the function returns, but its memory stays valid (and unused by
// others) until the backward pass that reads it is done.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace locus::backend {

struct arena_stats {
  std::size_t system_allocations = 0;  ///< blocks obtained from the system (cudaMalloc, operator new)
  std::size_t reuses = 0;              ///< requests served from the cache
  std::size_t live_blocks = 0;
  std::size_t live_bytes = 0;
  std::size_t cached_bytes = 0;
  std::size_t peak_live_bytes = 0;     ///< the most live bytes at once since the start
  std::size_t cache_limit = 0;         ///< cached bytes kept at most (the current limit)
  std::size_t returned_to_system = 0;  ///< cached blocks freed to the system (limit, release_cached, retry)
};

class caching_arena {
public:
  using raw_allocate = std::function<void*(std::size_t)>;  // returns nullptr on failure
  using raw_free = std::function<void(void*)>;

  caching_arena(device_id device, raw_allocate alloc, raw_free free)
      : device_(device), alloc_(std::move(alloc)), free_(std::move(free)) {}
  caching_arena(const caching_arena&) = delete;
  caching_arena& operator=(const caching_arena&) = delete;
  ~caching_arena() = default;  // arenas live as long as the process (see registry)

  /// A block of at least `bytes` bytes; nullptr for 0 bytes. Throws allocation_error.
  [[nodiscard]] void* allocate(std::size_t bytes);

  void deallocate(void* p) noexcept;

  /// True when p points into a live block of this arena.
  [[nodiscard]] bool owns(const void* p) const;

  /// Keeps the live block holding p from returning to the cache until release_hold(base) (one
  /// call per hold). Returns the block's base, or nullptr when p lies in no live block.
  [[nodiscard]] void* hold(const void* p);
  void release_hold(void* base) noexcept;

  /// Returns every cached block to the system.
  void release_cached();
  /// The most bytes the cache keeps (0: nothing is cached; SIZE_MAX: no limit; nullopt: the
  /// default, the peak of live bytes and at least 64 MiB); applied now.
  void set_cache_limit(std::optional<std::size_t> bytes);

  [[nodiscard]] arena_stats stats() const {
    std::lock_guard lock(mutex_);
    arena_stats s = stats_;
    s.cache_limit = limit_locked();
    return s;
  }
  [[nodiscard]] device_id device() const noexcept { return device_; }

private:
  static std::size_t round_up(std::size_t bytes) {
    constexpr std::size_t small = 512, large = std::size_t{1} << 20;
    const std::size_t unit = bytes <= large ? small : large;
    return (bytes + unit - 1) / unit * unit;
  }
  struct block {
    std::size_t size;
    std::size_t holds = 0;
    bool freed = false;  ///< deallocated while held: cached when the last hold goes
  };
  void take(void* p, std::size_t size) {
    live_.emplace(reinterpret_cast<std::uintptr_t>(p), block{size});
    ++stats_.live_blocks;
    stats_.live_bytes += size;
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  }
  /// A block leaves the live ones for the cache, which then keeps to its limit.
  void cache_locked(void* p, std::size_t size);
  [[nodiscard]] std::size_t limit_locked() const noexcept {
    constexpr std::size_t floor = std::size_t{64} << 20;
    return explicit_limit_ ? limit_ : std::max(floor, stats_.peak_live_bytes);
  }
  void trim_locked(std::size_t keep);
  void release_cached_locked();

  device_id device_;
  raw_allocate alloc_;
  raw_free free_;
  mutable std::mutex mutex_;
  struct cached_block {
    void* p;
    std::uint64_t serial;  ///< when it was cached: the oldest go first
  };
  std::multimap<std::size_t, cached_block> cached_;
  std::map<std::uintptr_t, block> live_;
  std::uint64_t serial_ = 0;
  bool explicit_limit_ = false;
  std::size_t limit_ = 0;
  arena_stats stats_;
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE LOCUS_NOINLINE void* caching_arena::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > (std::size_t{1} << 62))
    throw allocation_error(device_.full_name(), bytes, "the request exceeds any device's address space");
  const std::size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  // A cached block is taken if it is no more than twice the request: the cache never
  // hands out memory that is mostly wasted.
  if (auto it = cached_.lower_bound(size); it != cached_.end() && it->first <= 2 * size) {
    void* p = it->second.p;
    const std::size_t got = it->first;
    cached_.erase(it);
    stats_.cached_bytes -= got;
    ++stats_.reuses;
    take(p, got);
    return p;
  }
  void* p = alloc_(size);
  if (p == nullptr && !cached_.empty()) {  // give the cache back and try once more
    release_cached_locked();
    p = alloc_(size);
  }
  if (p == nullptr) throw allocation_error(device_.full_name(), bytes, "out of memory");
  ++stats_.system_allocations;
  take(p, size);
  return p;
}

LOCUS_RUNTIME_INLINE LOCUS_NOINLINE void caching_arena::deallocate(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == live_.end() || it->second.freed) return;  // not ours: never happens through tensor
  if (it->second.holds > 0) {  // read by a pending backward pass: cached when the last hold goes
    it->second.freed = true;
    return;
  }
  const std::size_t size = it->second.size;
  live_.erase(it);
  cache_locked(p, size);
}

LOCUS_RUNTIME_INLINE void caching_arena::cache_locked(void* p, std::size_t size) {
  --stats_.live_blocks;
  stats_.live_bytes -= size;
  cached_.emplace(size, cached_block{p, serial_++});
  stats_.cached_bytes += size;
  trim_locked(limit_locked());
}

LOCUS_RUNTIME_INLINE void caching_arena::trim_locked(std::size_t keep) {
  while (stats_.cached_bytes > keep && !cached_.empty()) {
    auto oldest = cached_.begin();
    for (auto it = cached_.begin(); it != cached_.end(); ++it)
      if (it->second.serial < oldest->second.serial) oldest = it;
    stats_.cached_bytes -= oldest->first;
    ++stats_.returned_to_system;
    free_(oldest->second.p);
    cached_.erase(oldest);
  }
}

LOCUS_RUNTIME_INLINE LOCUS_NOINLINE void* caching_arena::hold(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(addr);
  if (it == live_.begin()) return nullptr;
  --it;
  if (addr >= it->first + it->second.size || it->second.freed) return nullptr;
  ++it->second.holds;
  return reinterpret_cast<void*>(it->first);
}

LOCUS_RUNTIME_INLINE LOCUS_NOINLINE void caching_arena::release_hold(void* base) noexcept {
  if (base == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(reinterpret_cast<std::uintptr_t>(base));
  if (it == live_.end() || it->second.holds == 0) return;
  if (--it->second.holds == 0 && it->second.freed) {
    const std::size_t size = it->second.size;
    live_.erase(it);
    cache_locked(base, size);
  }
}

LOCUS_RUNTIME_INLINE void caching_arena::set_cache_limit(std::optional<std::size_t> bytes) {
  std::lock_guard lock(mutex_);
  explicit_limit_ = bytes.has_value();
  limit_ = bytes.value_or(0);
  trim_locked(limit_locked());
}

LOCUS_RUNTIME_INLINE bool caching_arena::owns(const void* p) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(addr);
  if (it == live_.begin()) return false;
  --it;
  return addr < it->first + it->second.size && !it->second.freed;
}

LOCUS_RUNTIME_INLINE void caching_arena::release_cached() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

LOCUS_RUNTIME_INLINE void caching_arena::release_cached_locked() {
  for (auto& [size, c] : cached_) free_(c.p);
  stats_.returned_to_system += cached_.size();
  cached_.clear();
  stats_.cached_bytes = 0;
}
#endif  // LOCUS_RUNTIME_DEFINITIONS

}  // namespace locus::backend
