#pragma once
// dist::mpi: the replicas of every rank of an MPI job. The replicas of a rank are summed on its
// first device (dist::in_process), then one MPI_Allreduce per call sums the ranks (in place, one
// flat host buffer), and the sum is copied back to every replica. Also the one-sided window that
// hogwild's workers share across ranks (parameters on rank 0, MPI_Get_accumulate / MPI_Accumulate).
//
//   locus::dist::mpi_session mpi(argc, argv);   // MPI_Init_thread / MPI_Finalize
//
// MPI is optional: without <mpi.h> on the include path (find_package(MPI), MPI::MPI_CXX) this
// header only declares dist::mpi, and using its group does not compile.
#include <locus/config.hpp>
#include <locus/dist/communicator.hpp>
#include <locus/dist/in_process.hpp>
#include <locus/backend/parallel.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>

#ifndef LOCUS_HAS_MPI
#  if __has_include(<mpi.h>)
#    define LOCUS_HAS_MPI 1
#  else
#    define LOCUS_HAS_MPI 0
#  endif
#endif

#if LOCUS_HAS_MPI
#  include <mpi.h>
#endif

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace locus::dist {

struct mpi {
  template <class... Ds>
  class group;
};

#if LOCUS_HAS_MPI

/// MPI_Init_thread (asking for MPI_THREAD_MULTIPLE) unless MPI is already initialised, and
/// MPI_Finalize at the end when it initialised it.
class mpi_session {
public:
  mpi_session(int& argc, char**& argv) {
    int done = 0;
    MPI_Initialized(&done);
    if (done == 0) {
      MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided_);
      owner_ = true;
    } else {
      MPI_Query_thread(&provided_);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  ~mpi_session() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owner_ && finalized == 0) MPI_Finalize();
  }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The thread support MPI provides (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE).
  [[nodiscard]] int thread_level() const noexcept { return provided_; }

private:
  bool owner_ = false;
  int provided_ = MPI_THREAD_SINGLE, rank_ = 0, size_ = 1;
};

namespace detail {
inline void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw error(std::string("locus: ") + call + " failed: " + std::string(text, std::size_t(len)));
}

}  // namespace detail

/// locus's own duplicate of MPI_COMM_WORLD (its messages never meet the program's), errors
/// returned and thrown as locus::error. Calls from several threads of a rank are serialised.
class mpi_comm {
public:
  static constexpr bool distributed = true;

