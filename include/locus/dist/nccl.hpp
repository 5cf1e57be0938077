#pragma once
// dist::nccl: GPUs summed by NCCL. One NCCL communicator per device: ncclCommInitAll over this
// process's GPUs, or, when MPI is initialised with more than one rank, ncclCommInitRank on every
// device of every rank with the unique id broadcast over MPI. all_reduce_sum is one
// ncclAllReduce per replica, in place, on the replica's own stream (the one its kernels run on, so
// it follows them without a host wait), grouped (ncclGroupStart/End), then the streams are waited.
//
// Needs a CUDA build linked with NCCL: locus's CUDA backend (the build tree, or find_package(locus
// COMPONENTS cuda)) finds nccl.h and libnccl in the CUDA Toolkit's folders, links it and defines
// LOCUS_HAS_NCCL=1 (CMake option LOCUS_WITH_NCCL=OFF leaves it out).
// NCCL refuses two ranks on one physical GPU, so logical GPUs sharing a card cannot use it
// (config_error naming them); dist::automatic falls back to dist::in_process there.
#include <locus/config.hpp>
#include <locus/backend/memory.hpp>
#include <locus/backend/registry.hpp>
#include <locus/device/device.hpp>
#include <locus/dist/communicator.hpp>
#include <locus/dist/in_process.hpp>
#include <locus/dist/mpi.hpp>
#include <locus/errors.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#if !defined(LOCUS_HAS_NCCL)
#  define LOCUS_HAS_NCCL 0
#endif
#if LOCUS_HAS_NCCL && !LOCUS_HAS_CUDA
#  undef LOCUS_HAS_NCCL
#  define LOCUS_HAS_NCCL 0  // NCCL serves real GPUs: host builds never use it
#endif
#if LOCUS_HAS_NCCL
#  include <locus/backend/cuda.hpp>
#  include <nccl.h>
#endif

namespace locus::dist {

struct nccl {
  template <class... Ds>
  class group;

  /// True when NCCL can serve replicas on Ds...: a build with NCCL, every device a gpu<N> on a
  /// physical GPU of its own.
  template <class... Ds>
  [[nodiscard]] static bool usable() {
    if constexpr (!LOCUS_HAS_NCCL || !(is_gpu_v<Ds> && ...)) {
      return false;
    } else {
      auto& r = backend::registry::instance();
      const std::array<int, sizeof...(Ds)> ordinals{r.physical_of(Ds::index)...};
      if (r.physical_gpus() == 0) return false;
      for (std::size_t i = 0; i < ordinals.size(); ++i)
        for (std::size_t j = i + 1; j < ordinals.size(); ++j)
          if (ordinals[i] == ordinals[j]) return false;
      return true;
    }
  }
};

#if LOCUS_HAS_NCCL
namespace detail {
inline void nccl_check(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    throw error(std::string("locus: ") + call + " failed: " + ncclGetErrorString(status) +
                (status == ncclSystemError || status == ncclInternalError || status == ncclInvalidUsage
                     ? std::string(" (") + ncclGetLastError(nullptr) + ")"
                     : std::string()));
}
}  // namespace detail

template <class... Ds>
class nccl::group {
  static_assert((is_gpu_v<Ds> && ...), "locus: dist::nccl communicates between GPUs: every device must be a gpu<N>");
  static constexpr std::size_t n = sizeof...(Ds);

public:
#  if LOCUS_HAS_MPI
  static constexpr bool spans_processes = true;
#  else
  static constexpr bool spans_processes = false;
#  endif

  group() {
    auto& r = backend::registry::instance();
    const std::array<device_id, n> ids{id_of<Ds>...};
    const std::array<int, n> ordinals{r.physical_of(Ds::index)...};
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j)
        if (ordinals[i] == ordinals[j])
          throw config_error("locus: dist::nccl: " + ids[i].name() + " and " + ids[j].name() +
                             " are both on CUDA device " + std::to_string(ordinals[i]) +
                             " (logical GPUs), and NCCL needs a GPU per replica; use dist::in_process");
    for (std::size_t i = 0; i < n; ++i) streams_[i] = r.stream(ids[i]);
#  if LOCUS_HAS_MPI
    int initialised = 0;
    MPI_Initialized(&initialised);
    int world = 1;
    if (initialised != 0) MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world > 1) {
      mpi_.emplace();
      ncclUniqueId id{};
      if (mpi_->rank() == 0) detail::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      static_assert(sizeof(id) % sizeof(float) == 0);
      mpi_->broadcast(reinterpret_cast<float*>(&id), sizeof(id) / sizeof(float), 0);
      const int ranks = mpi_->size() * int(n);
      detail::nccl_check(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t i = 0; i < n; ++i) {
        backend::cuda::device_guard guard(ordinals[i], ids[i]);
        detail::nccl_check(ncclCommInitRank(&comms_[i], ranks, id, mpi_->rank() * int(n) + int(i)), "ncclCommInitRank");
      }
      detail::nccl_check(ncclGroupEnd(), "ncclGroupEnd");
      return;
    }
#  endif
    detail::nccl_check(ncclCommInitAll(comms_.data(), int(n), ordinals.data()), "ncclCommInitAll");
  }
  group(const group&) = delete;
  group& operator=(const group&) = delete;
  ~group() {
    for (auto c : comms_)
      if (c != nullptr) (void)ncclCommDestroy(c);
  }

  [[nodiscard]] int rank() const noexcept { return mpi_ ? mpi_->rank() : 0; }
  [[nodiscard]] int size() const noexcept { return mpi_ ? mpi_->size() : 1; }
  [[nodiscard]] std::string name() const { return "nccl"; }

  void all_reduce_sum(const buffers<Ds...>& b) {
    collective(b, [&](std::size_t i, float* p, std::size_t count) {
      detail::nccl_check(ncclAllReduce(p, p, count, ncclFloat, ncclSum, comms_[i], streams_[i]), "ncclAllReduce");
    });
  }
  void broadcast(const buffers<Ds...>& b) {
    collective(b, [&](std::size_t i, float* p, std::size_t count) {
      detail::nccl_check(ncclBroadcast(p, p, count, ncclFloat, 0, comms_[i], streams_[i]), "ncclBroadcast");
    });
  }
  void sum_host(float* p, std::size_t count) {
    if (mpi_) mpi_->sum(p, count);
  }
  void broadcast_host(float* p, std::size_t count) {
    if (mpi_) mpi_->broadcast(p, count, 0);
  }
  void barrier() {
    if (mpi_) mpi_->barrier();
  }
  std::string first_failure(const std::string& mine) { return mpi_ ? mpi_->first_failure(mine) : mine; }

