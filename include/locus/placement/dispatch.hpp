#pragma once
// Run-time device choice. Devices are types, but `--gpu 3` on a command line is a number: these
// bridge the two, up to a bound fixed at compile time (each device below it is one instantiation).
//
//   dispatch<MaxGpus>(id, f)         f.template operator()<D>() for the device `id` names: locus::cpu,
//                                    or gpu<N> for N < MaxGpus
//   with_devices<MaxGpus>(count, f)  f.template operator()<gpu<0>, ..., gpu<count - 1>>(), count from
//                                    1 to MaxGpus (a data_parallel over the first `count` GPUs)
//
//   const int n = std::stoi(argv[1]);
//   locus::dispatch<8>(locus::device_id{locus::device_kind::gpu, n}, [&]<locus::device D>() {
//     auto x = locus::to<D>(host);                 // a tensor<float, D>
//     std::printf("%g\n", locus::on<D>(sum(x * x)).item());
//   });
//
// A device beyond the bound, an index that names no device, or a device this process does not have
// throws device_error before f runs, naming the device and the bound or the available devices. f
// returns one type for every device. A constrained f ([&]<locus::device D> requires
// locus::is_gpu_v<D>) is compiled and called only for the devices it takes; the others throw
// device_error. In a build without GPUs dispatch compiles f for the cpu alone, and with_devices
// does not compile. Write f with a capture ([&]<locus::device D>): nvcc warns (#445-D) about the
// function-pointer conversion of a capture-less template lambda.
#include <locus/backend/registry.hpp>
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

