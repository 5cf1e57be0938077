#pragma once
// Data-parallel training of one model on several devices, TensorFlow's classic multi-GPU modes:
//
//   data_parallel<sync_average, gpu<0>, gpu<1>>   every step, each replica computes the gradient
//       of its shard of the batch into one flat buffer, the buffers are averaged (summed on the
//       first device, the mean copied back), and every replica applies the same update. With K
//       devices and global batch B the parameters follow those of one device with batch B.
//   data_parallel<hogwild, gpu<0>, gpu<1>, gpu<2>> the parameters and the momentum live in a home
//       copy in host memory; one worker per device, on its own host thread, reads them (stale
//       values allowed), computes the gradient of its own batches and applies it with relaxed
//       std::atomic_ref operations: no lock, no barrier between workers, no data race.
//
// Any model meeting train::model_on<M, D> (model.hpp) for every device of the list is trained;
// the device list is compile-time: a repeated device or a non-device type does not compile, and
// each replica's tensors are typed on their device. Communication between devices goes through
// locus's own transfers (peer copies on GPUs, memory copies for host and emulated devices).
#include <locus/config.hpp>
#include <locus/data/idx.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/locus.hpp>
#include <locus/train/checkpoint.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/model.hpp>
#include <locus/train/mpi.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/softmax_regression.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#if __has_include(<unistd.h>)
#  include <unistd.h>
#endif

