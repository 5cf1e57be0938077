// mpi<hogwild>: a worker on rank 1 fails while rank 0's keep training. Nobody waits for rank 1 at a
// collective, so the job must end with rank 1's message instead of hanging. CTest checks the
// message (and its TIMEOUT the absence of a hang).
#include "../common/train_support.hpp"

#include <locus/train/mpi.hpp>

#include <climits>
#include <cstdio>

using namespace locus;
using namespace locus::train;
using namespace locus_test;

int main(int argc, char** argv) {
  mpi_session session(argc, argv);
  faulty_model<cpu> model(16, 4, session.rank() == 1 ? 5 : INT_MAX);
  auto data = synthetic(4096, 8);
  data_parallel<mpi<hogwild>, cpu> trainer{model, sgd{0.1f, 0.9f}};
  trainer.fit(data, quiet(100, 32));
  std::printf("rank %d: fit returned: the fault was not seen\n", session.rank());
  return 0;
}
