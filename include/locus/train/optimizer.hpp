#pragma once
// The optimiser concept, and the one include that brings every optimiser (locus/train/optim/):
//   sgd{lr, momentum, nesterov}                          optim/sgd.hpp   (0 or 1 state buffer)
//   adam{lr, beta1, beta2, eps, weight_decay}            optim/adam.hpp  (2: L2 weight decay)
//   adamw{lr, beta1, beta2, eps, weight_decay = 0.01}    optim/adam.hpp  (2: decoupled decay)
//
// An optimiser is a copyable class that carries its options and provides
//
//   O::name                  a string, for checkpoints and messages ("adamw")
//   o.lr                     the base learning rate (the schedule scales it, schedule.hpp)
//   o.validate()             throws config_error naming the bad value (called before anything is made)
//   o.state_buffers()        state floats kept per parameter (at most max_state_buffers): the
//                            trainer keeps them per replica, flat, buffer after buffer, and saves them
//                            in checkpoints
//   o.kernel(args, tensor)   the step of one parameter tensor as one kernel: a trivially copyable
//                            functor f, f(i) for each element i, callable on every device, reading
//                            p[i], g[i] and the state once and writing p[i] and the state; args
//                            (optim/kernel.hpp) carry the scheduled learning rate, the gradient's
//                            scale and the replica's step count (Adam's bias correction)
//
// Kernels round each product and sum on its own (detail::mul_rn, add_rn, div_rn, sqrt_rn), so
// that replicas on a cpu and on a GPU stay bit-identical. apply_step runs one optimiser step over
// a replica's tensors; data_parallel takes any optimiser and keeps it behind replica_set.
#include <locus/config.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/train/layout.hpp>
#include <locus/train/optim/adam.hpp>
#include <locus/train/optim/kernel.hpp>
#include <locus/train/optim/sgd.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace locus::train {

/// K is an optimiser's kernel: trivially copyable (it travels to the device by value) and called
/// once per element index.
template <class K>
concept step_kernel = std::is_trivially_copyable_v<K> && std::invocable<const K&, std::size_t>;

/// O is an optimiser (see the list at the top).
template <class O>
concept optimizer = std::is_class_v<O> && std::copy_constructible<O> &&
                    requires(const O& o, const step_args& a, const tensor_state& t) {
                      { O::name } -> std::convertible_to<std::string_view>;
                      { o.lr } -> std::convertible_to<float>;
                      o.validate();
                      { o.state_buffers() } -> std::convertible_to<std::size_t>;
                      { o.kernel(a, t) } -> step_kernel;
                    };

/// One step of `opt` (this replica's `step`-th, from 1) at the scheduled learning rate `lr` on the
/// tensors `params` with their gradients `grads` (views on device D, the gradients scaled by
/// `scale`) and the flat state `state` (opt.state_buffers() x the parameters, buffer after
/// buffer): one kernel per tensor. Mismatched sizes throw shape_error before any tensor changes.
template <optimizer O, device D>
LOCUS_NOINLINE void apply_step(const O& opt, float lr, std::uint64_t step, const std::vector<tensor_view<float, D, 1>>& params,
                const std::vector<tensor_view<const float, D, 1>>& grads, const tensor_view<float, D, 1>& state,
                float scale = 1.f) {
  const std::string who = std::string("locus: ") + O::name + " step: ";
  if (grads.size() != params.size())
    throw shape_error(who + std::to_string(params.size()) + " parameter tensors and " + std::to_string(grads.size()) +
                      " gradients");
  for (std::size_t t = 0; t < params.size(); ++t)
    if (grads[t].size() != params[t].size())
      throw shape_error(who + "tensor " + std::to_string(t) + " has " + std::to_string(params[t].size()) +
                        " elements and a gradient of " + std::to_string(grads[t].size()));
  const std::size_t n = flat_size(params), buffers = opt.state_buffers();
  if (buffers > max_state_buffers)
    throw config_error(who + std::to_string(buffers) + " state buffers, at most " + std::to_string(max_state_buffers));
  if (state.size() != buffers * n)
    throw shape_error(who + "a state of " + std::to_string(state.size()) + " floats for " + std::to_string(buffers) +
                      " buffer(s) of " + std::to_string(n) + " parameters");
  if (step == 0) throw config_error(who + "the step count starts at 1");
  const step_args args{lr, scale, step};
  std::size_t offset = 0;
  for (std::size_t t = 0; t < params.size(); ++t) {
    tensor_state ts{params[t].data(), grads[t].data(), {}};
    for (std::size_t b = 0; b < buffers; ++b) ts.state[b] = state.data() + b * n + offset;
    backend::for_each_index<D>(params[t].size(), opt.kernel(args, ts));
    offset += params[t].size();
  }
}

}  // namespace locus::train

// The built-in optimisers' steps are compiled once, in the run-time file, in a separate-runtime
// program (config.hpp, LOCUS_DETAIL_PREBUILT).
#ifdef LOCUS_DETAIL_PREBUILT
#  define LOCUS_DETAIL_PREBUILT_STEP(O, D)                                                                        \
    LOCUS_DETAIL_PREBUILT void apply_step<O, D>(const O&, float, std::uint64_t,                                 \
                                                const std::vector<tensor_view<float, D, 1>>&,                   \
                                                const std::vector<tensor_view<const float, D, 1>>&,             \
                                                const tensor_view<float, D, 1>&, float);
namespace locus::train {
LOCUS_DETAIL_PREBUILT_STEP(sgd, cpu)
LOCUS_DETAIL_PREBUILT_STEP(adam, cpu)
LOCUS_DETAIL_PREBUILT_STEP(adamw, cpu)
#  if LOCUS_HAS_GPUS
LOCUS_DETAIL_PREBUILT_STEP(sgd, any_gpu)
LOCUS_DETAIL_PREBUILT_STEP(adam, any_gpu)
LOCUS_DETAIL_PREBUILT_STEP(adamw, any_gpu)
#  endif
}  // namespace locus::train
#  undef LOCUS_DETAIL_PREBUILT_STEP
#endif
