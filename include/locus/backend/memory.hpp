#pragma once
// Device memory: allocation through the device's caching arena, copies between any two devices,
// synchronisation. Copies are synchronous for the caller: when copy() returns, dst holds the data
// (a copy within one GPU is queued on its stream, ahead of everything that can read dst).
#include <locus/backend/cuda.hpp>
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>

#include <cstring>
#include <utility>

namespace locus::backend {

// Out of line (LOCUS_NOINLINE): every tensor's constructor and destructor calls them.
[[nodiscard]] LOCUS_NOINLINE inline void* allocate(device_id d, std::size_t bytes) {
  return registry::instance().arena(d).allocate(bytes);
}
LOCUS_NOINLINE inline void deallocate(device_id d, void* p) noexcept { registry::instance().owner_arena(d).deallocate(p); }

/// Keeps the arena block holding a pointer alive (see caching_arena::hold): the memory is not handed
/// out again until the hold is destroyed, even if its tensor is freed first. Empty when the pointer
/// lies in no block of the device's arena (host memory viewed as cpu memory, not locus's).
class storage_hold {
public:
  storage_hold() noexcept = default;
  storage_hold(device_id d, const void* p) : device_(d) {
    if (p != nullptr) base_ = registry::instance().owner_arena(d).hold(p);
  }
  storage_hold(storage_hold&& o) noexcept : device_(o.device_), base_(std::exchange(o.base_, nullptr)) {}
  storage_hold& operator=(storage_hold&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      base_ = std::exchange(o.base_, nullptr);
    }
    return *this;
  }
  storage_hold(const storage_hold&) = delete;
  storage_hold& operator=(const storage_hold&) = delete;
  ~storage_hold() { reset(); }
  /// True when a block is held.
  [[nodiscard]] explicit operator bool() const noexcept { return base_ != nullptr; }
  void reset() noexcept {
    if (base_ != nullptr) registry::instance().owner_arena(device_).release_hold(base_);
    base_ = nullptr;
  }

private:
  device_id device_{};
  void* base_ = nullptr;
};

/// True when p lies in a live block of d's arena (for cpu: in no GPU arena, since any host
/// pointer may be viewed as cpu memory).
[[nodiscard]] inline bool owns(device_id d, const void* p) {
  auto& r = registry::instance();
  if (d.is_gpu()) return r.arena(d).owns(p);
  for (int i = 0; i < r.gpus(); ++i)
    if (r.arena({device_kind::gpu, i}).owns(p)) return false;
  return true;
}

/// Counts one host wait on GPU d (host_waits): where the host blocks until d's queued work is done.
inline void count_host_wait(device_id d) {
  if (d.is_gpu()) registry::instance().counters(d).host_waits.fetch_add(1, std::memory_order_relaxed);
}

/// Waits until all work queued on d is done (a host wait; on an emulated GPU it is done already,
/// and the wait is counted all the same).
inline void synchronize(device_id d) {
  if (!d.is_gpu()) return;
  count_host_wait(d);
#if LOCUS_HAS_CUDA
  auto& r = registry::instance();
  cuda::device_guard guard(r.physical_of(d.index), d);
  LOCUS_CUDA_CHECK(cudaStreamSynchronize(r.stream(d)), d);
#endif
}

/// Copies `bytes` from src (on device `from`) to dst (on device `to`).
inline void copy(device_id to, void* dst, device_id from, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
#if LOCUS_HAS_CUDA
  auto& r = registry::instance();
  if (!to.is_gpu() && !from.is_gpu()) {
    std::memcpy(dst, src, bytes);
  } else if (!from.is_gpu()) {  // host to device
    cuda::device_guard guard(r.physical_of(to.index), to);
    LOCUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, r.stream(to)), to);
    synchronize(to);
  } else if (!to.is_gpu()) {  // device to host, ordered after the work that wrote src
    cuda::device_guard guard(r.physical_of(from.index), from);
    LOCUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, r.stream(from)), from);
    synchronize(from);
  } else if (to == from) {
    // One device, one stream: the copy runs after the work that wrote src and before any later
    // work, and whatever reads dst from elsewhere (the host, another device) synchronises first.
    cuda::device_guard guard(r.physical_of(to.index), to);
    LOCUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, r.stream(to)), to);
  } else {
    const int pt = r.physical_of(to.index), pf = r.physical_of(from.index);
    int can = 0;
    if (pt != pf) LOCUS_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, pt, pf), to);
    // The source's work done before `to`'s stream reads it (the staged path below orders the copy
    // on `from`'s own stream instead): one wait on each side, as host_waits documents.
    if (pt == pf || can) synchronize(from);
    if (pt == pf) {  // two logical GPUs on one card
      cuda::device_guard guard(pt, to);
      LOCUS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, r.stream(to)), to);
      synchronize(to);
      return;
    }
    if (can) {
      cuda::device_guard guard(pt, to);
      const cudaError_t e = cudaDeviceEnablePeerAccess(pf, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else LOCUS_CUDA_CHECK(e, to);
      LOCUS_CUDA_CHECK(cudaMemcpyPeerAsync(dst, pt, src, pf, bytes, r.stream(to)), to);
      synchronize(to);
    } else {  // no peer access: stage through pinned host memory
      void* staging = nullptr;
      LOCUS_CUDA_CHECK(cudaMallocHost(&staging, bytes), from);
      try {
        copy(id_of<cpu>, staging, from, src, bytes);
        copy(to, dst, id_of<cpu>, staging, bytes);
      } catch (...) {
        (void)cudaFreeHost(staging);
        throw;
      }
      LOCUS_CUDA_CHECK(cudaFreeHost(staging), from);
    }
  }
#else
  std::memmove(dst, src, bytes);  // host and emulated GPUs share the address space
  // The waits the CUDA path above makes: after a copy from the host (on to), to the host (on
  // from), between two GPUs (on both); none within one GPU.
  if (to != from) {
    count_host_wait(from);
    count_host_wait(to);
  }
#endif
}

}  // namespace locus::backend
