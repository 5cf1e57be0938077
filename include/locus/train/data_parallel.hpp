#pragma once
// Data-parallel training of one model on several devices, TensorFlow's classic multi-GPU modes:
//
//   data_parallel<sync_average, gpu<0>, gpu<1>>   every step, each replica computes gradients on
//       its shard of the batch, the gradients are averaged (gathered on the first device, the
//       mean broadcast back), and every replica applies the same update. With K devices and
//       global batch B the parameters follow those of one device with batch B.
//   data_parallel<hogwild, gpu<0>, gpu<1>, gpu<2>> the parameters live on a home copy in host
//       memory; one worker per device, on its own host thread, reads them (stale values
//       allowed), computes gradients on its own batches and applies them with relaxed
//       std::atomic_ref updates: no lock, no barrier between workers, no data race.
//
// The device list is compile-time: a repeated device or a non-device type does not compile, and
// each replica's tensors are typed on their device. Communication between devices goes through
// locus's own transfers (peer copies on GPUs, host threads for host and emulated devices);
// NCCL and MPI are not used yet.
#include <locus/config.hpp>
#include <locus/data/idx.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/locus.hpp>
#include <locus/train/mlp.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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

struct fit_options {
  std::size_t epochs = 1;
  std::size_t batch = 256;        ///< the global batch (split over the devices by sync_average)
  std::uint64_t seed = 0;         ///< data order
  std::size_t max_steps = 0;      ///< stop after this many steps (0: all epochs)
  std::size_t log_every = 100;    ///< a TF-style line every this many steps (0: none)
  std::function<void(const std::string&)> print = [](const std::string& line) {
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  };
};

