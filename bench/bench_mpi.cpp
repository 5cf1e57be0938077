// The all-reduce of mpi<sync_average> for the 784-256-10 MLP's gradient (203530 floats, plus the
// loss and failure slots), against a bare MPI_Allreduce of the same buffer, in the same run.
//   mpirun -np 2 --oversubscribe bench_mpi [reps]
// Bus bandwidth as nccl-tests defines it for all-reduce: bytes / time * 2 (ranks - 1) / ranks.
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>
#include <locus/train/mpi.hpp>

#include "harness.hpp"

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace locus;
using namespace locus::train;

int main(int argc, char** argv) {
  mpi_session session(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  mlp<float> model({784, 256, 10}, 1);
  data_parallel<mpi<sync_average>, cpu> trainer{model, sgd{}};
  const std::size_t n = trainer.parameter_count() + 2;  // what travels: the gradient, the loss, the failure count
  std::vector<float> bare(n, 0.f);  // zeros, like the trainer's buffers: no overflow, no denormals
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  auto sync = [&] { MPI_Barrier(comm); };
  const double t_bare = locus_bench::time_per_call(
      [&] { MPI_Allreduce(MPI_IN_PLACE, bare.data(), int(n), MPI_FLOAT, MPI_SUM, comm); }, reps);
  sync();
  const double t_locus = locus_bench::time_per_call([&] { trainer.average_gradients(); }, reps);
  // The ranks' medians differ a little; rank 0's are printed, each an average over its calls.
  if (session.rank() == 0) {
    const double bytes = double(n) * sizeof(float), ranks = session.size();
    auto bus = [&](double t) { return bytes / t * 2.0 * (ranks - 1) / ranks / 1e9; };
    std::printf("all-reduce of %zu floats (%.2f MB) over %d ranks, median of %d\n", n, bytes / 1e6, session.size(),
                reps);
    locus_bench::header("mpi<sync_average>'s averaging against a bare MPI_Allreduce",
                        {"path", "us per step", "bus GB/s", "locus / bare time", "target"});
    std::printf("| bare MPI_Allreduce (in place) | %.1f | %.2f | 1.00 | |\n", t_bare * 1e6, bus(t_bare));
    std::printf("| locus average_gradients (allreduce + scale + loss slot) | %.1f | %.2f | %.2f | <= 1.1 |\n",
                t_locus * 1e6, bus(t_locus), t_locus / t_bare);
  }
  MPI_Comm_free(&comm);
  return 0;
}
