// A model whose params::for_each hands its callable the tensors themselves (f(w)) instead of
// views of them (f(w.view())): the concept cannot see inside for_each's body, so data_parallel's
// construction instantiates it and says, in one line, what to pass.
// expect: locus: params<D>::for_each must pass tensor views: f(W1.view()), not f(W1)
#include <locus/train/data_parallel.hpp>
#include <locus/train/softmax_regression.hpp>

#include <cstdint>

struct tensors_not_views {
  using value_type = float;
  template <locus::device D>
  struct params {
    locus::tensor<float, D, 2> w;
    locus::tensor<float, D, 1> b;
    template <class F>
    void for_each(F&& f) {
#ifdef LOCUS_FIXED
      f(w.view());
      f(b.view());
#else
      f(w);  // the mistake
      f(b);
#endif
    }
    template <class F>
    void for_each(F&& f) const {
#ifdef LOCUS_FIXED
      f(w.view());
      f(b.view());
#else
      f(w);
      f(b);
#endif
    }
  };
  template <locus::device D>
  struct step {
    locus::tensor<float, D, 0> loss;
    params<D> grad;
  };
  locus::train::softmax_regression<float> inner{4, 3};

  template <locus::device D>
  [[nodiscard]] params<D> init() const {
    auto p = inner.init<D>();
    return {std::move(p.w), std::move(p.b)};
  }
  template <locus::device D>
  [[nodiscard]] step<D> loss_and_grad(const params<D>& p, const locus::tensor<float, D, 2>& x,
                                      const locus::tensor<std::int32_t, D>& y) const {
    typename locus::train::softmax_regression<float>::template params<D> q{p.w.clone(), p.b.clone()};
    auto s = inner.loss_and_grad(q, x, y);
    return {std::move(s.loss), {std::move(s.grad.w), std::move(s.grad.b)}};
  }
  template <locus::device D>
  [[nodiscard]] locus::tensor<std::int64_t, D> predict(const params<D>& p, const locus::tensor<float, D, 2>& x) const {
    typename locus::train::softmax_regression<float>::template params<D> q{p.w.clone(), p.b.clone()};
    return inner.predict(q, x);
  }
};

int main() {
  tensors_not_views model;
  locus::train::data_parallel<locus::train::sync_average, locus::cpu, locus::gpu<0>> trainer{model, {}};
  return static_cast<int>(trainer.parameter_count()) - 15;
}