namespace locus::train {

/// Synchronous data parallelism: shard, average the gradients, one identical update everywhere.
struct sync_average {
  static constexpr const char* name = "sync_average";
};
/// Asynchronous lock-free updates of shared parameters (Hogwild!).
struct hogwild {
  static constexpr const char* name = "hogwild";
};

struct progress {
  std::size_t step = 0;           ///< global step (batches applied)
  std::size_t epoch = 0;
  double loss = 0;                ///< the loss of the batch just applied
  double examples_per_sec = 0;    ///< since the previous line
  double sec_per_batch = 0;
  double wall_seconds = 0;        ///< since fit() started
};

/// The one-line progress bar on standard error: always, never, or when standard error is a terminal.
enum class progress_bar { off, on, automatic };

/// What fit does with a step whose loss or gradient is not finite (NaN or infinite).
enum class non_finite {
  throw_error,  ///< throw non_finite_error; the step is not applied
  skip_step,    ///< drop the step (no update) and go on; counted in fit_result::skipped
  stop,         ///< stop fit without applying it (the last checkpoint on disk stays the last good one)
};

/// A non-finite loss or gradient under non_finite::throw_error.
class non_finite_error : public error {
public:
  using error::error;
};

/// The learning rate over a run (see fit_options::schedule).
enum class lr_schedule { constant, cosine };

/// How hogwild's workers write the shared parameters (see fit_options::writes). Both are relaxed
/// std::atomic_ref operations, so neither is a data race in the C++ memory model.
enum class hogwild_writes {
  atomic_add,  ///< one atomic read-modify-write per element (a compare-exchange loop for float): no update is lost
  load_store,  ///< an atomic load, then an atomic store of the sum: no locked instruction, but an update
               ///< that interleaves with another worker's on the same element can be lost (as in
               ///< Hogwild!'s unsynchronised writes)
};

struct fit_options {
  std::size_t epochs = 1;
  std::size_t batch = 256;        ///< the global batch (split over the devices by sync_average)
  std::uint64_t seed = 0;         ///< data order
  std::size_t max_steps = 0;      ///< stop after this many steps (0: all epochs)
  std::size_t warmup_steps = 0;   ///< the learning rate ramps up linearly over these first steps
  /// After the warmup: `constant`, or `cosine` from the optimiser's rate down to 0 at the last
  /// step of the run (it takes the noise out of the last iterates; hogwild's stale steps need it most).
  lr_schedule schedule = lr_schedule::constant;
  /// hogwild: each worker's gradient enters its momentum scaled by 1 / (1 + tau), tau being the
  /// updates the other workers applied between its read of the parameters and its own update
  /// (staleness-aware asynchronous SGD, Zhang, Gupta, Lian and Liu, IJCAI 2016). One worker: tau = 0.
  /// Under mpi<hogwild> tau counts this rank's workers only (the other ranks' updates are not seen).
  bool scale_by_staleness = false;
  /// hogwild with momentum: each worker computes its gradient at a look-ahead of the parameters,
  /// theta - lr * momentum * V, where V is the sum of all workers' momenta, kept beside the home
  /// copy with the same lock-free updates (DANA-Zero: Hakimi, Barkai, Gabel and Schuster, "Taming
  /// momentum in a distributed asynchronous environment", 2019). It estimates where the others'
  /// momenta will have taken the parameters by the time this gradient lands. One worker: the
  /// gradient is taken at theta - lr * momentum * v (Nesterov's point). In-process hogwild only
  /// (config_error under mpi<hogwild>, with sync_average, or without momentum).
  bool lookahead = false;
  /// hogwild: how the workers' updates reach the shared parameters (and the momenta's sum). On the
  /// 2-core test machine load_store made one epoch of the MLP 1.4x faster with 2 workers (0.23 s
  /// against 0.33 s) at the same accuracy. In-process hogwild only (config_error under mpi<hogwild>,
  /// whose MPI_Accumulate is atomic per element).
  hogwild_writes writes = hogwild_writes::atomic_add;
  std::size_t log_every = 100;    ///< a TF-style line every this many steps (0: none)
  progress_bar bar = progress_bar::automatic;
  non_finite on_non_finite = non_finite::throw_error;
  /// Checkpoints (sync_average): when `checkpoint_path` names an existing checkpoint, fit resumes
  /// from it (its parameters, momentum and step count; the seed must match) and skips the steps
  /// done; a checkpoint is written every `checkpoint_every` steps (0: only at the end of fit).
  std::string checkpoint_path;
  std::size_t checkpoint_every = 0;
  /// Called after every step applied (or skipped), with its progress entry.
  std::function<void(const progress&)> on_step;
  /// Where the progress lines go (stdout by default; nullptr: nowhere).
  std::function<void(const std::string&)> print = [](const std::string& line) {
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  };
};

struct fit_result {
  std::vector<progress> curve;    ///< one entry per step run by this fit (not the resumed ones)
  double seconds = 0;
  std::size_t examples = 0;
  std::size_t resumed_from = 0;   ///< the steps a checkpoint had done already
  std::size_t skipped = 0;        ///< steps dropped under non_finite::skip_step
  bool stopped = false;           ///< stopped by non_finite::stop
  [[nodiscard]] double examples_per_sec() const { return seconds > 0 ? double(examples) / seconds : 0; }
};

namespace detail {
template <class... Ds>
struct all_distinct : std::true_type {};
template <class D, class... Ds>
struct all_distinct<D, Ds...> : std::bool_constant<(!std::is_same_v<D, Ds> && ...) && all_distinct<Ds...>::value> {};

template <class D0, class... Ds>
struct first {
  using type = D0;
};

/// The rows `order[first .. first+count)` of a data set, on device D. Gathered into tensors from
/// the caching arena (no allocation per step): written in place on host-run devices, copied to GPUs.
template <device D>
std::pair<tensor<float, D, 2>, tensor<std::int32_t, D>> gather(const data::labelled_images& data,
                                                                const std::vector<std::uint32_t>& order,
                                                                std::size_t first, std::size_t count) {
  const std::size_t cols = data.images.extent(1);
  // Devices whose memory the host reads and writes (the cpu, emulated GPUs) get the rows directly.
  using H = std::conditional_t<backend::runs_on_host<D>, D, cpu>;
  auto x = tensor<float, H, 2>::uninitialized_of(shape{count, cols});
  auto y = tensor<std::int32_t, H>::uninitialized_of(shape{count});
  const float* src = data.images.data();
  float* dst = x.data();
  std::int32_t* labels = y.data();
  // Rows at random places in a large array: the copy waits on memory, so the host's threads copy
  // rows side by side, each asking for a later row's first lines ahead of time.
  constexpr std::size_t ahead = 4;
#if defined(_OPENMP)
#  pragma omp parallel for schedule(static) if (count * cols >= backend::serial_threshold)
#endif
  for (std::size_t r = 0; r < count; ++r) {
    if (r + ahead < count) {
      const float* next = src + std::size_t(order[first + r + ahead]) * cols;
#if defined(__GNUC__) || defined(__clang__)
      for (std::size_t line = 0; line < 4; ++line) __builtin_prefetch(next + line * 16);
#else
      (void)next;
#endif
    }
    const std::size_t row = order[first + r];
    std::copy(src + row * cols, src + (row + 1) * cols, dst + r * cols);
    labels[r] = data.labels(row);
  }
  if constexpr (std::is_same_v<H, D>) return {std::move(x), std::move(y)};
  else return {locus::to<D>(x), locus::to<D>(y)};
}

/// x += v on memory other threads touch: a relaxed atomic read-modify-write, or (rmw false) a
/// relaxed atomic load and store, which can lose a concurrent update but locks nothing.
inline void add_to(float& x, float v, bool rmw) noexcept {
  std::atomic_ref<float> a(x);
  if (rmw) a.fetch_add(v, std::memory_order_relaxed);
  else a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

inline std::vector<std::uint32_t> shuffled(std::size_t n, std::uint64_t seed, std::size_t epoch) {
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 gen(seed * 7919 + epoch);
  std::shuffle(order.begin(), order.end(), gen);
  return order;
}

inline std::string progress_line(const progress& p, std::size_t devices) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %zu, loss = %.4f (%.0f examples/sec; %.4f sec/batch; %zu device%s)", p.step,
                p.loss, p.examples_per_sec, p.sec_per_batch, devices, devices == 1 ? "" : "s");
  return buf;
}

/// Records the loss curve, prints the TF-style lines and draws the progress bar.
class reporter {
public:
  using clock = std::chrono::steady_clock;
  reporter(const fit_options& o, std::size_t total, std::size_t devices)
      : o_(o), total_(total), devices_(devices), start_(clock::now()), last_(start_), last_bar_(start_) {
#if __has_include(<unistd.h>)
    bar_ = o.bar == progress_bar::on || (o.bar == progress_bar::automatic && ::isatty(2) != 0);
#else
    bar_ = o.bar == progress_bar::on;
#endif
  }
  reporter(const reporter&) = delete;
  reporter& operator=(const reporter&) = delete;
  ~reporter() {
    if (drawn_) std::fputs("\n", stderr);
  }

  /// A fit resumed from a checkpoint starts counting at its step: the bar starts part-way and
  /// the first rate counts only the steps run since.
  void resume_at(std::size_t step) noexcept { last_step_ = step; }