struct fit_result {
  std::vector<progress> curve;    ///< one entry per step
  double seconds = 0;
  std::size_t examples = 0;
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
/// the cpu's caching arena (no allocation per step), then moved (cpu) or copied (GPUs).
template <device D>
std::pair<tensor<float, D, 2>, tensor<std::int32_t, D>> gather(const data::labelled_images& data,
                                                                const std::vector<std::uint32_t>& order,
                                                                std::size_t first, std::size_t count) {
  const std::size_t cols = data.images.extent(1);
  auto x = tensor<float, cpu, 2>::uninitialized_of(shape{count, cols});
  auto y = tensor<std::int32_t, cpu>::uninitialized_of(shape{count});
  const float* src = data.images.data();
  for (std::size_t r = 0; r < count; ++r) {
    const std::size_t row = order[first + r];
    std::copy(src + row * cols, src + (row + 1) * cols, x.data() + r * cols);
    y(r) = data.labels(row);
  }
  if constexpr (std::is_same_v<D, cpu>) return {std::move(x), std::move(y)};
  else return {locus::to<D>(x), locus::to<D>(y)};
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

/// v = momentum * v + g; p -= lr * v, on p's device.
template <class T, device D>
void sgd_update(mlp_params<T, D>& p, mlp_params<T, D>& v, const mlp_params<T, D>& g, const sgd& opt) {
  const T lr = static_cast<T>(opt.lr), mom = static_cast<T>(opt.momentum);
  for (std::size_t l = 0; l < p.layers(); ++l) {
    v.w[l] = v.w[l] * mom + g.w[l];
    p.w[l] = p.w[l] - v.w[l] * lr;
    v.b[l] = v.b[l] * mom + g.b[l];
    p.b[l] = p.b[l] - v.b[l] * lr;
  }
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
}  // namespace detail

template <class Policy, class... Ds>
class data_parallel {
  static_assert(sizeof...(Ds) >= 1, "locus: data_parallel<Policy, Devices...> needs at least one device");
  static_assert((device<Ds> && ...),
                "locus: data_parallel<Policy, Devices...>: every device must be locus::cpu or locus::gpu<N>");
  static_assert(detail::all_distinct<Ds...>::value,
                "locus: data_parallel<Policy, Devices...>: a device appears twice in the list");
  static_assert(std::is_same_v<Policy, sync_average> || std::is_same_v<Policy, hogwild>,
                "locus: data_parallel<Policy, ...>: Policy must be locus::train::sync_average or locus::train::hogwild");

public:
  static constexpr std::size_t device_count = sizeof...(Ds);
  /// Replicas run on threads of their own only when none of them shares the host's cores.
  static constexpr bool concurrent_replicas = (!backend::runs_on_host<Ds> && ...);
  using model_type = mlp<float>;
  using home_device = typename detail::first<Ds...>::type;

  data_parallel(const model_type& model, sgd opt)
      : model_(model), opt_(opt), replicas_(model.template init<Ds>()...),
        velocity_(std::get<mlp_params<float, Ds>>(replicas_).zeros_like()...) {}

  /// Trains on `data`; returns the loss curve. TF-style progress lines through options.print.
  fit_result fit(const data::labelled_images& data, const fit_options& options) {
    if (options.batch == 0 || options.batch > data.size())
      throw shape_error("locus: fit: batch " + std::to_string(options.batch) + " for a data set of " +
                        std::to_string(data.size()));
    if constexpr (std::is_same_v<Policy, sync_average>) {
      if (options.batch % device_count != 0)
        throw shape_error("locus: fit: sync_average splits the batch evenly: " + std::to_string(options.batch) +
                          " is not a multiple of " + std::to_string(device_count) + " devices");
      return fit_sync(data, options);
    } else {
      return fit_hogwild(data, options);
    }
  }

  /// The parameters of replica 0 (sync_average) or the home copy (hogwild), on device D.
  template <device D>
  [[nodiscard]] mlp_params<float, D> parameters() const {
    return std::get<0>(replicas_).template to<D>();
  }

  /// Accuracy on a data set, evaluated on the first device in batches of 1000.
  [[nodiscard]] double accuracy(const data::labelled_images& data) const {
    const auto& p = std::get<0>(replicas_);
    std::vector<std::uint32_t> order(data.size());
    std::iota(order.begin(), order.end(), 0u);
    std::size_t correct = 0;
    for (std::size_t first = 0; first < data.size(); first += 1000) {
      const std::size_t count = std::min<std::size_t>(1000, data.size() - first);
      auto [x, y] = detail::gather<home_device>(data, order, first, count);
      const auto pred = model_.predict(p, x).to_vector();
      const auto labels = y.to_vector();
      for (std::size_t i = 0; i < count; ++i) correct += pred[i] == labels[i];
    }
    return double(correct) / double(data.size());
  }

private:
  fit_result fit_sync(const data::labelled_images& data, const fit_options& o) {
    using clock = std::chrono::steady_clock;
    fit_result result;
    const auto start = clock::now();
    auto last = start;
    std::size_t step = 0, last_step = 0;
    const std::size_t shard = o.batch / device_count;
    for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
      const auto order = detail::shuffled(data.size(), o.seed, epoch);
      for (std::size_t first = 0; first + o.batch <= data.size(); first += o.batch) {
        if (o.max_steps != 0 && step >= o.max_steps) break;
        std::tuple<mlp_step<float, Ds>...> steps;
        std::vector<std::function<void()>> work;
        detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
          using D = std::tuple_element_t<i, std::tuple<Ds...>>;
          work.push_back([&, i] {
            auto [x, y] = detail::gather<D>(data, order, first + i * shard, shard);
            std::get<i>(steps) = model_.loss_and_grad(std::get<i>(replicas_), x, y);
          });
        });
        detail::run_parallel(work, concurrent_replicas);
        // The average, gathered on the first device and broadcast back.
        auto& mean = std::get<0>(steps).grad;
        double loss = std::get<0>(steps).loss.item();
        detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
          if constexpr (i > 0) {
            auto g = std::get<i>(steps).grad.template to<home_device>();
            for (std::size_t l = 0; l < mean.layers(); ++l) {
              mean.w[l] = mean.w[l] + g.w[l];
              mean.b[l] = mean.b[l] + g.b[l];
            }
            loss += std::get<i>(steps).loss.item();
          }
        });
        if constexpr (device_count > 1) {
          const float k = 1.f / float(device_count);
          for (std::size_t l = 0; l < mean.layers(); ++l) {
            mean.w[l] = mean.w[l] * k;
            mean.b[l] = mean.b[l] * k;
          }
        }
        std::vector<std::function<void()>> update;
        detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
          using D = std::tuple_element_t<i, std::tuple<Ds...>>;
          update.push_back([&, i] {
            if constexpr (i == 0) {
              detail::sgd_update(std::get<0>(replicas_), std::get<0>(velocity_), mean, opt_);
            } else {
              const auto g = mean.template to<D>();
              detail::sgd_update(std::get<i>(replicas_), std::get<i>(velocity_), g, opt_);
            }
          });
        });
        detail::run_parallel(update, concurrent_replicas);
        ++step;
        record(result, o, step, epoch, loss / double(device_count), start, last, last_step);
      }
    }
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    result.examples = step * o.batch;
    return result;
  }

  fit_result fit_hogwild(const data::labelled_images& data, const fit_options& o) {
    using clock = std::chrono::steady_clock;
    // The home copy, in host memory, touched by the workers only through std::atomic_ref.
    auto home = std::get<0>(replicas_).template to<cpu>();
    std::vector<std::pair<float*, std::size_t>> home_tensors;
    home.for_each([&](auto v) { home_tensors.emplace_back(v.data(), v.size()); });
    fit_result result;
    std::mutex result_mutex;  // the curve and the progress lines only; never the parameters
    const auto start = clock::now();
    auto last = start;
    std::size_t last_step = 0;
    std::atomic<std::size_t> next_step{0};
    const std::size_t per_epoch = data.size() / o.batch;
    const std::size_t total = o.max_steps != 0 ? std::min(o.max_steps, per_epoch * o.epochs) : per_epoch * o.epochs;
    std::vector<std::vector<std::uint32_t>> orders;
    for (std::size_t e = 0; e < o.epochs; ++e) orders.push_back(detail::shuffled(data.size(), o.seed, e));

    std::vector<std::function<void()>> work;
    detail::for_each_index(std::index_sequence_for<Ds...>{}, [&](auto i) {
      using D = std::tuple_element_t<i, std::tuple<Ds...>>;
      work.push_back([&, i] {
        auto& local = std::get<i>(replicas_);
        auto& velocity = std::get<i>(velocity_);
        std::vector<float> staging;
        for (;;) {
          const std::size_t s = next_step.fetch_add(1, std::memory_order_relaxed);
          if (s >= total) break;
          const std::size_t epoch = s / per_epoch, first = (s % per_epoch) * o.batch;
          // Read the current (possibly stale, possibly mid-update) parameters.
          std::size_t t = 0;
          local.for_each([&](auto view) {
            staging.resize(view.size());
            const auto [p, n] = home_tensors[t++];
            for (std::size_t k = 0; k < n; ++k) staging[k] = std::atomic_ref<float>(p[k]).load(std::memory_order_relaxed);
            backend::copy(id_of<D>, view.data(), id_of<cpu>, staging.data(), n * sizeof(float));
          });
          auto [x, y] = detail::gather<D>(data, orders[epoch], first, o.batch);
          auto st = model_.loss_and_grad(local, x, y);
          // The worker's own momentum, then lock-free updates of the home copy.
          const float lr = opt_.lr, mom = opt_.momentum;
          for (std::size_t l = 0; l < local.layers(); ++l) {
            velocity.w[l] = velocity.w[l] * mom + st.grad.w[l];
            velocity.b[l] = velocity.b[l] * mom + st.grad.b[l];
          }
          t = 0;
          std::as_const(velocity).for_each([&](auto view) {
            const auto v = view.to_vector();
            const auto [p, n] = home_tensors[t++];
            for (std::size_t k = 0; k < n; ++k)
              std::atomic_ref<float>(p[k]).fetch_sub(lr * v[k], std::memory_order_relaxed);
          });
          const double loss = st.loss.item();
          std::lock_guard lock(result_mutex);
          record(result, o, result.curve.size() + 1, epoch, loss, start, last, last_step);
        }
      });
    });
    detail::run_parallel(work);
    // Every worker has joined: the home copy is plain memory again.
    std::get<0>(replicas_) = home.template to<home_device>();
    result.seconds = std::chrono::duration<double>(clock::now() - start).count();
    result.examples = result.curve.size() * o.batch;
    return result;
  }

  void record(fit_result& r, const fit_options& o, std::size_t step, std::size_t epoch, double loss,
              std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point& last,
              std::size_t& last_step) {
    const auto now = std::chrono::steady_clock::now();
    progress p;
    p.step = step;
    p.epoch = epoch;
    p.loss = loss;
    p.wall_seconds = std::chrono::duration<double>(now - start).count();
    if (o.log_every != 0 && step % o.log_every == 0) {
      const double dt = std::chrono::duration<double>(now - last).count();
      const std::size_t steps = step - last_step;
      p.examples_per_sec = dt > 0 ? double(steps * o.batch) / dt : 0;
      p.sec_per_batch = steps > 0 ? dt / double(steps) : 0;
      last = now;
      last_step = step;
      o.print(detail::progress_line(p, device_count));
    }
    r.curve.push_back(p);
  }

  model_type model_;
  sgd opt_;
  std::tuple<mlp_params<float, Ds>...> replicas_;
  std::tuple<mlp_params<float, Ds>...> velocity_;
};

}  // namespace locus::train
