// A policy the trainer cannot copy is told so, not that it lacks a name, a communicator or run()
// (issue 26, item 17).
// expect: locus: data_parallel<Policy, ...>: Policy must be copyable
#include <locus/train/data_parallel.hpp>
#include <locus/train/softmax_regression.hpp>

#include <memory>

struct my_policy {
  using communicator = locus::dist::in_process;
  static constexpr const char* name = "mine";
#ifdef LOCUS_FIXED
  std::shared_ptr<int> state = std::make_shared<int>(0);
#else
  std::unique_ptr<int> state = std::make_unique<int>(0);
#endif
  template <class Set>
  void run(locus::train::fit_context<Set>& c) const {
    c.step_done(1, 0, 0.0);
  }
};

int main() {
  locus::train::softmax_regression<float> model(4, 3);
  locus::train::data_parallel<my_policy, locus::cpu> trainer{model, locus::train::sgd{}};
  return static_cast<int>(trainer.parameter_count()) - 15;
}