  void operator()(fit_result& r, std::size_t step, std::size_t epoch, double loss) {
    const auto now = clock::now();
    progress p;
    p.step = step;
    p.epoch = epoch;
    p.loss = loss;
    p.wall_seconds = std::chrono::duration<double>(now - start_).count();
    if (o_.log_every != 0 && step % o_.log_every == 0) {
      const double dt = std::chrono::duration<double>(now - last_).count();
      const std::size_t steps = step - last_step_;
      p.examples_per_sec = dt > 0 ? double(steps * o_.batch) / dt : 0;
      p.sec_per_batch = steps > 0 ? dt / double(steps) : 0;
      last_ = now;
      last_step_ = step;
      if (drawn_) std::fputs("\r\033[K", stderr);  // the line goes above the bar
      if (o_.print) o_.print(progress_line(p, devices_));
    }
    if (bar_ && (step == total_ || now - last_bar_ > std::chrono::milliseconds(100))) {
      last_bar_ = now;
      draw(p);
    }
    r.curve.push_back(p);
    if (o_.on_step) o_.on_step(p);
  }

private:
  void draw(const progress& p) {
    constexpr int width = 30;
    const int done = total_ == 0 ? width : int(double(width) * double(p.step) / double(total_));
    std::string bar(std::size_t(done), '=');
    if (done < width) bar += '>';
    bar.resize(width, ' ');
    std::fprintf(stderr, "\r[%s] %zu/%zu epoch %zu loss %.4f %.1fs", bar.c_str(), p.step, total_, p.epoch + 1, p.loss,
                 p.wall_seconds);
    std::fflush(stderr);
    drawn_ = true;
  }
  const fit_options& o_;
  std::size_t total_, devices_;
  clock::time_point start_, last_, last_bar_;
  std::size_t last_step_ = 0;
  bool bar_ = false, drawn_ = false;
};

/// The steps of a run: whole batches per epoch, times the epochs, capped by max_steps.
inline std::size_t total_steps(std::size_t examples, const fit_options& o) {
  const std::size_t all = (examples / o.batch) * o.epochs;
  return o.max_steps != 0 ? std::min(o.max_steps, all) : all;
}

/// The home copy of mpi<hogwild>: rank 0's window (nothing for a single process).
template <class Comm>
struct remote_home {
  remote_home(Comm&, float*, std::size_t) {}
  void read(float*) {}
  void add(const float*) {}
};
#if LOCUS_HAS_MPI
template <>
struct remote_home<mpi_comm> : mpi_comm::window {
  using mpi_comm::window::window;
};
#endif

/// The optimiser at step `step` (0-based) of a run of `total` steps: the learning rate ramped
/// over the warmup, then following the schedule.
inline sgd at_step(sgd opt, const fit_options& o, std::size_t step, std::size_t total) {
  if (step < o.warmup_steps) {
    opt.lr *= float(step + 1) / float(o.warmup_steps);
  } else if (o.schedule == lr_schedule::cosine && total > o.warmup_steps) {
    // 1 at the first step after the warmup, 0 at step `total` (one past the last).
    const double t = double(step - o.warmup_steps) / double(total - o.warmup_steps);
    opt.lr = float(double(opt.lr) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * t)));
  }
  return opt;
}

/// Runs f(index_constant<i>) for i in [0, N).
template <std::size_t... I, class F>
void for_each_index(std::index_sequence<I...>, F&& f) {
  (f(std::integral_constant<std::size_t, I>{}), ...);
}

/// Runs one callable per device on its own thread (inline for one) and rethrows the first failure.
/// With `concurrent` false they run one after the other: host devices (the cpu, emulated GPUs)
/// share the same cores, and each step is already parallel inside (OpenMP, BLAS); threads on top
/// only contend (measured: 2 emulated devices 8x slower per step with one thread each).
inline void run_parallel(std::vector<std::function<void()>>& work, bool concurrent = true) {
  if (work.size() == 1 || !concurrent) {
    for (auto& w : work) w();
    return;
  }
  std::vector<std::exception_ptr> errors(work.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < work.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        work[i]();
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Threads that stay: the replicas of a GPU trainer run every step's work on the same threads
/// (thread i runs work[i + 1]; the caller runs work[0]). A thread made per step, per replica, costs
/// little itself, but the OpenMP team it starts for the batch gather is made and torn down with it
/// (measured on an H200, 2 logical GPUs: 4.8 ms per step, against 0.47 for one device).
class replica_threads {
public:
  replica_threads() = default;
  replica_threads(const replica_threads&) = delete;
  replica_threads& operator=(const replica_threads&) = delete;
  ~replica_threads() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  /// Runs work[0] here and work[1..] on the threads, waits for all, rethrows the first failure.
  void run(std::vector<std::function<void()>>& work) {
    while (threads_.size() + 1 < work.size()) {
      const std::size_t slot = threads_.size() + 1;
      threads_.emplace_back([this, slot] { loop(slot); });
    }
    std::vector<std::exception_ptr> errors(work.size());
    {
      std::lock_guard lock(mutex_);
      work_ = &work;
      errors_ = &errors;
      pending_ = work.size() - 1;
      ++generation_;
    }
    wake_.notify_all();
    try {
      work[0]();
    } catch (...) {
      errors[0] = std::current_exception();
    }
    {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return pending_ == 0; });
      work_ = nullptr;
    }
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }

private:
  void loop(std::size_t slot) {
    std::uint64_t seen = 0;
    for (;;) {
      std::function<void()>* job = nullptr;
      std::exception_ptr* error = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && work_ != nullptr); });
        if (stopping_) return;
        seen = generation_;
        if (slot < work_->size()) {
          job = &(*work_)[slot];
          error = &(*errors_)[slot];
        }
      }
      if (job != nullptr) {
        try {
          (*job)();
        } catch (...) {
          *error = std::current_exception();
        }
        std::lock_guard lock(mutex_);
        if (--pending_ == 0) done_.notify_all();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  std::vector<std::function<void()>>* work_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
  std::size_t pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
};
}  // namespace detail

