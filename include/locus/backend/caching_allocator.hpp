#pragma once
// A caching allocator: one arena per device. Freed blocks go back to the arena and are handed out
// again, so a loop such as `auto c = on<D>(a + b)` allocates from the system only on its first pass
// (a fresh 128 MiB host block costs ~100 ms of page faults; a cached one costs nothing).
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace locus::backend {

struct arena_stats {
  std::size_t system_allocations = 0;  ///< blocks obtained from the system (cudaMalloc, operator new)
  std::size_t reuses = 0;              ///< requests served from the cache
  std::size_t live_blocks = 0;
  std::size_t live_bytes = 0;
  std::size_t cached_bytes = 0;
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

  /// Returns every cached block to the system.
  void release_cached();

  [[nodiscard]] arena_stats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  [[nodiscard]] device_id device() const noexcept { return device_; }

private:
  static std::size_t round_up(std::size_t bytes) {
    constexpr std::size_t small = 512, large = std::size_t{1} << 20;
    const std::size_t unit = bytes <= large ? small : large;
    return (bytes + unit - 1) / unit * unit;
  }
  void take(void* p, std::size_t size) {
    live_.emplace(reinterpret_cast<std::uintptr_t>(p), size);
    ++stats_.live_blocks;
    stats_.live_bytes += size;
  }
  void release_cached_locked();

  device_id device_;
  raw_allocate alloc_;
  raw_free free_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;
  std::map<std::uintptr_t, std::size_t> live_;
  arena_stats stats_;
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void* caching_arena::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > (std::size_t{1} << 62))
    throw allocation_error(device_.full_name(), bytes, "the request exceeds any device's address space");
  const std::size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  // A cached block is taken if it is no more than twice the request: the cache never
  // hands out memory that is mostly wasted.
  if (auto it = cached_.lower_bound(size); it != cached_.end() && it->first <= 2 * size) {
    void* p = it->second;
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

LOCUS_RUNTIME_INLINE void caching_arena::deallocate(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == live_.end()) return;  // not ours: never happens through tensor
  const std::size_t size = it->second;
  live_.erase(it);
  --stats_.live_blocks;
  stats_.live_bytes -= size;
  cached_.emplace(size, p);
  stats_.cached_bytes += size;
}

LOCUS_RUNTIME_INLINE bool caching_arena::owns(const void* p) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(addr);
  if (it == live_.begin()) return false;
  --it;
  return addr < it->first + it->second;
}

LOCUS_RUNTIME_INLINE void caching_arena::release_cached() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

LOCUS_RUNTIME_INLINE void caching_arena::release_cached_locked() {
  for (auto& [size, p] : cached_) free_(p);
  cached_.clear();
  stats_.cached_bytes = 0;
}
#endif  // LOCUS_RUNTIME_DEFINITIONS

}  // namespace locus::backend