private:
  template <class F>
  void collective(const buffers<Ds...>& b, F&& call) {
    const std::array<std::pair<float*, std::size_t>, n> parts = std::apply(
        [](const auto&... v) { return std::array<std::pair<float*, std::size_t>, n>{std::pair{v.data(), v.size()}...}; }, b);
    const std::array<device_id, n> ids{id_of<Ds>...};
    detail::nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < n; ++i) call(i, parts[i].first, parts[i].second);
    detail::nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    auto& r = backend::registry::instance();
    for (std::size_t i = 0; i < n; ++i) {
      backend::cuda::device_guard guard(r.physical_of(ids[i].index), ids[i]);
      backend::count_host_wait(ids[i]);
      LOCUS_CUDA_CHECK(cudaStreamSynchronize(streams_[i]), ids[i]);
    }
  }

  std::array<ncclComm_t, n> comms_{};
  std::array<cudaStream_t, n> streams_{};
#  if LOCUS_HAS_MPI
  std::optional<mpi_comm> mpi_;
#  else
  struct no_mpi {
    int rank() const { return 0; }
    int size() const { return 1; }
    void sum(float*, std::size_t) {}
    void broadcast(float*, std::size_t, int) {}
    void barrier() {}
    std::string first_failure(const std::string& m) { return m; }
  };
  std::optional<no_mpi> mpi_;
#  endif
};
#else
template <class... Ds>
class nccl::group {
  static_assert(sizeof...(Ds) == 0,
                "locus: dist::nccl needs a CUDA build linked with NCCL (LOCUS_HAS_NCCL=1): locus's CUDA backend "
                "finds it in the CUDA Toolkit; a host build has no NCCL");
};
#endif

/// The default: NCCL where it can serve (every replica a real GPU of its own, NCCL linked), the
/// in-process sums otherwise. Chosen when the group is made.
struct automatic {
  template <class... Ds>
  class group;
};

template <class... Ds>
class automatic::group {
public:
  static constexpr bool spans_processes = false;

  group() {
#if LOCUS_HAS_NCCL
    if constexpr ((is_gpu_v<Ds> && ...)) {
      if (nccl::usable<Ds...>() && single_process()) nccl_.emplace();
    }
#endif
  }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  [[nodiscard]] std::string name() const { return uses_nccl() ? "nccl" : "in_process"; }
  [[nodiscard]] bool uses_nccl() const noexcept {
#if LOCUS_HAS_NCCL
    if constexpr ((is_gpu_v<Ds> && ...)) return nccl_.has_value();
#endif
    return false;
  }

  void all_reduce_sum(const buffers<Ds...>& b) {
#if LOCUS_HAS_NCCL
    if constexpr ((is_gpu_v<Ds> && ...))
      if (nccl_) return nccl_->all_reduce_sum(b);
#endif
    local_.all_reduce_sum(b);
  }
  void broadcast(const buffers<Ds...>& b) {
#if LOCUS_HAS_NCCL
    if constexpr ((is_gpu_v<Ds> && ...))
      if (nccl_) return nccl_->broadcast(b);
#endif
    local_.broadcast(b);
  }
  void sum_host(float*, std::size_t) {}
  void broadcast_host(float*, std::size_t) {}
  void barrier() {}
  std::string first_failure(const std::string& mine) { return mine; }

private:
  /// The default communicator serves one process: under mpirun, ask for dist::mpi or dist::nccl.
  static bool single_process() {
#if LOCUS_HAS_MPI
    int initialised = 0;
    MPI_Initialized(&initialised);
    int world = 1;
    if (initialised != 0) MPI_Comm_size(MPI_COMM_WORLD, &world);
    return world == 1;
#else
    return true;
#endif
  }

  in_process::group<Ds...> local_;
#if LOCUS_HAS_NCCL
  std::optional<std::conditional_t<(is_gpu_v<Ds> && ...), nccl::group<Ds...>, in_process::group<Ds...>>> nccl_;
#endif
};

}  // namespace locus::dist