template <class Policy, class... Ds>
class data_parallel {
  static_assert(sizeof...(Ds) >= 1, "locus: data_parallel<Policy, Devices...> needs at least one device");
  static_assert((device<Ds> && ...),
                "locus: data_parallel<Policy, Devices...>: every device must be locus::cpu or locus::gpu<N>");
  static_assert(detail::all_distinct<Ds...>::value,
                "locus: data_parallel<Policy, Devices...>: a device appears twice in the list");
  using traits = detail::policy_traits<Policy>;
  using base_policy = typename traits::policy;
  using comm_type = typename traits::comm;
  static_assert(std::is_same_v<base_policy, sync_average> || std::is_same_v<base_policy, hogwild>,
                "locus: data_parallel<Policy, ...>: Policy must be locus::train::sync_average or locus::train::hogwild, "
                "or mpi<> of one of them");
  static_assert(std::is_same_v<Policy, base_policy> || LOCUS_HAS_MPI,
                "locus: data_parallel<mpi<...>, ...> needs MPI: this build has no <mpi.h> (install libopenmpi-dev, "
                "find_package(MPI) and link MPI::MPI_CXX)");

public:
  static constexpr std::size_t device_count = sizeof...(Ds);
  /// True for mpi<P>: the replicas of every rank of the MPI job train together.
  static constexpr bool distributed = comm_type::distributed;
  /// Replicas run on threads of their own only when none of them shares the host's cores.
  static constexpr bool concurrent_replicas = (!backend::runs_on_host<Ds> && ...);
  using home_device = typename detail::first<Ds...>::type;

  /// One replica of `model` per device, all starting from the first device's initial parameters.
  template <class M>
  data_parallel(const M& model, sgd opt) : opt_(opt) {
    static_assert((model_on<M, Ds> && ...),
                  "locus: data_parallel: the model does not meet the model interface on every device of the list "
                  "(see locus::train::model_on<M, D> in locus/train/model.hpp)");
    if constexpr ((model_on<M, Ds> && ...)) {
      opt_.validate();
      if constexpr (requires { model.classes(); }) classes_ = static_cast<std::int64_t>(model.classes());
      auto shared = std::make_shared<const M>(model);
      replicas_ = std::tuple<std::unique_ptr<replica<Ds>>...>{std::make_unique<replica_of<M, Ds>>(shared)...};
      size_ = std::get<0>(replicas_)->size();
      grads_ = std::tuple<tensor<float, Ds, 1>...>{tensor<float, Ds, 1>(shape{size_ + extra}, 0.f)...};
      velocity_ = std::tuple<tensor<float, Ds, 1>...>{tensor<float, Ds, 1>(shape{size_}, 0.f)...};
      detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
        if constexpr (i > 0) copy_parameters(*std::get<0>(replicas_), *std::get<i>(replicas_));
      });
      if constexpr (distributed) {
        // Every rank starts from rank 0's parameters.
        auto p = parameters();
        comm_.broadcast(p.data(), p.size(), 0);
        set_parameters(p);
      }
    }
  }

  /// Trains on `data`; returns the loss curve. TF-style progress lines through options.print.
  fit_result fit(const data::labelled_images& data, const fit_options& options) {
    if (options.batch == 0 || options.batch > data.size())
      throw config_error("locus: fit: batch " + std::to_string(options.batch) + " for a data set of " +
                         std::to_string(data.size()) + " examples");
    check_data("fit", data);
    if constexpr (std::is_same_v<base_policy, sync_average>) {
      if (options.batch % replica_count() != 0)
        throw config_error("locus: fit: sync_average splits the batch evenly: " + std::to_string(options.batch) +
                           " is not a multiple of " + std::to_string(replica_count()) + " replicas (" +
                           std::to_string(comm_.size()) + " rank" + (comm_.size() == 1 ? "" : "s") + " x " +
                           std::to_string(device_count) + " device" + (device_count == 1 ? "" : "s") + ")");
      if (options.lookahead)
        throw config_error("locus: fit: lookahead is for hogwild (sync_average's gradients are never stale)");
      return fit_sync(data, options);
    } else {
      return fit_hogwild(data, options);
    }
  }

  /// The trainer's state: the parameters, every replica's momentum, the steps done by the last fit
  /// and its seed.
  [[nodiscard]] checkpoint state() const {
    checkpoint c;
    c.steps = steps_done_;
    c.seed = seed_;
    c.shapes = std::get<0>(replicas_)->shapes();
    c.parameters = parameters();
    detail::for_each_index(std::index_sequence_for<Ds...>{},
                           [&](auto i) { c.velocity.push_back(std::get<i>(velocity_).view().to_vector()); });
    return c;
  }
  /// Writes state() to path (a temporary file, flushed, renamed over path).
  void save(const std::string& path) const { state().save(path); }
  /// Reads a checkpoint written by save() for the same model on as many devices. Everything is
  /// checked before anything changes: on any error (checkpoint_error naming the file and what is
  /// wrong) the trainer is untouched.
  void load(const std::string& path) { restore(checkpoint::load(path), path); }
  void restore(const checkpoint& c, const std::string& name) {
    const auto& mine = std::get<0>(replicas_)->shapes();
    if (c.shapes != mine)
      throw checkpoint_error("locus: checkpoint " + name + ": its tensors " + describe(c.shapes) +
                             " do not match the model's " + describe(mine));
    if (c.parameters.size() != size_)
      throw checkpoint_error("locus: checkpoint " + name + ": " + std::to_string(c.parameters.size()) +
                             " parameters for a model of " + std::to_string(size_));
    if (!c.velocity.empty() && c.velocity.size() != device_count)
      throw checkpoint_error("locus: checkpoint " + name + ": " + std::to_string(c.velocity.size()) +
                             " momentum buffers for " + std::to_string(device_count) + " replicas");
    set_parameters(c.parameters);
    detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
      auto& v = std::get<i>(velocity_);
      if (c.velocity.empty()) v = v * 0.f;
      else locus::transfer(v.view(), tensor_view<const float, cpu, 1>(c.velocity[i].data(), shape{size_}));
    });
    steps_done_ = c.steps;
    seed_ = c.seed;
  }

  /// This process's rank in the MPI job and the number of ranks (0 and 1 in process).
  [[nodiscard]] int rank() const noexcept { return comm_.rank(); }
  [[nodiscard]] int ranks() const noexcept { return comm_.size(); }
  /// Replicas over all ranks: ranks() x device_count.
  [[nodiscard]] std::size_t replica_count() const noexcept { return std::size_t(comm_.size()) * device_count; }

  /// The number of parameters, all tensors together.
  [[nodiscard]] std::size_t parameter_count() const noexcept { return size_; }

  /// The parameters of replica 0 (sync_average) or the home copy after fit (hogwild), flat, in the
  /// model's for_each order.
  [[nodiscard]] std::vector<float> parameters() const {
    std::vector<float> out(size_);
    std::size_t offset = 0;
    for (const auto& v : std::get<0>(replicas_)->parameters()) {
      locus::transfer(tensor_view<float, cpu, 1>(out.data() + offset, v.shape()), v);
      offset += v.size();
    }
    return out;
  }

  /// Writes the trained parameters into p, a parameter set of the same model on any device.
  template <parameter_set P>
  void parameters_into(P& p) const {
    const auto& src = std::get<0>(replicas_)->parameters();
    std::size_t index = 0;
    p.for_each([&](const auto& v) {
      if (index >= src.size() || v.size() != src[index].size())
        throw shape_error("locus: parameters_into: tensor " + std::to_string(index) + " of " +
                          std::to_string(v.size()) + " elements does not match the trained model");
      using V = std::remove_cvref_t<decltype(v)>;
      locus::transfer(tensor_view<float, typename V::device_type, 1>(v.data(), shape{v.size()}), src[index]);
      ++index;
    });
    if (index != src.size()) throw shape_error("locus: parameters_into: the parameter set has too few tensors");
  }

  /// Accuracy on a data set, evaluated on the first device in batches of 1000.
  [[nodiscard]] double accuracy(const data::labelled_images& data) const {
    check_data("accuracy", data);
    if (data.size() == 0) throw config_error("locus: accuracy: the data set is empty");
    const auto& model = *std::get<0>(replicas_);
    std::vector<std::uint32_t> order(data.size());
    std::iota(order.begin(), order.end(), 0u);
    std::size_t correct = 0;
    for (std::size_t first = 0; first < data.size(); first += 1000) {
      const std::size_t count = std::min<std::size_t>(1000, data.size() - first);
      auto [x, y] = detail::gather<home_device>(data, order, first, count);
      const auto pred = model.predict(x).to_vector();
      const auto labels = y.to_vector();
      for (std::size_t i = 0; i < count; ++i) correct += pred[i] == labels[i];
    }
    return double(correct) / double(data.size());
  }

