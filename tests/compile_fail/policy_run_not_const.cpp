// A policy whose run() is not const is told so, not that it has no run() (issue 26, item 17).
// expect: locus: data_parallel: Policy::run(fit_context&) must be a const member function
#include <locus/train/data_parallel.hpp>
#include <locus/train/softmax_regression.hpp>

struct my_policy {
  using communicator = locus::dist::in_process;
  static constexpr const char* name = "mine";
  template <class Set>
#ifdef LOCUS_FIXED
  void run(locus::train::fit_context<Set>& c) const {
#else
  void run(locus::train::fit_context<Set>& c) {
#endif
    c.step_done(1, 0, 0.0);
  }
};

int main() {
  locus::train::softmax_regression<float> model(4, 3);
  locus::train::data_parallel<my_policy, locus::cpu> trainer{model, locus::train::sgd{}};
  locus::data::labelled_images data{locus::tensor<float, locus::cpu, 2>(locus::shape{4, 4}, 0.f),
                                    locus::tensor<std::int32_t, locus::cpu>(locus::shape{4}, 0)};
  (void)trainer.fit(data, {});
  return static_cast<int>(trainer.parameter_count()) - 15;
}
