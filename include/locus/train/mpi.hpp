#pragma once
// The training policies across the processes of an MPI job:
//
//   locus::train::mpi_session mpi(argc, argv);                                 // MPI_Init_thread / MPI_Finalize
//   data_parallel<mpi<sync_average>, gpu<0>, gpu<1>> trainer{model, sgd{}};   // devices of this rank
//
// mpi<P> is policy P over the communicator dist::mpi (locus/dist/mpi.hpp); nccl<P> over dist::nccl.
#include <locus/config.hpp>
#include <locus/dist/mpi.hpp>
#include <locus/dist/nccl.hpp>
#include <locus/train/policy.hpp>

namespace locus::train {

#if LOCUS_HAS_MPI
using dist::mpi_session;
#endif

/// Policy P across the ranks of MPI_COMM_WORLD (host buffers, MPI_Allreduce; hogwild: an MPI window).
template <policy P>
using mpi = typename P::template over<dist::mpi>;
/// Policy P over NCCL: GPUs only, one NCCL communicator per device (across ranks under mpirun).
template <policy P>
using nccl = typename P::template over<dist::nccl>;

}  // namespace locus::train