private:
  /// Images and labels agree in count; every label is a class of the model: in [0, classes) when
  /// the model says how many (classes()), else at least 0. Checked before anything is trained.
  void check_data(const char* what, const data::labelled_images& data) const {
    if (data.images.extent(0) != data.labels.size())
      throw shape_error(std::string("locus: ") + what + ": " + std::to_string(data.images.extent(0)) + " images and " +
                        std::to_string(data.labels.size()) + " labels");
    const std::int64_t classes = classes_;
    const std::int32_t* y = data.labels.data();
    for (std::size_t i = 0; i < data.labels.size(); ++i)
      if (y[i] < 0 || y[i] >= classes)
        throw data::data_error(std::string("locus: ") + what + ": label " + std::to_string(i) + " is " + std::to_string(y[i]) +
                         ", outside the model's classes [0, " + std::to_string(classes) + ")");
  }

  static std::string describe(const std::vector<std::vector<std::uint64_t>>& shapes) {
    std::string out = "[";
    for (std::size_t t = 0; t < shapes.size(); ++t) {
      out += t ? ", [" : "[";
      for (std::size_t d = 0; d < shapes[t].size(); ++d) out += (d ? ", " : "") + std::to_string(shapes[t][d]);
      out += "]";
    }
    return out + "]";
  }

  /// True when every element of the views is finite (one reduction each, on their device).
  template <device D, class Views>
  static bool all_finite(const Views& views) {
    for (const auto& v : views)
      if (!std::isfinite(double(on<D>(sum(v)).item()))) return false;
    return true;
  }

  /// The checkpoint to resume from, when options name one that exists.
  void resume(const fit_options& o, fit_result& result) {
    if (o.checkpoint_path.empty()) return;
    if (std::FILE* f = std::fopen(o.checkpoint_path.c_str(), "rb")) std::fclose(f);
    else return;
    auto c = checkpoint::load(o.checkpoint_path);
    if (c.seed != o.seed)
      throw checkpoint_error("locus: checkpoint " + o.checkpoint_path + ": written with seed " + std::to_string(c.seed) +
                             ", this fit has seed " + std::to_string(o.seed) + " (another data order)");
    restore(c, o.checkpoint_path);
    result.resumed_from = std::size_t(c.steps);
  }
  void save_checkpoint(const fit_options& o) {
    if (!o.checkpoint_path.empty() && comm_.rank() == 0) save(o.checkpoint_path);
  }

  /// Each replica's part of a step: on threads that stay when the replicas run concurrently (GPUs),
  /// one after the other otherwise.
  void run_replicas(std::vector<std::function<void()>>& work) {
    if constexpr (concurrent_replicas && device_count > 1) {
      if (!threads_) threads_ = std::make_unique<detail::replica_threads>();
      threads_->run(work);
    } else {
      detail::run_parallel(work, false);
    }
  }

  /// Slots after the gradient in each flat buffer: the loss and a failure count travel with it.
  static constexpr std::size_t extra = 2;

  /// Every replica takes the flat parameters p.
  void set_parameters(const std::vector<float>& p) {
    detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
      std::size_t offset = 0;
      for (const auto& v : std::get<i>(replicas_)->parameters()) {
        locus::transfer(v, tensor_view<const float, cpu, 1>(p.data() + offset, v.shape()));
        offset += v.size();
      }
    });
  }

  template <device A, device B>
  static void copy_parameters(const replica<A>& from, replica<B>& to) {
    for (std::size_t t = 0; t < from.parameters().size(); ++t) locus::transfer(to.parameters()[t], from.parameters()[t]);
  }

