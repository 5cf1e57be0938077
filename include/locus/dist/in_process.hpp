#pragma once
// dist::in_process: the replicas of one process, summed on the first device (each other buffer
// copied there, one fused add each) and the sum copied back: one transfer per device each way,
// whatever the number of tensors. Peer copies between GPUs, memory copies on the host.
#include <locus/config.hpp>
#include <locus/dist/communicator.hpp>
#include <locus/placement/on.hpp>
#include <locus/expr/operators.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>

#include <cstddef>
#include <string>
#include <tuple>
#include <utility>

namespace locus::dist {

struct in_process {
  template <class... Ds>
  class group;
};

template <class... Ds>
class in_process::group {
  using first_device = std::tuple_element_t<0, std::tuple<Ds...>>;

public:
  static constexpr bool spans_processes = false;

  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  [[nodiscard]] std::string name() const { return "in_process"; }

  void all_reduce_sum(const buffers<Ds...>& b) {
    reduce_to_first(b);
    copy_first_to_rest(b);
  }
  void broadcast(const buffers<Ds...>& b) { copy_first_to_rest(b); }
  void sum_host(float*, std::size_t) {}
  void broadcast_host(float*, std::size_t) {}
  void barrier() {}
  std::string first_failure(const std::string& mine) { return mine; }

  /// The first buffer := the sum of all; the others are left as they were.
  void reduce_to_first(const buffers<Ds...>& b) {
    if constexpr (sizeof...(Ds) > 1) {
      const auto& sum = std::get<0>(b);
      if (staging_.size() != sum.size())
        staging_ = tensor<float, first_device, 1>::uninitialized_of(shape{sum.size()});
      each(b, [&](auto i, const auto& other) {
        if constexpr (i > 0) {
          locus::transfer(staging_.view(), other);
          sum = sum + staging_;
        }
      });
    }
  }
  /// Every other buffer := the first.
  void copy_first_to_rest(const buffers<Ds...>& b) {
    each(b, [&](auto i, const auto& other) {
      if constexpr (i > 0) locus::transfer(other, std::get<0>(b));
    });
  }

private:
  template <class F>
  static void each(const buffers<Ds...>& b, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::integral_constant<std::size_t, I>{}, std::get<I>(b)), ...);
    }(std::index_sequence_for<Ds...>{});
  }

  tensor<float, first_device, 1> staging_;
};

}  // namespace locus::dist
