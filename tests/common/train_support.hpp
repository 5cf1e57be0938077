#pragma once
// What the training tests share (in process and over MPI): a small learnable data set, a model
// that fails on purpose, quiet fit options, flat parameters and an exception's message.
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace locus_test {
using namespace locus;
using namespace locus::train;

/// n examples of 16 features in [0, 1); the class is the index of the largest of the first 4.
inline data::labelled_images synthetic(std::size_t n, std::uint64_t seed) {
  const std::size_t features = 16;
  auto x = on<cpu>(random::uniform<float>(shape{n, features}, seed, 0.0, 1.0));
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t best = 0;
    for (std::int32_t c = 1; c < 4; ++c)
      if (x(i, std::size_t(c)) > x(i, std::size_t(best))) best = c;
    y[i] = best;
  }
  return {std::move(x), tensor<std::int32_t, cpu>(y)};
}

/// Options without output, at a constant rate without warmup whatever the policy's recipe (the
/// tests compare runs with formulas and with one another).
inline fit_options quiet(std::size_t epochs, std::size_t batch) {
  fit_options o;
  o.epochs = epochs;
  o.batch = batch;
  o.schedule = lr_schedule::constant;
  o.warmup_steps = 0;
  o.log_every = 0;
  o.bar = progress_bar::off;
  return o;
}

template <parameter_set P>
std::vector<float> flat(const P& p) {
  std::vector<float> out;
  p.for_each([&](auto v) {
    const auto h = v.to_vector();
    out.insert(out.end(), h.begin(), h.end());
  });
  return out;
}

/// The message of what f throws ("" when it does not throw).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// A user's model: softmax regression that throws from loss_and_grad on device Bad once it has
/// been called `after` times there (an injected fault). With others_wait (for hogwild, whose workers
/// run independently), the other devices' calls wait (up to 10 s each) while they are more than 4
/// calls per call of Bad ahead: otherwise a busy machine can keep Bad's thread off the cores until
/// the others have taken every step, and the fault never happens.
template <class Bad>
struct faulty_model : softmax_regression<float> {
  faulty_model(std::size_t in, std::size_t classes, int after, bool others_wait = false)
      : softmax_regression(in, classes), after_(after), others_wait_(others_wait),
        calls_(std::make_shared<std::atomic<int>>(0)) {}
  template <device D>
  auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) const {
    // The device at run time: a model's code is compiled for the cpu and for any_gpu (every GPU).
    if (device_id(id_of<D>) == id_of<Bad>) {
      if (calls_->fetch_add(1) >= after_) throw std::runtime_error("injected fault on " + id_of<D>.full_name());
    } else if (others_wait_) {
      const int mine = others_->fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (mine > 4 * (calls_->load() + 1) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
    return softmax_regression::loss_and_grad(p, x, y);
  }
  int after_;
  bool others_wait_;
  std::shared_ptr<std::atomic<int>> calls_;                                     // Bad's calls
  std::shared_ptr<std::atomic<int>> others_ = std::make_shared<std::atomic<int>>(0);  // the other devices'
};

/// Softmax regression whose loss (poison_loss) or gradient turns NaN at its `at`-th call (from 0),
/// on every device: an injected numerical fault.
struct poisoned_model : softmax_regression<float> {
  poisoned_model(std::size_t in, std::size_t classes, int at, bool poison_loss)
      : softmax_regression(in, classes), at_(at), loss_(poison_loss), calls_(std::make_shared<std::atomic<int>>(0)) {}
  template <device D>
  auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) const {
    auto s = softmax_regression::loss_and_grad(p, x, y);
    if (calls_->fetch_add(1) == at_) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      if (loss_) s.loss = s.loss * nan;
      else s.grad.w = s.grad.w * nan;
    }
    return s;
  }
  int at_;
  bool loss_;
  std::shared_ptr<std::atomic<int>> calls_;
};

}  // namespace locus_test