public:
  /// The collective step of sync_average, on the flat gradient buffers as they are: the mean of
  /// every replica's buffer (gradient, loss), left in each of them: summed on the first device,
  /// summed over the ranks (one MPI_Allreduce), scaled, copied back. One transfer per device each
  /// way, whatever the number of tensors. Throws, on every rank, when a replica of any rank failed
  /// (its failure slot), naming the first failing rank. fit calls it every step; it is public
  /// for benchmarks. Collective across ranks.
  void average_gradients(const std::string& local_failure = {}) {
    auto& mean = std::get<0>(grads_);
    const std::size_t n = size_ + extra;
    if constexpr (device_count > 1) {
      if (staging_.size() != n) staging_ = tensor<float, home_device, 1>::uninitialized_of(shape{n});
      detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
        if constexpr (i > 0) {
          locus::transfer(staging_.view(), std::get<i>(grads_).view());
          mean = mean + staging_;
        }
      });
    }
    if constexpr (distributed) {
      if constexpr (backend::runs_on_host<home_device>) {
        comm_.sum(mean.data(), n);
      } else {
        auto host = mean.to_vector();
        comm_.sum(host.data(), n);
        locus::transfer(mean.view(), tensor_view<const float, cpu, 1>(host.data(), shape{n}));
      }
      if (slot(mean, size_ + 1) > 0.f) throw error(comm_.first_failure(local_failure));
    }
    mean = mean * (1.f / float(replica_count()));
    if constexpr (device_count > 1) {
      detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
        if constexpr (i > 0) locus::transfer(std::get<i>(grads_).view(), mean.view());
      });
    }
  }

