#pragma once
// Device tags (and the thread's current GPU, for any_gpu). Nothing here touches CUDA, OpenMP or
// Thrust.
//
//   locus::cpu      the one host device, "/cpu:0" (there is no cpu<1>: every CPU core belongs to it)
//   locus::gpu<N>   GPU N, "/gpu:N"; a real GPU in an nvcc build, an emulated one with
//                   LOCUS_EMULATE_GPUS, and a compile error otherwise.
#include <locus/config.hpp>
#include <locus/errors.hpp>

#include <concepts>
#include <string>
#include <type_traits>

namespace locus {

enum class device_kind { cpu, gpu };

/// The host device. Not a template: the host is one device whatever its core count.
struct cpu {
  static constexpr device_kind kind = device_kind::cpu;
  static constexpr int index = 0;
};

/// GPU number N (a logical GPU when logical GPUs are configured).
template <int N>
struct gpu {
  static_assert(N >= 0, "locus: gpu<N> needs an index N >= 0");
  static_assert(LOCUS_HAS_GPUS || N < 0,
                "locus: gpu<N> needs a CUDA build (compile with nvcc) or GPU emulation (CMake option "
                "LOCUS_EMULATE_GPUS=ON, or define LOCUS_EMULATE_GPUS=1); this build has only the host device, "
                "locus::cpu");
  static constexpr device_kind kind = device_kind::gpu;
  static constexpr int index = N;
};

/// A GPU whose index is known at run time only: the calling thread's current GPU (device_scope,
/// backend/registry.hpp). The device type of the code below the typed surface: a replica's model,
/// gradient and optimiser code is compiled once for the cpu and once for any_gpu, then runs for
/// gpu<0>, gpu<1>, ... alike (the typed surface, data_parallel<P, gpu<0>, gpu<1>> and on<gpu<1>>,
/// keeps every compile-time rule). id_of<any_gpu> is the current GPU; code that names any_gpu
/// outside a device_scope throws device_error.
struct any_gpu {
  static constexpr device_kind kind = device_kind::gpu;
  static constexpr bool dynamic = true;
};

namespace detail {
template <class T>
struct is_device_tag : std::false_type {};
template <>
struct is_device_tag<cpu> : std::true_type {};
template <int N>
struct is_device_tag<gpu<N>> : std::true_type {};
template <>
struct is_device_tag<any_gpu> : std::true_type {};
}  // namespace detail

/// A locus device tag: locus::cpu or locus::gpu<N>. Every placement API is constrained on it.
template <class D>
concept device = detail::is_device_tag<std::remove_cvref_t<D>>::value;

template <class D>
inline constexpr bool is_gpu_v = device<D> && D::kind == device_kind::gpu;

/// TensorFlow's "GPU first" rule, decided at compile time: gpu<0> in a CUDA build, cpu otherwise.
#if LOCUS_HAS_CUDA
using default_device = gpu<0>;
#else
using default_device = cpu;
#endif

/// A device named at run time (logs, errors, statistics).
struct device_id {
  device_kind kind = device_kind::cpu;
  int index = 0;

  friend constexpr bool operator==(device_id, device_id) = default;
  friend constexpr auto operator<=>(device_id, device_id) = default;

  /// "/cpu:0", "/gpu:1"
  [[nodiscard]] std::string name() const {
    return (kind == device_kind::cpu ? "/cpu:" : "/gpu:") + std::to_string(index);
  }
  /// "/device:CPU:0", "/device:GPU:1"
  [[nodiscard]] std::string device_name() const {
    return (kind == device_kind::cpu ? "/device:CPU:" : "/device:GPU:") + std::to_string(index);
  }
  /// "/job:localhost/replica:0/task:0/device:GPU:1", the form of TensorFlow's placement log.
  [[nodiscard]] std::string full_name() const;
  /// "cpu", "gpu<1>": the C++ spelling, for messages that suggest code.
  [[nodiscard]] std::string type_name() const;
  [[nodiscard]] constexpr bool is_gpu() const { return kind == device_kind::gpu; }
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE std::string device_id::full_name() const {
  return "/job:localhost/replica:0/task:0" + device_name();
}
LOCUS_RUNTIME_INLINE std::string device_id::type_name() const {
  return kind == device_kind::cpu ? std::string("cpu") : "gpu<" + std::to_string(index) + ">";
}
#endif

/// True for any_gpu: a device whose index is a run-time value.
template <class D>
inline constexpr bool is_dynamic_v = requires { D::dynamic; };

/// The device type D's code is compiled for below the typed surface: the cpu stays the cpu, every
/// gpu<N> is any_gpu.
template <class D>
using core_device_t = std::conditional_t<D::kind == device_kind::gpu, any_gpu, D>;

namespace detail {
/// The calling thread's current GPU index (-1: none), which device_scope (backend/registry.hpp)
/// sets. Part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
LOCUS_RUNTIME_INLINE int& current_gpu_slot() noexcept;
/// The calling thread's current GPU: id_of<any_gpu>. Throws device_error outside a device_scope.
LOCUS_RUNTIME_INLINE device_id current_gpu();
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE int& current_gpu_slot() noexcept {
  thread_local int slot = -1;
  return slot;
}
LOCUS_RUNTIME_INLINE device_id current_gpu() {
  const int i = current_gpu_slot();
  if (i < 0)
    throw device_error("locus: any_gpu used outside a device_scope: code of the run-time GPU type runs inside the "
                       "scope of the GPU it runs on");
  return {device_kind::gpu, i};
}
#endif
/// id_of<any_gpu>: reads the current GPU wherever a device_id is wanted.
struct current_gpu_id {
  // NOLINTNEXTLINE(google-explicit-constructor): used wherever id_of<D> is
  operator device_id() const { return current_gpu(); }
  [[nodiscard]] std::string name() const { return current_gpu().name(); }
  [[nodiscard]] std::string device_name() const { return current_gpu().device_name(); }
  [[nodiscard]] std::string full_name() const { return current_gpu().full_name(); }
  [[nodiscard]] std::string type_name() const { return current_gpu().type_name(); }
  [[nodiscard]] bool is_gpu() const { return true; }
};
}  // namespace detail

template <device D>
inline constexpr device_id id_of{D::kind, D::index};
/// any_gpu's id is the calling thread's current GPU.
template <>
inline constexpr detail::current_gpu_id id_of<any_gpu>{};

}  // namespace locus