namespace locus {
namespace detail {

template <class... Ds>
struct device_list {};

template <class F, class... Ds>
concept takes_devices = requires(F& f) { f.template operator()<Ds...>(); };

/// What f returns for a list of devices, when it takes them.
template <class F, class L>
struct call_result {
  using type = void;
  static constexpr bool taken = false;
};
template <class F, class... Ds>
  requires takes_devices<F, Ds...>
struct call_result<F, device_list<Ds...>> {
  using type = decltype(std::declval<F&>().template operator()<Ds...>());
  static constexpr bool taken = true;
};

template <class F, class... Ls>
struct first_taken {
  using type = void;
};
template <class F, class L, class... Ls>
struct first_taken<F, L, Ls...> {
  using type = std::conditional_t<call_result<F, L>::taken, typename call_result<F, L>::type,
                                  typename first_taken<F, Ls...>::type>;
};

/// f over several device lists: whether it takes any, and whether all it takes return one type.
template <class F, class... Ls>
struct common_result {
  using type = typename first_taken<F, Ls...>::type;
  static constexpr bool any = (call_result<F, Ls>::taken || ...);
  static constexpr bool same = ((!call_result<F, Ls>::taken || std::is_same_v<typename call_result<F, Ls>::type, type>) && ...);
};

template <class Result, class F, class L>
struct device_call;
template <class Result, class F, class... Ds>
struct device_call<Result, F, device_list<Ds...>> {
  static Result call(F& f, const char* what) {
    if constexpr (takes_devices<F, Ds...>) {
      return f.template operator()<Ds...>();
    } else {
      std::string list;
      ((list += (list.empty() ? "" : ", ") + id_of<Ds>.type_name()), ...);
      throw device_error(std::string("locus: ") + what + ": f does not take <" + list + ">");
    }
  }
};

/// Calls f with the device list Ls...[entry]: one table of instantiations, one indirect call.
template <class F, class... Ls>
decltype(auto) call_entry(F& f, std::size_t entry, const char* what) {
  using all = common_result<F, Ls...>;
  if constexpr (!all::any) {
    static_assert(all::any, "locus: dispatch / with_devices: f takes none of the devices; write it as "
                            "[&]<locus::device D>() { ... } (with_devices: [&]<locus::device... Ds>() { ... })");
  } else if constexpr (!all::same) {
    static_assert(all::same, "locus: dispatch / with_devices: f must return one type for every device (a tensor<T, D> "
                             "differs per device: return to<locus::cpu>(t), t.to_vector() or a plain value)");
  } else {
    using Result = typename all::type;
    static constexpr Result (*table[])(F&, const char*) = {&device_call<Result, F, Ls>::call...};
    return table[entry](f, what);
  }
}

template <class Seq>
struct first_gpus_of;
template <std::size_t... I>
struct first_gpus_of<std::index_sequence<I...>> {
  using type = device_list<gpu<static_cast<int>(I)>...>;
};
/// first_gpus<K>::type is device_list<gpu<0>, ..., gpu<K - 1>> (a class, not an alias: nvcc's front
/// end loses the pack of an alias of make_index_sequence expanded in a pack).
template <std::size_t K>
struct first_gpus : first_gpus_of<std::make_index_sequence<K>> {};

}  // namespace detail

/// Calls f.template operator()<D>() for the device `id` names: locus::cpu, or gpu<N> for
/// N < MaxGpus; returns what f returns. See the top of this header.
template <int MaxGpus, class F>
decltype(auto) dispatch(device_id id, F&& f) {
  static_assert(MaxGpus >= 0, "locus: dispatch<MaxGpus>(id, f): MaxGpus is a count of GPUs, 0 or more");
  constexpr int bound = LOCUS_HAS_GPUS ? MaxGpus : 0;
  const std::string where = "locus: dispatch<" + std::to_string(MaxGpus) + ">: ";
  if (id.index < 0 || (!id.is_gpu() && id.index != 0))
    throw device_error(where + "index " + std::to_string(id.index) + " names no " + (id.is_gpu() ? "GPU" : "cpu") +
                       " (the cpu is index 0, GPUs count from 0)");
  if (id.is_gpu() && id.index >= bound)
    throw device_error(where + id.full_name() + " (" + id.type_name() + ") is beyond the compile-time bound: " +
                       (!LOCUS_HAS_GPUS  ? std::string("this build has no GPUs (nvcc, or LOCUS_EMULATE_GPUS=1)")
                        : bound == 0     ? std::string("no GPU was compiled; raise MaxGpus")
                                         : "gpu<0> to gpu<" + std::to_string(bound - 1) + "> were compiled; raise MaxGpus"));
  backend::registry::instance().require(id);
  return [&]<std::size_t... N>(std::index_sequence<N...>) -> decltype(auto) {
    return detail::call_entry<std::remove_reference_t<F>, detail::device_list<cpu>,
                              detail::device_list<gpu<static_cast<int>(N)>>...>(
        f, id.is_gpu() ? 1 + static_cast<std::size_t>(id.index) : 0, "dispatch");
  }(std::make_index_sequence<static_cast<std::size_t>(bound)>{});
}

/// Calls f.template operator()<gpu<0>, ..., gpu<count - 1>>() for count from 1 to MaxGpus: the
/// first `count` GPUs as a type list, e.g. for train::data_parallel. Returns what f returns. Throws
/// device_error before f runs when count is outside 1..MaxGpus or the process has fewer GPUs.
template <int MaxGpus, class F>
decltype(auto) with_devices(int count, F&& f) {
  static_assert(MaxGpus >= 1, "locus: with_devices<MaxGpus>(count, f): MaxGpus is the largest count, 1 or more");
  static_assert(LOCUS_HAS_GPUS || MaxGpus < 1,
                "locus: with_devices<MaxGpus>(count, f) lists GPUs; this build has none (compile with nvcc, or CMake "
                "option LOCUS_EMULATE_GPUS=ON)");
  if constexpr (LOCUS_HAS_GPUS && MaxGpus >= 1) {
    if (count < 1 || count > MaxGpus)
      throw device_error("locus: with_devices<" + std::to_string(MaxGpus) + ">(" + std::to_string(count) +
                         ", f): the count must be 1 to " + std::to_string(MaxGpus) +
                         " (the compile-time bound; raise MaxGpus for more)");
    backend::registry::instance().require(device_id{device_kind::gpu, count - 1});
    return [&]<std::size_t... K>(std::index_sequence<K...>) -> decltype(auto) {
      return detail::call_entry<std::remove_reference_t<F>, typename detail::first_gpus<K + 1>::type...>(
          f, static_cast<std::size_t>(count - 1), "with_devices");
    }(std::make_index_sequence<static_cast<std::size_t>(MaxGpus)>{});
  }
}

}  // namespace locus