private:
  /// One element of a device buffer, on the host.
  template <device D>
  static float slot(const tensor<float, D, 1>& t, std::size_t k) {
    float v = 0;
    locus::transfer(tensor_view<float, cpu, 1>(&v, shape{1}), tensor_view<const float, D, 1>(t.data() + k, shape{1}));
    return v;
  }

  fit_result fit_sync(const data::labelled_images& data, const fit_options& o) {
    using clock = std::chrono::steady_clock;
    // One device in one process uses the model's own gradient tensors; otherwise they are packed
    // into the flat buffers that are averaged.
    constexpr bool packed = device_count > 1 || distributed;
    fit_result result;
    const auto start = clock::now();
    const std::size_t total = detail::total_steps(data.size(), o);
    detail::reporter report(o, total, device_count);
    std::size_t step = 0;
    const std::size_t shard = o.batch / replica_count();
    const std::size_t first_replica = std::size_t(comm_.rank()) * device_count;
    std::array<double, device_count> losses{};
    std::array<std::string, device_count> failures;
    seed_ = o.seed;
    resume(o, result);
    report.resume_at(result.resumed_from);
    bool stop = false;
    for (std::size_t epoch = 0; epoch < o.epochs && !stop; ++epoch) {
      const auto order = detail::shuffled(data.size(), o.seed, epoch);
      for (std::size_t first = 0; first + o.batch <= data.size(); first += o.batch) {
        if (o.max_steps != 0 && step >= o.max_steps) break;
        if (step < result.resumed_from) {  // done before the checkpoint
          ++step;
          continue;
        }
        std::vector<std::function<void()>> work;
        detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
          using D = std::tuple_element_t<i, std::tuple<Ds...>>;
          work.push_back([&, i] {
            auto& r = *std::get<i>(replicas_);
            auto& g = std::get<i>(grads_);
            try {
              auto [x, y] = detail::gather<D>(data, order, first + (first_replica + i) * shard, shard);
              losses[i] = r.loss_and_grad(x, y);
              if constexpr (packed) {
                r.pack_gradients(tensor_view<float, D, 1>(g.data(), shape{size_}));
                const float tail[extra] = {float(losses[i]), 0.f};
                locus::transfer(tensor_view<float, D, 1>(g.data() + size_, shape{extra}),
                                tensor_view<const float, cpu, 1>(tail, shape{extra}));
              }
            } catch (const std::exception& e) {
              if constexpr (!distributed) throw;
              // Across ranks the failure travels in the buffer: every rank learns of it.
              failures[i] = std::string(id_of<D>.full_name()) + ": " + e.what();
              const float tail[extra] = {0.f, 1.f};
              locus::transfer(tensor_view<float, D, 1>(g.data() + size_, shape{extra}),
                              tensor_view<const float, cpu, 1>(tail, shape{extra}));
            }
          });
        });
        run_replicas(work);
        double loss = losses[0];
        if constexpr (packed) {
          std::string failure;
          for (const auto& f : failures)
            if (failure.empty()) failure = f;
          average_gradients(failure);
          loss = slot(std::get<0>(grads_), size_);
        }
        const bool finite =
            std::isfinite(loss) &&
            (packed ? all_finite<home_device>(std::vector{tensor_view<const float, home_device, 1>(
                          std::get<0>(grads_).data(), shape{size_})})
                    : all_finite<home_device>(std::get<0>(replicas_)->gradients()));
        if (!finite) {
          if (o.on_non_finite == non_finite::throw_error)
            throw non_finite_error("locus: fit: step " + std::to_string(step + 1) + ": the loss (" + std::to_string(loss) +
                                   ") or the gradient is not finite; the step is not applied");
          if (o.on_non_finite == non_finite::stop) {
            result.stopped = true;
            stop = true;
            break;
          }
          ++result.skipped;
          ++step;
          report(result, step, epoch, loss);
          continue;
        }
        std::vector<std::function<void()>> update;
        const sgd opt = detail::at_step(opt_, o, step, total);
        detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
          update.push_back([&, i] {
            const auto& r = *std::get<i>(replicas_);
            if constexpr (!packed)
              detail::apply(opt, r.parameters(), r.gradients(), std::get<i>(velocity_).view());
            else
              detail::apply(opt, r.parameters(),
                            detail::segments(static_cast<const float*>(std::get<i>(grads_).data()), r.parameters()),
                            std::get<i>(velocity_).view());
          });
        });
        run_replicas(update);
        ++step;
        steps_done_ = step;
        if (o.checkpoint_every != 0 && step % o.checkpoint_every == 0) save_checkpoint(o);
        report(result, step, epoch, loss);
      }
    }
    if (!result.stopped) save_checkpoint(o);
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    result.examples = result.curve.size() * o.batch;
    return result;
  }

  fit_result fit_hogwild(const data::labelled_images& data, const fit_options& o) {
    using clock = std::chrono::steady_clock;
    // The home copy of the parameters: in host memory, touched by the workers only through
    // std::atomic_ref; across ranks, rank 0's copy in an MPI window. Each worker keeps its own
    // momentum on its device (a momentum shared in the home copy was measured less stable: 0.49
    // against 0.71 test accuracy after one epoch, 2 workers, lr 0.1, momentum 0.9).
    if (!o.checkpoint_path.empty())
      throw config_error("locus: fit: checkpoints during fit are for sync_average (hogwild's workers change the "
                         "parameters under any snapshot); call save() after fit");
    if (distributed && o.writes != hogwild_writes::atomic_add)
      throw config_error("locus: fit: hogwild_writes::load_store is for in-process hogwild (mpi<hogwild> adds with "
                         "MPI_Accumulate)");
    if (o.lookahead && (distributed || opt_.momentum == 0.f))
      throw config_error(std::string("locus: fit: lookahead needs momentum and in-process hogwild (") +
                         (distributed ? "mpi<hogwild> has no shared momentum sum" : "the momentum is 0") + ")");
    seed_ = o.seed;
    std::vector<float> home = parameters();
    // With lookahead: the sum of the workers' momenta, beside the home copy, touched the same way.
    std::vector<float> momenta(o.lookahead ? size_ : 0, 0.f);
    fit_result result;
    std::mutex result_mutex;  // the curve and the progress lines only; never the parameters
    const auto start = clock::now();
    std::atomic<std::size_t> next{0};  // this rank's steps: rank, rank + ranks, ...
    std::atomic<std::size_t> applied{0};  // this rank's updates of the home copy (the staleness, the steps)
    const std::size_t per_epoch = data.size() / o.batch;
    const std::size_t total = detail::total_steps(data.size(), o);
    const std::size_t my_steps = (total + std::size_t(comm_.size()) - 1 - std::size_t(comm_.rank())) /
                                 std::size_t(comm_.size());
    detail::reporter report(o, my_steps, device_count);
    std::vector<std::vector<std::uint32_t>> orders;
    for (std::size_t e = 0; e < o.epochs; ++e) orders.push_back(detail::shuffled(data.size(), o.seed, e));
    const float mom = opt_.momentum;
    const int threads_per_worker = std::max(1, backend::host_cores() / int(device_count));
    std::optional<detail::remote_home<comm_type>> remote;
    if constexpr (distributed) {
      comm_.require_threads("data_parallel<mpi<hogwild>>");
      remote.emplace(comm_, home.data(), size_);
    }

    std::vector<std::function<void()>> work;
    detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
      using D = std::tuple_element_t<i, std::tuple<Ds...>>;
      work.push_back([&, i] {
        // The cores are shared out among the workers whose kernels run on them.
        if constexpr (backend::runs_on_host<D>) backend::limit_host_threads(threads_per_worker);
        auto& local = *std::get<i>(replicas_);
        auto& grad = std::get<i>(grads_);
        auto& velocity = std::get<i>(velocity_);
        std::vector<float> staging(size_), step_host, delta;
        std::vector<float> mine(o.lookahead ? size_ : 0, 0.f);  // this worker's share of `momenta`
        // A worker that fails stops the others at their next step; run_parallel rethrows its error.
        struct stop_all {
          std::atomic<std::size_t>& next;
          std::size_t total;
          ~stop_all() {
            if (std::uncaught_exceptions() > 0) next.store(total, std::memory_order_relaxed);
          }
        } guard{next, my_steps};
        try {
          for (;;) {
            const std::size_t k = next.fetch_add(1, std::memory_order_relaxed);
            if (k >= my_steps) break;
            const std::size_t s = std::size_t(comm_.rank()) + k * std::size_t(comm_.size());
            const std::size_t epoch = s / per_epoch, first = (s % per_epoch) * o.batch;
            const float lr = detail::at_step(opt_, o, s, total).lr;
            // Read the current (possibly stale, possibly mid-update) parameters.
            const std::size_t seen = applied.load(std::memory_order_relaxed);
            if constexpr (distributed) {
              remote->read(staging.data());
            } else {
#if defined(_OPENMP)
#  pragma omp parallel for schedule(static) num_threads(threads_per_worker) if (threads_per_worker > 1)
#endif
              for (std::size_t e = 0; e < size_; ++e) {
                float t = std::atomic_ref<float>(home[e]).load(std::memory_order_relaxed);
                if (o.lookahead) t -= lr * mom * std::atomic_ref<float>(momenta[e]).load(std::memory_order_relaxed);
                staging[e] = t;
              }
            }
            std::size_t offset = 0;
            for (const auto& v : local.parameters()) {
              locus::transfer(v, tensor_view<const float, cpu, 1>(staging.data() + offset, v.shape()));
              offset += v.size();
            }
            auto [x, y] = detail::gather<D>(data, orders[epoch], first, o.batch);
            const double loss = local.loss_and_grad(x, y);
            if (!std::isfinite(loss) || !all_finite<D>(local.gradients())) {
              if (o.on_non_finite == non_finite::throw_error)
                throw non_finite_error("locus: fit: a step of the worker on " + id_of<D>.full_name() +
                                       ": the loss or the gradient is not finite; the step is not applied");
              std::lock_guard lock(result_mutex);
              if (o.on_non_finite == non_finite::stop) {
                result.stopped = true;
                next.store(my_steps, std::memory_order_relaxed);
                break;
              }
              ++result.skipped;
              report(result, result.curve.size() + 1, epoch, loss);
              continue;
            }
            // The worker's own momentum, on its device; then lock-free updates of the home copy.
            const float weight =
                o.scale_by_staleness ? 1.f / float(1 + applied.load(std::memory_order_relaxed) - seen) : 1.f;
            if (mom != 0.f) {
              std::size_t t = 0;
              for (const auto& v : detail::segments(velocity.data(), local.parameters())) {
                v = v * mom + local.gradients()[t] * weight;
                ++t;
              }
            } else {
              local.pack_gradients(tensor_view<float, D, 1>(grad.data(), shape{size_}));
            }
            const float rate = mom != 0.f ? lr : lr * weight;
            const auto& step = mom != 0.f ? velocity : grad;
            const float* d = step.data();
            if constexpr (!std::is_same_v<D, cpu>) {
              step_host = step.to_vector();
              d = step_host.data();
            }
            const auto n = static_cast<std::ptrdiff_t>(size_);
            if constexpr (distributed) {
              delta.resize(size_);
              for (std::ptrdiff_t e = 0; e < n; ++e) delta[std::size_t(e)] = -(d[e] * rate);
              remote->add(delta.data());
            } else {
              const bool rmw = o.writes == hogwild_writes::atomic_add;
#if defined(_OPENMP)
#  pragma omp parallel for schedule(static) num_threads(threads_per_worker) if (threads_per_worker > 1)
#endif
              for (std::ptrdiff_t e = 0; e < n; ++e) {
                const std::size_t u = std::size_t(e);
                detail::add_to(home[u], -(d[e] * rate), rmw);
                if (o.lookahead) {  // the momenta's sum follows this worker's new momentum
                  detail::add_to(momenta[u], d[e] - mine[u], rmw);
                  mine[u] = d[e];
                }
              }
            }
            applied.fetch_add(1, std::memory_order_relaxed);
            std::lock_guard lock(result_mutex);
            report(result, result.curve.size() + 1, epoch, loss);
          }
        } catch (const std::exception& e) {
          // Across ranks nobody waits for this worker at a collective: end the job, with the message.
          if constexpr (distributed) comm_.abort(std::string(id_of<D>.full_name()) + ": " + e.what());
          throw;
        }
      });
    });
    detail::run_parallel(work);
    // The steps taken (applied or skipped), not those planned: a run that stopped early records
    // where it stopped.
    steps_done_ = applied.load(std::memory_order_relaxed) + result.skipped;
    if constexpr (distributed) {
      remote.reset();  // collective: every rank's updates are in rank 0's copy
      comm_.broadcast(home.data(), size_, 0);
      float steps = float(steps_done_);  // exact: counts stay far below 2^24
      comm_.sum(&steps, 1);
      steps_done_ = std::size_t(steps);
    }
    // Every worker has joined: the home copy is plain memory again. Every replica takes it.
    set_parameters(home);
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    result.examples = result.curve.size() * o.batch;
    return result;
  }

  comm_type comm_;  // first: the MPI communicator is duplicated before anything uses it
  sgd opt_;
  std::unique_ptr<detail::replica_threads> threads_;  // made on the first concurrent step
  /// Labels must lie in [0, classes_): the model's classes() where it has one.
  std::int64_t classes_ = std::numeric_limits<std::int32_t>::max();
  std::size_t size_ = 0;
  std::size_t steps_done_ = 0;  ///< by the last fit, counting the steps a checkpoint had done
  std::uint64_t seed_ = 0;      ///< of the last fit
  std::tuple<std::unique_ptr<replica<Ds>>...> replicas_;
  std::tuple<tensor<float, Ds, 1>...> grads_;     ///< each replica's flat gradient (the mean after averaging)
  std::tuple<tensor<float, Ds, 1>...> velocity_;  ///< each replica's momentum
  tensor<float, home_device, 1> staging_;         ///< a gradient copied to the first device
};

}  // namespace locus::train