  mpi_comm() {
    int done = 0;
    MPI_Initialized(&done);
    if (done == 0)
      throw config_error(
          "locus: dist::mpi: MPI is not initialised; create a locus::dist::mpi_session first");
    detail::mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Query_thread(&thread_level_);
  }
  mpi_comm(const mpi_comm&) = delete;
  mpi_comm& operator=(const mpi_comm&) = delete;
  ~mpi_comm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] MPI_Comm handle() const noexcept { return comm_; }

  /// Throws unless MPI lets threads other than the main one call it (one at a time).
  void require_threads(const char* what) const {
    if (thread_level_ < MPI_THREAD_SERIALIZED)
      throw config_error(std::string("locus: ") + what +
                         " calls MPI from worker threads: initialise MPI with MPI_THREAD_SERIALIZED or more "
                         "(locus::train::mpi_session asks for MPI_THREAD_MULTIPLE)");
  }

  /// In-place sum of a host buffer over the ranks.
  void sum(float* data, std::size_t n) {
    std::lock_guard lock(mutex_);
    detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
  }
  void broadcast(float* data, std::size_t n, int root) {
    std::lock_guard lock(mutex_);
    detail::mpi_check(MPI_Bcast(data, int(n), MPI_FLOAT, root, comm_), "MPI_Bcast");
  }
  void barrier() {
    std::lock_guard lock(mutex_);
    detail::mpi_check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  /// After a step in which some rank failed: the first failing rank's message, on every rank.
  /// Collective. `mine` is this rank's message, empty when it did not fail.
  std::string first_failure(const std::string& mine) {
    std::lock_guard lock(mutex_);
    int candidate = mine.empty() ? size_ : rank_, first = size_;
    detail::mpi_check(MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    if (first == size_) return {};
    int length = rank_ == first ? int(mine.size()) : 0;
    detail::mpi_check(MPI_Bcast(&length, 1, MPI_INT, first, comm_), "MPI_Bcast");
    std::string text = rank_ == first ? mine : std::string(std::size_t(length), ' ');
    detail::mpi_check(MPI_Bcast(text.data(), length, MPI_CHAR, first, comm_), "MPI_Bcast");
    return "locus: rank " + std::to_string(first) + " of " + std::to_string(size_) + " failed: " + text;
  }

  /// Ends the job: a rank that fails while others cannot be told (hogwild) must not leave them
  /// waiting on it.
  [[noreturn]] void abort(const std::string& message) {
    std::fprintf(stderr, "locus: rank %d of %d: %s; aborting the MPI job\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(comm_, 1);
    std::abort();
  }

  /// The parameter server of mpi<hogwild>: n floats on rank 0, every rank reading and adding.
  class window {
  public:
    /// Collective. `home` (n floats) is exposed on rank 0; the other ranks pass their copy, unused.
    window(mpi_comm& c, float* home, std::size_t n) : c_(c), n_(n) {
      std::lock_guard lock(c_.mutex_);
      const bool root = c_.rank_ == 0;
      detail::mpi_check(MPI_Win_create(root ? home : nullptr, MPI_Aint(root ? n * sizeof(float) : 0), int(sizeof(float)),
                               MPI_INFO_NULL, c_.comm_, &win_),
                "MPI_Win_create");
      MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN);
      detail::mpi_check(MPI_Win_lock_all(0, win_), "MPI_Win_lock_all");
    }
    window(const window&) = delete;
    window& operator=(const window&) = delete;
    /// Collective: every rank's updates are complete on rank 0 when it returns.
    ~window() {
      std::lock_guard lock(c_.mutex_);
      MPI_Win_unlock_all(win_);
      MPI_Barrier(c_.comm_);
      MPI_Win_free(&win_);
    }
    /// dst = the parameters (each element read atomically; together, possibly mid-update).
    void read(float* dst) {
      std::lock_guard lock(c_.mutex_);
      detail::mpi_check(MPI_Get_accumulate(nullptr, 0, MPI_FLOAT, dst, int(n_), MPI_FLOAT, 0, 0, int(n_), MPI_FLOAT, MPI_NO_OP,
                                   win_),
                "MPI_Get_accumulate");
      detail::mpi_check(MPI_Win_flush(0, win_), "MPI_Win_flush");
    }
    /// parameters += delta, element-wise atomically.
    void add(const float* delta) {
      std::lock_guard lock(c_.mutex_);
      detail::mpi_check(MPI_Accumulate(delta, int(n_), MPI_FLOAT, 0, 0, int(n_), MPI_FLOAT, MPI_SUM, win_), "MPI_Accumulate");
      detail::mpi_check(MPI_Win_flush(0, win_), "MPI_Win_flush");
    }

  private:
    mpi_comm& c_;
    std::size_t n_;
    MPI_Win win_ = MPI_WIN_NULL;
  };

private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, thread_level_ = MPI_THREAD_SINGLE;
  std::mutex mutex_;
};



/// The group of dist::mpi over this rank's devices Ds...
template <class... Ds>
class mpi::group {
  using first_device = std::tuple_element_t<0, std::tuple<Ds...>>;

public:
  static constexpr bool spans_processes = true;

  [[nodiscard]] int rank() const noexcept { return comm_.rank(); }
  [[nodiscard]] int size() const noexcept { return comm_.size(); }
  [[nodiscard]] std::string name() const { return "mpi"; }
  [[nodiscard]] mpi_comm& comm() noexcept { return comm_; }

  void all_reduce_sum(const buffers<Ds...>& b) {
    local_.reduce_to_first(b);
    const auto& sum = std::get<0>(b);
    if constexpr (backend::runs_on_host<first_device>) {
      comm_.sum(sum.data(), sum.size());
    } else {
      auto host = sum.to_vector();
      comm_.sum(host.data(), host.size());
      locus::transfer(sum, tensor_view<const float, cpu, 1>(host.data(), shape{host.size()}));
    }
    local_.copy_first_to_rest(b);
  }
  void broadcast(const buffers<Ds...>& b) {
    const auto& first = std::get<0>(b);
    auto host = first.to_vector();
    comm_.broadcast(host.data(), host.size(), 0);
    locus::transfer(first, tensor_view<const float, cpu, 1>(host.data(), shape{host.size()}));
    local_.copy_first_to_rest(b);
  }
  void sum_host(float* p, std::size_t n) { comm_.sum(p, n); }
  void broadcast_host(float* p, std::size_t n) { comm_.broadcast(p, n, 0); }
  void barrier() { comm_.barrier(); }
  std::string first_failure(const std::string& mine) { return comm_.first_failure(mine); }
  void require_threads(const char* what) const { comm_.require_threads(what); }
  /// Collective: n floats of rank 0's `home` that every rank reads and adds to (see mpi_comm::window).
  [[nodiscard]] std::unique_ptr<mpi_comm::window> open_window(float* home, std::size_t n) {
    return std::make_unique<mpi_comm::window>(comm_, home, n);
  }
  [[noreturn]] void abort(const std::string& message) { comm_.abort(message); }

private:
  mpi_comm comm_;  // first: duplicated before anything uses it
  in_process::group<Ds...> local_;
};
#else
/// Without MPI: naming the group is an error at compile time.
template <class... Ds>
class mpi::group {
  static_assert(sizeof...(Ds) == 0,
                "locus: dist::mpi needs MPI: this build has no <mpi.h> (install libopenmpi-dev, find_package(MPI) and "
                "link MPI::MPI_CXX)");
};
#endif  // LOCUS_HAS_MPI

}  // namespace locus::dist
