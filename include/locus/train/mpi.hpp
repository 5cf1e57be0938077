#pragma once
// The same training policies across the processes of an MPI job:
//
//   locus::train::mpi_session mpi(argc, argv);                       // MPI_Init_thread / MPI_Finalize
//   data_parallel<mpi<sync_average>, gpu<0>, gpu<1>> trainer{model, sgd{}};   // devices of this rank
//
// mpi<sync_average>: every replica of every rank computes the gradient of its shard of the global
// batch; the replicas of a rank are summed on its first device, then one MPI_Allreduce per step
// (in place, one flat buffer: the gradient, the loss and a failure count) sums the ranks, and every
// replica applies the mean. The parameters of every rank stay equal, and equal to one process
// training with the same global batch.
// mpi<hogwild>: the parameters live in an MPI window on rank 0 (passive target, lock_all); each
// worker reads them with MPI_Get_accumulate(MPI_NO_OP) (the element-wise atomic read of MPI-3:
// a plain MPI_Get racing an accumulate is undefined) and adds its update with MPI_Accumulate
// (MPI_SUM); no barrier between workers until the end of fit.
//
// MPI is optional: without <mpi.h> on the include path (find_package(MPI), MPI::MPI_CXX) this
// header only declares mpi<P>, and data_parallel<mpi<P>, ...> does not compile.
#include <locus/config.hpp>
#include <locus/errors.hpp>

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
#include <mutex>
#include <string>
#include <vector>

namespace locus::train {

/// Runs Policy (sync_average or hogwild) across the ranks of MPI_COMM_WORLD.
template <class Policy>
struct mpi {
  using policy = Policy;
};

namespace detail {
/// The communicator of a single process: one rank, nothing to exchange.
struct in_process_comm {
  static constexpr bool distributed = false;
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
};
}  // namespace detail

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
          "locus: data_parallel<mpi<...>>: MPI is not initialised; create a locus::train::mpi_session first");
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
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
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
  }
  void broadcast(float* data, std::size_t n, int root) {
    std::lock_guard lock(mutex_);
    mpi_check(MPI_Bcast(data, int(n), MPI_FLOAT, root, comm_), "MPI_Bcast");
  }
  void barrier() {
    std::lock_guard lock(mutex_);
    mpi_check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  /// After a step in which some rank failed: the first failing rank's message, on every rank.
  /// Collective. `mine` is this rank's message, empty when it did not fail.
  std::string first_failure(const std::string& mine) {
    std::lock_guard lock(mutex_);
    int candidate = mine.empty() ? size_ : rank_, first = size_;
    mpi_check(MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    if (first == size_) return {};
    int length = rank_ == first ? int(mine.size()) : 0;
    mpi_check(MPI_Bcast(&length, 1, MPI_INT, first, comm_), "MPI_Bcast");
    std::string text = rank_ == first ? mine : std::string(std::size_t(length), ' ');
    mpi_check(MPI_Bcast(text.data(), length, MPI_CHAR, first, comm_), "MPI_Bcast");
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
      mpi_check(MPI_Win_create(root ? home : nullptr, MPI_Aint(root ? n * sizeof(float) : 0), int(sizeof(float)),
                               MPI_INFO_NULL, c_.comm_, &win_),
                "MPI_Win_create");
      MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN);
      mpi_check(MPI_Win_lock_all(0, win_), "MPI_Win_lock_all");
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
      mpi_check(MPI_Get_accumulate(nullptr, 0, MPI_FLOAT, dst, int(n_), MPI_FLOAT, 0, 0, int(n_), MPI_FLOAT, MPI_NO_OP,
                                   win_),
                "MPI_Get_accumulate");
      mpi_check(MPI_Win_flush(0, win_), "MPI_Win_flush");
    }
    /// parameters += delta, element-wise atomically.
    void add(const float* delta) {
      std::lock_guard lock(c_.mutex_);
      mpi_check(MPI_Accumulate(delta, int(n_), MPI_FLOAT, 0, 0, int(n_), MPI_FLOAT, MPI_SUM, win_), "MPI_Accumulate");
      mpi_check(MPI_Win_flush(0, win_), "MPI_Win_flush");
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

}  // namespace detail
#endif  // LOCUS_HAS_MPI

namespace detail {
template <class P>
struct policy_traits {
  using policy = P;
  using comm = in_process_comm;
};
template <class P>
struct policy_traits<mpi<P>> {
  using policy = P;
#if LOCUS_HAS_MPI
  using comm = mpi_comm;
#else
  using comm = in_process_comm;  // never used: data_parallel refuses to compile first
#endif
};
}  // namespace detail

}  // namespace locus::train
