// mpi<hogwild>: a worker on rank 1 fails while rank 0's keep training. Nobody waits for rank 1 at a
// collective, so the job must end with rank 1's message instead of hanging. CTest checks the
// message (and its TIMEOUT the absence of a hang). With the argument `int`, the worker throws an
// int, not a std::exception (issue 26, item 10: before, that left its rank's fit, the job running).
#include "../common/train_support.hpp"

#include <locus/train/mpi.hpp>

#include <climits>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

using namespace locus;
using namespace locus::train;
using namespace locus_test;

/// Throws an int from its sixth call on rank 1.
struct throws_int : softmax_regression<float> {
  explicit throws_int(int after) : softmax_regression(16, 4), after_(after) {}
  template <device D>
  auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) const {
    if (calls_->fetch_add(1) >= after_) throw 42;
    return softmax_regression::loss_and_grad(p, x, y);
  }
  int after_;
  std::shared_ptr<std::atomic<int>> calls_ = std::make_shared<std::atomic<int>>(0);
};

int main(int argc, char** argv) {
  mpi_session session(argc, argv);
  const bool int_fault = argc > 1 && std::string(argv[1]) == "int";
  auto data = synthetic(4096, 8);
  if (int_fault) {
    data_parallel<mpi<hogwild>, cpu> trainer{throws_int(session.rank() == 1 ? 5 : INT_MAX), sgd{0.1f, 0.9f}};
    trainer.fit(data, quiet(100, 32));
    std::printf("rank %d: fit returned: the fault was not seen\n", session.rank());
    return 0;
  }
  faulty_model<cpu> model(16, 4, session.rank() == 1 ? 5 : INT_MAX);
  data_parallel<mpi<hogwild>, cpu> trainer{model, sgd{0.1f, 0.9f}};
  trainer.fit(data, quiet(100, 32));
  std::printf("rank %d: fit returned: the fault was not seen\n", session.rank());
  return 0;
}
