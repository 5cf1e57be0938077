#pragma once
// The communicator concept: what the training policies need to exchange between replicas, on the
// devices of one process and across the processes of a job. A communicator *kind* is a tag type
// with a member template `group<Ds...>`, the communicator for the replicas on devices Ds... of
// this process:
//
//   dist::in_process   one process: sums on the first device, peer/memory copies (always there)
//   dist::mpi          across the ranks of an MPI job (host buffers; MPI_Allreduce, MPI_Bcast)
//   dist::nccl         GPUs: ncclAllReduce on each replica's stream, one NCCL communicator per
//                      device (ncclCommInitAll; across MPI ranks with the unique id sent by MPI)
//   dist::automatic    nccl when every replica is a real GPU of its own and NCCL is linked
//                      (locus::nccl), in_process otherwise
//
// A group G over Ds... provides, with `b` one flat buffer per replica (all the same size):
//   G::spans_processes        can size() exceed 1 (compile-time)
//   g.rank(), g.size()        this process in the job, and the job's processes (0 and 1 in process)
//   g.all_reduce_sum(b)       every buffer := the sum of all replicas' buffers over all ranks
//   g.broadcast(b)            every buffer := replica 0 of rank 0's buffer
//   g.sum_host(p, n)          n host floats summed over the ranks, in place (nothing in process)
//   g.broadcast_host(p, n)    n host floats := rank 0's
//   g.barrier()
//   g.first_failure(mine)     collective after a step some rank failed: the first failing rank's
//                             message (`mine` is this rank's, empty when it did not fail)
//   g.name()                  "in_process", "mpi", "nccl", for logs
// Errors are thrown as locus::error (config_error for a setup the communicator cannot serve).
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/tensor/tensor.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <tuple>

namespace locus::dist {

/// One flat buffer per replica, on its device: what a communicator reduces and broadcasts.
template <class... Ds>
using buffers = std::tuple<tensor_view<float, Ds, 1>...>;

/// G communicates between the replicas on devices Ds... (see the list at the top).
template <class G, class... Ds>
concept communicator = requires(G& g, const G& cg, const buffers<Ds...>& b, float* host, std::size_t n,
                                const std::string& mine) {
  { G::spans_processes } -> std::convertible_to<bool>;
  { cg.rank() } -> std::same_as<int>;
  { cg.size() } -> std::same_as<int>;
  g.all_reduce_sum(b);
  g.broadcast(b);
  g.sum_host(host, n);
  g.broadcast_host(host, n);
  g.barrier();
  { g.first_failure(mine) } -> std::same_as<std::string>;
  { cg.name() } -> std::convertible_to<std::string>;
};

/// K is a communicator kind: a tag with a member template group<Ds...>.
template <class K>
concept communicator_kind = requires { typename K::template group<cpu>; };

/// A communicator that also offers one-sided access to n floats kept by rank 0 (what hogwild's
/// workers read and add to across processes): g.open_window(home, n) (collective) returns a
/// pointer-like handle w with w->read(dst) and w->add(delta), each element atomic; closing it
/// (collective) completes every rank's additions. g.require_threads(what) throws unless worker
/// threads may call it; g.abort(message) ends the job.
template <class G>
concept one_sided = requires(G& g, float* p, const float* q, std::size_t n, const std::string& m) {
  g.open_window(p, n)->read(p);
  g.open_window(p, n)->add(q);
  g.require_threads("");
  g.abort(m);
};

}  // namespace locus::dist
