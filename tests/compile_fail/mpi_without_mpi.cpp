// mpi<P> in a build without MPI (no <mpi.h> on the include path).
// expect: locus: data_parallel<mpi<...>, ...> needs MPI: this build has no <mpi.h> (install libopenmpi-dev, find_package(MPI) and link MPI::MPI_CXX)
// variant: host
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>
int main() {
  locus::train::mlp<float> model({4, 3}, 1);
#ifdef LOCUS_FIXED
  locus::train::data_parallel<locus::train::sync_average, locus::cpu> trainer{model, {}};
#else
  locus::train::data_parallel<locus::train::mpi<locus::train::sync_average>, locus::cpu> trainer{model, {}};
#endif
  return static_cast<int>(trainer.parameter_count()) - 15;
}
