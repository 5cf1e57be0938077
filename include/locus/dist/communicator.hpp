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
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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

/// One replica's flat buffer, its device known at run time: what the trainer's code below the
/// typed surface hands its communicator (any_group).
struct buffer_ref {
  device_id device;
  float* data = nullptr;
  std::size_t size = 0;
};
using buffer_list = std::vector<buffer_ref>;

/// A communicator's one-sided window, its type erased (any_group::open_window).
class any_window {
public:
  virtual ~any_window() = default;
  virtual void read(float* dst) = 0;
  virtual void add(const float* delta) = 0;
};

/// A communicator group as the trainer's code sees it below the typed surface: the same members
/// (see the list at the top) over buffers whose devices are known at run time, so that the
/// policies and the replica set are compiled once per kind of device, not once per device list.
/// Spans and OneSided are the group's G::spans_processes and one_sided<G>; group_adapter<G, Ds...>
/// implements it over a typed group G of the devices Ds... (the buffers are handed to G as
/// buffers<Ds...>, in order).
template <bool Spans, bool OneSided>
class any_group {
public:
  static constexpr bool spans_processes = Spans;
  static constexpr bool has_window = OneSided;
  any_group() = default;
  any_group(const any_group&) = delete;
  any_group& operator=(const any_group&) = delete;
  virtual ~any_group() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual std::string name() const = 0;
  virtual void all_reduce_sum(const buffer_list& b) = 0;
  virtual void broadcast(const buffer_list& b) = 0;
  virtual void sum_host(float* p, std::size_t n) = 0;
  virtual void broadcast_host(float* p, std::size_t n) = 0;
  virtual void barrier() = 0;
  virtual std::string first_failure(const std::string& mine) = 0;
  /// One-sided groups only (OneSided; dist::mpi): see the concept one_sided.
  virtual std::unique_ptr<any_window> open_window(float* home, std::size_t n) = 0;
  virtual void require_threads(const char* what) = 0;
  [[noreturn]] virtual void abort(const std::string& message) = 0;
};

namespace detail {
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_buffer_count(std::size_t given, std::size_t devices);
[[noreturn]] LOCUS_RUNTIME_INLINE void throw_not_one_sided(const std::string& name);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void throw_buffer_count(std::size_t given, std::size_t devices) {
  throw config_error("locus: communicator: " + std::to_string(given) + " buffers for a group of " +
                     std::to_string(devices) + " devices (one per replica, in the group's order)");
}
LOCUS_RUNTIME_INLINE void throw_not_one_sided(const std::string& name) {
  throw config_error("locus: communicator " + name + " has no one-sided window (dist::mpi has)");
}
#endif
}  // namespace detail

/// any_group over the typed group G of the devices Ds... (default-constructed here).
template <class G, class... Ds>
  requires communicator<G, Ds...>
class group_adapter final : public any_group<G::spans_processes, one_sided<G>> {
public:
  /// The typed group itself (its own members: nccl's uses_nccl(), mpi's comm()).
  [[nodiscard]] G& typed() noexcept { return g_; }

  [[nodiscard]] int rank() const override { return g_.rank(); }
  [[nodiscard]] int size() const override { return g_.size(); }
  [[nodiscard]] std::string name() const override { return g_.name(); }
  void all_reduce_sum(const buffer_list& b) override { g_.all_reduce_sum(typed(b)); }
  void broadcast(const buffer_list& b) override { g_.broadcast(typed(b)); }
  void sum_host(float* p, std::size_t n) override { g_.sum_host(p, n); }
  void broadcast_host(float* p, std::size_t n) override { g_.broadcast_host(p, n); }
  void barrier() override { g_.barrier(); }
  std::string first_failure(const std::string& mine) override { return g_.first_failure(mine); }
  std::unique_ptr<any_window> open_window(float* home, std::size_t n) override {
    if constexpr (one_sided<G>) {
      using handle = decltype(g_.open_window(home, n));
      struct window final : any_window {
        explicit window(handle h) : h_(std::move(h)) {}
        void read(float* dst) override { h_->read(dst); }
        void add(const float* delta) override { h_->add(delta); }
        handle h_;
      };
      return std::make_unique<window>(g_.open_window(home, n));
    } else {
      detail::throw_not_one_sided(g_.name());
    }
  }
  void require_threads(const char* what) override {
    if constexpr (one_sided<G>) g_.require_threads(what);
    else detail::throw_not_one_sided(g_.name());
  }
  [[noreturn]] void abort(const std::string& message) override {
    if constexpr (one_sided<G>) g_.abort(message);
    detail::throw_not_one_sided(g_.name() + " (abort: " + message + ")");
  }

private:
  static buffers<Ds...> typed(const buffer_list& b) {
    if (b.size() != sizeof...(Ds)) detail::throw_buffer_count(b.size(), sizeof...(Ds));
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return buffers<Ds...>{tensor_view<float, Ds, 1>(b[I].data, shape{b[I].size})...};
    }(std::index_sequence_for<Ds...>{});
  }

  G g_;
};

}  // namespace locus::dist
