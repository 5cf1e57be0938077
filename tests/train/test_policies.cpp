// The policy concept, the policies' own options, local SGD and gradient accumulation.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

using namespace locus;
using namespace locus::train;
using namespace locus_test;

namespace {
/// The README's user-written policy: replica 0 trains alone, the others take its parameters at the
/// end (a baseline), written against the public concept only.
struct first_device_only {
  using communicator = dist::in_process;
  static constexpr const char* name = "first_device_only";

  template <class Set>
  void run(fit_context<Set>& c) const {
    auto& s = c.replicas;
    std::size_t step = 0;
    s.home([&](auto& r) {
      using D = typename std::remove_cvref_t<decltype(r)>::device_type;
      for (std::size_t epoch = 0; epoch < c.options.epochs; ++epoch) {
        const auto order = data::shuffled(c.data.size(), c.options.seed, epoch);
        for (std::size_t first = 0; first + c.options.batch <= c.data.size() && step < c.total_steps;
             first += c.options.batch) {
          auto [x, y] = data::gather<D>(c.data, order, first, c.options.batch);
          const double loss = r.model().loss_and_grad(x, y);
          r.step(c.lr(step), r.model().gradients());
          c.step_done(++step, epoch, loss);
        }
      }
    });
    s.set_parameters(s.parameters());
  }
};

template <class P>
concept has_recipe = requires(const P& p, fit_options& o) { p.recipe(o); };

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}
}  // namespace

TEST_CASE("the built-in policies and a user's meet the concept, other types do not", "[train][policy]") {
  STATIC_REQUIRE(policy<sync_average>);
  STATIC_REQUIRE(policy<hogwild>);
  STATIC_REQUIRE(policy<local_sgd>);
  STATIC_REQUIRE(policy<mpi<sync_average>>);
  STATIC_REQUIRE(policy<nccl<local_sgd>>);
  STATIC_REQUIRE(policy<first_device_only>);
  STATIC_REQUIRE(policy_for<first_device_only, cpu>);
  STATIC_REQUIRE_FALSE(policy<int>);
  STATIC_REQUIRE_FALSE(policy<sgd>);
  STATIC_REQUIRE(std::is_same_v<mpi<hogwild>, basic_hogwild<dist::mpi>>);
  STATIC_REQUIRE(std::is_same_v<typename sync_average::communicator, dist::automatic>);
}

TEST_CASE("the default communicator sums in process on host-run devices", "[train][policy][dist]") {
  mlp<float> model({16, 4}, 1);
  data_parallel<sync_average, cpu> one{model, sgd{}};
  CHECK(one.communicator_name() == "in_process");
#if LOCUS_HAS_GPUS && !LOCUS_HAS_CUDA
  data_parallel<sync_average, gpu<0>, gpu<1>> two{model, sgd{}};
  CHECK(two.communicator_name() == "in_process");  // emulated GPUs: no NCCL
#endif
}

#if LOCUS_HAS_GPUS
TEST_CASE("a replica set holds its devices at run time: one type for every list of the same kinds", "[train][policy]") {
  // The typed surface names the devices; the code below it is compiled once per kind of device.
  using two = data_parallel<sync_average, gpu<0>, gpu<1>>::set_type;
  STATIC_REQUIRE(std::is_same_v<two, data_parallel<sync_average, gpu<0>, gpu<1>, gpu<2>, gpu<3>>::set_type>);
  STATIC_REQUIRE(std::is_same_v<two, data_parallel<sync_average, gpu<1>>::set_type>);
  STATIC_REQUIRE(std::is_same_v<data_parallel<sync_average, cpu, gpu<0>>::set_type,
                                data_parallel<local_sgd, gpu<1>, cpu>::set_type>);
  STATIC_REQUIRE_FALSE(std::is_same_v<data_parallel<sync_average, cpu>::set_type, two>);

  if (gpu_count() < 2) configure_logical_gpus(2);
  data_parallel<sync_average, gpu<1>, cpu, gpu<0>> t{mlp<float>({16, 8, 4}, 3), sgd{0.1f}};
  auto& s = t.replicas();
  REQUIRE(s.device_count() == 3);
  CHECK(s.devices() == std::vector<device_id>{{device_kind::gpu, 1}, {device_kind::cpu, 0}, {device_kind::gpu, 0}});
  // Each replica in the list's order, its code compiled for its kind, inside its device's scope:
  // any_gpu is the replica's GPU there, and its tensors live on it.
  std::vector<std::string> seen;
  s.each([&](auto& r) {
    using C = typename std::remove_cvref_t<decltype(r)>::device_type;
    std::string where = r.device().name();
    if constexpr (is_gpu_v<C>) {
      where += device_id(id_of<any_gpu>) == r.device() ? " (current)" : " (not current)";
      where += backend::owns(r.device(), r.buffer().data()) ? " owns its buffer" : " does not own its buffer";
    }
    seen.push_back(std::to_string(r.index()) + " " + where);
  });
  CHECK(seen == std::vector<std::string>{"0 /gpu:1 (current) owns its buffer", "1 /cpu:0",
                                         "2 /gpu:0 (current) owns its buffer"});
  CHECK(error_of([&] { s.at(3, [](auto&) {}); }) ==
        "locus: replica_set: replica 3 of a set of 3 (this process's replicas count from 0)");
  // The communicator takes one buffer per replica, in order: a list of another length is refused
  // before anything is summed.
  auto buffers = s.buffers(4);
  buffers.pop_back();
  CHECK(error_of([&] { s.comm().all_reduce_sum(buffers); }) ==
        "locus: communicator: 2 buffers for a group of 3 devices (one per replica, in the group's order)");
  // A run-time device list the set's kinds do not hold is refused by name, not left out.
  using gpus_only = replica_set_for<dist::in_process, gpu<0>>;
  CHECK(error_of([&] {
          gpus_only wrong(locus::train::detail::make_group<dist::in_process, gpu<0>>(),
                          std::vector<device_id>{{device_kind::gpu, 0}, {device_kind::cpu, 0}}, mlp<float>({16, 8, 4}, 3),
                          sgd{0.1f});
        }) == "locus: replica_set: /job:localhost/replica:0/task:0/device:CPU:0 is not of the set's kinds of device "
              "(any_gpu); make the set with replica_set_for<Kind, Devices...>");
  // And it trains like the typed list it came from.
  auto data = synthetic(512, 2);
  const double before = t.accuracy(data);
  t.fit(data, quiet(2, 48));
  CHECK(t.accuracy(data) > before + 0.1);
  const auto p0 = s.at(0, [](auto& r) { return to_host(r.model().parameters()); });
  CHECK(p0 == s.at(1, [](auto& r) { return to_host(r.model().parameters()); }));
  CHECK(p0 == s.at(2, [](auto& r) { return to_host(r.model().parameters()); }));
}
#endif

TEST_CASE("a user-written policy trains through data_parallel", "[train][policy]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  data_parallel<first_device_only, cpu> mine{model, sgd{0.1f, 0.9f}};
  data_parallel<sync_average, cpu> reference{model, sgd{0.1f, 0.9f}};
  const auto r = mine.fit(data, quiet(2, 64));
  reference.fit(data, quiet(2, 64));
  CHECK(r.curve.size() == 16);
  CHECK(r.steps == 16);
  CHECK(mine.state().steps == 16);
  CHECK(mine.parameters() == reference.parameters());  // the same steps, exactly
  // Checkpoints during fit are for policies that declare them.
  auto o = quiet(1, 64);
  o.checkpoint_path = "/tmp/never-written.ckpt";
  CHECK(error_of([&] { mine.fit(data, o); }) ==
        "locus: fit: first_device_only does not write checkpoints during fit; call save() after fit");
}

TEST_CASE("hogwild's recipe fills what the options leave unset, and nothing else", "[train][policy][hogwild]") {
  fit_options o;
  hogwild{}.recipe(o);
  CHECK(o.schedule == lr_schedule::cosine);
  CHECK(o.warmup_steps == std::size_t(20));
  fit_options mine;
  mine.schedule = lr_schedule::constant;
  mine.warmup_steps = 0;
  hogwild{}.recipe(mine);
  CHECK(mine.schedule == lr_schedule::constant);
  CHECK(mine.warmup_steps == std::size_t(0));
  // sync_average has no recipe: the options stay unset (constant, no warmup).
  STATIC_REQUIRE_FALSE(has_recipe<sync_average>);
  STATIC_REQUIRE(has_recipe<hogwild>);
}

TEST_CASE("local_sgd with period 1 follows sync_average's trajectory", "[train][policy][local_sgd]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
#if LOCUS_HAS_GPUS
  data_parallel<sync_average, cpu, gpu<0>> sync{model, sgd{0.1f, 0.9f}};
  data_parallel<local_sgd, cpu, gpu<0>> local{model, sgd{0.1f, 0.9f}, local_sgd{.period = 1}};
  data_parallel<local_sgd, cpu, gpu<0>> rare{model, sgd{0.1f, 0.9f}, local_sgd{.period = 8}};
#else
  data_parallel<sync_average, cpu> sync{model, sgd{0.1f, 0.9f}};
  data_parallel<local_sgd, cpu> local{model, sgd{0.1f, 0.9f}, local_sgd{.period = 1}};
  data_parallel<local_sgd, cpu> rare{model, sgd{0.1f, 0.9f}, local_sgd{.period = 8}};
#endif
  const double before = rare.accuracy(data);
  sync.fit(data, quiet(2, 64));
  const auto r = local.fit(data, quiet(2, 64));
  rare.fit(data, quiet(2, 64));
  CHECK(r.curve.size() == 16);
  // The step is linear in the gradient: averaging after the step equals stepping with the average,
  // up to the rounding of the sums (16 steps).
  CHECK(max_difference(local.parameters(), sync.parameters()) < 1e-5);
#if LOCUS_HAS_GPUS
  // With two replicas, averaging every 8 steps is another trajectory (and still learns).
  CHECK(max_difference(rare.parameters(), sync.parameters()) > 1e-4);
#endif
  CHECK(rare.accuracy(data) > before + 0.1);
  // After fit every replica holds the average: the trained parameters are the same on each.
  CHECK(rare.state().optimizer_state.size() == local.state().optimizer_state.size());
  CHECK_THROWS_WITH(
      (data_parallel<local_sgd, cpu>{model, sgd{}, local_sgd{.period = 0}}.fit(data, quiet(1, 64))),
      "locus: local_sgd: period must be at least 1");
}

TEST_CASE("gradient accumulation: k micro-batches of b equal one batch of k*b", "[train][policy][accumulate]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  data_parallel<sync_average, cpu> whole{model, sgd{0.1f, 0.9f}};
  data_parallel<sync_average, cpu> four{model, sgd{0.1f, 0.9f}, sync_average{.accumulate = 4}};
  const auto a = whole.fit(data, quiet(2, 128));
  const auto b = four.fit(data, quiet(2, 128));  // micro-batches of 32
  CHECK(b.curve.size() == a.curve.size());
  CHECK(max_difference(whole.parameters(), four.parameters()) < 1e-5);
  for (std::size_t i = 0; i < a.curve.size(); ++i) CHECK(b.curve[i].loss == Approx(a.curve[i].loss).epsilon(1e-5));
#if LOCUS_HAS_GPUS
  data_parallel<sync_average, cpu, gpu<0>> two{model, sgd{0.1f, 0.9f}, sync_average{.accumulate = 2}};
  two.fit(data, quiet(2, 128));  // 2 replicas x 2 micro-batches of 32
  CHECK(max_difference(whole.parameters(), two.parameters()) < 1e-5);
  // A batch that does not split into replicas x micro-batches is refused before any step.
  const auto before = two.parameters();
  CHECK(error_of([&] { two.fit(data, quiet(1, 102)); }) ==
        "locus: fit: sync_average splits the batch evenly: 102 is not a multiple of 2 replicas (1 rank x 2 "
        "devices) x 2 micro-batches");
  CHECK(two.parameters() == before);
#endif
  CHECK_THROWS_WITH((data_parallel<sync_average, cpu>{model, sgd{}, sync_average{.accumulate = 0}}.fit(data, quiet(1, 64))),
                    "locus: sync_average: accumulate must be at least 1");
}

TEST_CASE("clip_norm: sync_average scales the mean gradient down to the norm given, reports the norm, and "
          "changes nothing below it",
          "[train][policy][clip]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  const float lr = 0.5f;
  // One step of plain sgd: the parameters move by lr times the (clipped) mean gradient.
  auto one_step = [&](auto& t, float clip) {
    auto o = quiet(1, 128);
    o.max_steps = 1;
    o.clip_norm = clip;
    const auto before = t.parameters();
    const auto r = t.fit(data, o);
    const auto after = t.parameters();
    double squares = 0;
    for (std::size_t i = 0; i < after.size(); ++i) squares += double(after[i] - before[i]) * double(after[i] - before[i]);
    REQUIRE(r.curve.size() == 1);
    return std::pair{std::sqrt(squares), r.curve[0].grad_norm};
  };
  data_parallel<sync_average, cpu> free{model, sgd{lr, 0.f}};
  const auto [moved, unmeasured] = one_step(free, 0.f);
  CHECK(unmeasured == 0.0);  // no clipping, no norm computed
  const double norm = moved / double(lr);
  REQUIRE(norm > 0.01);
  // Above the norm: the same step, bit for bit, and the norm reported.
  data_parallel<sync_average, cpu> loose{model, sgd{lr, 0.f}};
  const auto [moved_loose, reported] = one_step(loose, float(2 * norm));
  CHECK(loose.parameters() == free.parameters());
  CHECK(reported == Approx(norm).epsilon(1e-4));
  // Below it: a step of length lr * clip_norm, in the gradient's direction.
  const float clip = float(norm / 2);
  data_parallel<sync_average, cpu> tight{model, sgd{lr, 0.f}};
  const auto [moved_tight, reported_tight] = one_step(tight, clip);
  CHECK(moved_tight == Approx(double(lr) * double(clip)).epsilon(1e-3));
  CHECK(reported_tight == Approx(norm).epsilon(1e-4));
  const auto start = data_parallel<sync_average, cpu>{model, sgd{lr, 0.f}}.parameters();
  const auto p_free = free.parameters(), p_tight = tight.parameters();
  for (std::size_t i = 0; i < start.size(); ++i)
    CHECK(double(p_tight[i] - start[i]) == Approx(double(p_free[i] - start[i]) * 0.5).margin(1e-6));
#if LOCUS_HAS_GPUS
  // Two replicas (the exchanged buffers): the norm of the mean over both, the same clipped step.
  data_parallel<sync_average, cpu, gpu<0>> two{model, sgd{lr, 0.f}};
  const auto [moved_two, reported_two] = one_step(two, clip);
  CHECK(moved_two == Approx(double(lr) * double(clip)).epsilon(1e-3));
  CHECK(reported_two == Approx(norm).epsilon(1e-4));
  CHECK(max_difference(two.parameters(), tight.parameters()) < 1e-5);
#endif
  // The progress lines name the norm.
  std::vector<std::string> lines;
  auto o = quiet(1, 128);
  o.log_every = 1;
  o.clip_norm = 1.f;
  o.print = [&](const std::string& line) { lines.push_back(line); };
  data_parallel<sync_average, cpu>{model, sgd{lr, 0.f}}.fit(data, o);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].find("(epoch 1; grad norm ") != std::string::npos);
  // Refused before any step: a norm that is negative, NaN or infinite, and a policy that does not clip.
  data_parallel<sync_average, cpu> t{model, sgd{lr, 0.f}};
  const auto before = t.parameters();
  const std::pair<float, const char*> refused[] = {{-1.f, "-1"},
                                                   {-1e-30f, "-1e-30"},
                                                   {std::numeric_limits<float>::quiet_NaN(), "nan"},
                                                   {std::numeric_limits<float>::infinity(), "inf"}};
  for (const auto& [bad, text] : refused) {
    auto b = quiet(1, 64);
    b.clip_norm = bad;
    CHECK(error_of([&] { t.fit(data, b); }) ==
          std::string("locus: fit: clip_norm ") + text +
              ": the gradient's largest norm must be finite and positive (0: no clipping)");
  }
  CHECK(t.parameters() == before);
  auto c = quiet(1, 64);
  c.clip_norm = 1e-7f;
  data_parallel<hogwild, cpu> h{model, sgd{lr, 0.f}};
  CHECK(error_of([&] { h.fit(data, c); }) ==
        "locus: fit: hogwild does not clip gradients (fit_options::clip_norm 1e-07); sync_average does, or leave "
        "clip_norm at 0");
  data_parallel<local_sgd, cpu> l{model, sgd{lr, 0.f}};
  CHECK(error_of([&] { l.fit(data, c); }).rfind("locus: fit: local_sgd does not clip gradients", 0) == 0);
}

namespace {
/// softmax regression whose weight gradient is 1e38 in every element: finite, its norm past FLT_MAX.
struct huge_gradient : softmax_regression<float> {
  using softmax_regression::softmax_regression;
  template <device D>
  auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) const {
    auto s = softmax_regression::loss_and_grad(p, x, y);
    s.grad.w = s.grad.w * 0.f + 1e38f;
    s.grad.b = s.grad.b * 0.f;
    return s;
  }
};
}  // namespace

TEST_CASE("clip_norm: a finite gradient whose norm passes FLT_MAX is clipped, not dropped", "[train][policy][clip]") {
  huge_gradient model(16, 4);  // 64 weights: |g| = 8e38
  auto data = synthetic(512, 2);
  auto o = quiet(1, 64);
  o.max_steps = 1;
  o.clip_norm = 1.f;
  data_parallel<sync_average, cpu> t{model, sgd{1.f, 0.f}};
  const auto before = t.parameters();
  const auto r = t.fit(data, o);
  CHECK(r.curve.at(0).grad_norm == Approx(8e38).epsilon(1e-6));
  CHECK(double(t.parameters()[0] - before[0]) == Approx(-0.125).epsilon(1e-5));  // 1e38 * 1 / 8e38
}

namespace {
// The README's example policy ("Writing a policy"), verbatim between the markers
// (cmake/readme-snippets-check.cmake checks that README.md holds it).
// snippet: clipped_average
/// Synchronous averaging in one process, the mean gradient's global norm clipped to max_norm (0: off).
struct clipped_average {
  using communicator = locus::dist::in_process;
  static constexpr const char* name = "clipped_average";
  static constexpr bool checkpoints = true;  // between steps its state is the replicas' parameters and optimiser states
  float max_norm = 0;

  template <class Set>
  void check(const locus::train::fit_options& o, const Set& s) const {
    if (o.batch % s.replica_count() != 0) throw locus::config_error("clipped_average: the batch must split evenly");
  }

  template <class Set>
  void run(locus::train::fit_context<Set>& c) const {
    auto& s = c.replicas;
    const std::size_t n = s.parameter_count(), batch = c.options.batch, per_epoch = c.data.size() / batch;
    const float mean = 1.f / float(s.replica_count());
    std::vector<std::uint32_t> order;
    // A resumed fit starts after the steps its checkpoint had done, in the same epoch and batch.
    for (std::size_t step = c.resumed_from; step < c.total_steps; ++step) {
      const std::size_t epoch = step / per_epoch, first = step % per_epoch * batch;
      if (order.empty() || first == 0) order = locus::data::shuffled(c.data.size(), c.options.seed, epoch);
      std::vector<double> losses(s.device_count());
      s.run([&](auto& r) {  // each replica: the gradient of its shard of the batch, into its flat buffer
        using D = typename std::remove_cvref_t<decltype(r)>::device_type;
        const auto mine = locus::data::shard_of(first, batch, s.first_replica() + r.index(), s.replica_count());
        auto [x, y] = locus::data::gather<D>(c.data, order, mine.first, mine.count);
        losses[r.index()] = r.model().loss_and_grad(x, y);
        r.model().pack_gradients(locus::tensor_view<float, D, 1>(r.buffer().data(), locus::shape{n}));
      });
      s.comm().all_reduce_sum(s.buffers(n));  // every buffer now holds the sum of the gradients
      const double norm = s.home([&](auto& h) {  // the norm of the mean, on the first device
        using H = typename std::remove_cvref_t<decltype(h)>::device_type;
        const locus::tensor_view<const float, H, 1> sum(h.buffer().data(), locus::shape{n});
        return mean * std::sqrt(Set::template squared_norm<H>(std::vector{sum}));
      });
      const float clip = max_norm > 0 && norm > max_norm ? float(max_norm / norm) : 1.f;
      s.run([&](auto& r) {  // the same step on every replica: the sum, scaled to the clipped mean
        using D = typename std::remove_cvref_t<decltype(r)>::device_type;
        r.step(c.lr(step), locus::train::segments<const float, D>(r.buffer().data(), r.model().parameters()),
               mean * clip);
      });
      double loss = 0;
      for (double l : losses) loss += l * mean;
      c.step_done(step + 1, epoch, loss, true, norm);
    }
  }
};
// end snippet
}  // namespace

TEST_CASE("the README's policy: sync_average's steps without clipping, its clipping with it, exact resumption",
          "[train][policy][clip]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  auto o = quiet(2, 64);
#if LOCUS_HAS_GPUS
  using pair = data_parallel<sync_average, cpu, gpu<0>>;
  using mine = data_parallel<clipped_average, cpu, gpu<0>>;
#else
  using pair = data_parallel<sync_average, cpu>;
  using mine = data_parallel<clipped_average, cpu>;
#endif
  pair reference{model, adam{1e-2f}};
  mine off{model, adam{1e-2f}};
  reference.fit(data, o);
  const auto r = off.fit(data, o);
  CHECK(off.parameters() == reference.parameters());  // the same sums, the same steps, bit for bit
  REQUIRE(r.curve.size() == 16);
  CHECK(r.curve[0].grad_norm > 0.1);
  // Clipped below every step's norm: as sync_average with clip_norm.
  o.clip_norm = 0.1f;
  pair reference_clipped{model, adam{1e-2f}};
  reference_clipped.fit(data, o);
  o.clip_norm = 0;
  mine clipped{model, adam{1e-2f}, clipped_average{.max_norm = 0.1f}};
  clipped.fit(data, o);
  CHECK(max_difference(clipped.parameters(), reference_clipped.parameters()) < 1e-6);
  CHECK(max_difference(clipped.parameters(), off.parameters()) > 1e-3);
  // Interrupted after 5 steps and resumed from its checkpoint: the uninterrupted run's parameters.
  const auto path = (std::filesystem::temp_directory_path() / "locus_clipped_average_resume.ckpt").string();
  std::filesystem::remove(path);
  auto first = quiet(2, 64);
  first.checkpoint_path = path;
  first.max_steps = 5;
  mine a{model, adam{1e-2f}, clipped_average{.max_norm = 0.1f}};
  a.fit(data, first);
  mine b{model, adam{1e-2f}, clipped_average{.max_norm = 0.1f}};
  auto rest = quiet(2, 64);
  rest.checkpoint_path = path;
  const auto resumed = b.fit(data, rest);
  CHECK(resumed.resumed_from == 5);
  CHECK(b.parameters() == clipped.parameters());
  std::filesystem::remove(path);
#if LOCUS_HAS_GPUS
  CHECK(error_of([&] { mine{model, sgd{}}.fit(data, quiet(1, 63)); }) == "clipped_average: the batch must split evenly");
#endif
}

#if LOCUS_HAS_GPUS
TEST_CASE("the finite check reads a gradient of many tensors in one host wait, and misses no element",
          "[train][policy][faults]") {
  using V = tensor_view<const float, gpu<1>, 1>;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  tensor<float, gpu<1>> w(shape{1000}, -big), b(shape{3}, 0.f), empty(shape{0}), last(shape{7}, 1e-30f);
  const std::vector<V> views{V(w.data(), shape{1000}), V(empty.data(), shape{0}), V(b.data(), shape{3}),
                             V(last.data(), shape{7})};
  const auto waits = host_waits(id_of<gpu<1>>);
  CHECK(train::detail::all_finite<gpu<1>>(views));  // the largest finite magnitudes are finite
  CHECK(host_waits(id_of<gpu<1>>) == waits + 1);
  CHECK(train::detail::all_finite<gpu<1>>(std::vector<V>{}));
  CHECK(train::detail::all_finite<gpu<1>>(std::vector<V>{V(empty.data(), shape{0})}));
  CHECK(host_waits(id_of<gpu<1>>) == waits + 1);  // nothing to read
  for (const float bad : {inf, -inf, nan, -nan}) {
    for (auto* t : {&w, &b, &last}) {
      const std::vector<float> before = t->to_vector();
      locus::transfer(tensor_view<float, gpu<1>, 1>(t->data() + t->size() - 1, shape{1}),
                      tensor_view<const float, cpu, 1>(&bad, shape{1}));
      CHECK_FALSE(train::detail::all_finite<gpu<1>>(views));
      locus::transfer(tensor_view<float, gpu<1>, 1>(t->data(), shape{before.size()}),
                      tensor_view<const float, cpu, 1>(before.data(), shape{before.size()}));
    }
  }
  CHECK(train::detail::all_finite<gpu<1>>(views));
}
#endif

#if LOCUS_HAS_GPUS
TEST_CASE("a sync_average step makes the host wait once, for its loss, failure flag and finite check together",
          "[train][policy][counters]") {
  mlp<float> model({16, 12, 4}, 5);
  const auto data = synthetic(512, 2);
  const device_id g0 = id_of<gpu<0>>, g1 = id_of<gpu<1>>;
  // The waits per step of a fit of 6 steps, with the trainer's set-up (its first fit) left out.
  const auto per_step = [&](auto& trainer, device_id d) {
    auto o = quiet(1, 64);
    o.max_steps = 2;
    trainer.fit(data, o);
    const auto before = host_waits(d);
    o.max_steps = 6;
    REQUIRE(trainer.fit(data, o).curve.size() == 6);
    return double(host_waits(d) - before) / 6.0;
  };
  data_parallel<sync_average, gpu<0>> one{model, sgd{0.1f, 0.9f}};
  CHECK(per_step(one, g0) == 1.0);
  data_parallel<sync_average, gpu<1>> micro{model, sgd{0.1f, 0.9f}, sync_average{.accumulate = 4}};
  CHECK(per_step(micro, g1) == 1.0);  // four micro-batches' losses summed on the device
  // Two GPUs: the one read on the home device, and the in-process exchange's copies between the two
  // (each copy between GPUs returns complete: one wait on each side, two copies a step).
  data_parallel<sync_average, gpu<0>, gpu<1>> two{model, sgd{0.1f, 0.9f}};
  CHECK(per_step(two, g0) == 3.0);
  CHECK(per_step(two, g1) == 2.0);
  // The loss read that way is the loss: the mean over the replicas of their shards' mean losses.
  data_parallel<sync_average, gpu<0>> reference{model, sgd{0.1f, 0.9f}};
  data_parallel<sync_average, gpu<0>, gpu<1>> again{model, sgd{0.1f, 0.9f}};
  const auto a = reference.fit(data, quiet(1, 64));
  const auto b = again.fit(data, quiet(1, 64));
  REQUIRE(a.curve.size() == b.curve.size());
  for (std::size_t i = 0; i < a.curve.size(); ++i) CHECK(b.curve[i].loss == Approx(a.curve[i].loss).epsilon(1e-5));
}
#endif

#if LOCUS_HAS_GPUS
TEST_CASE("non-finite steps on GPUs: the loss and the finite check read together still catch each NaN",
          "[train][policy][faults]") {
  const auto data = synthetic(512, 3);
  for (bool loss : {true, false}) {
    INFO("NaN in the " << (loss ? "loss" : "gradient"));
    {  // two GPUs: the exchanged gradient and the summed loss
      data_parallel<sync_average, gpu<0>, gpu<1>> t{poisoned_model(16, 4, 6, loss), sgd{0.1f, 0.9f}};
      const auto message = error_of([&] { t.fit(data, quiet(1, 64)); });
      CHECK(message.rfind("locus: fit: step 4: the loss (", 0) == 0);  // call 6 is replica 0's 4th
    }
    {  // one GPU, micro-batches: the loss summed on the device
      auto o = quiet(1, 64);
      o.on_non_finite = non_finite::skip_step;
      data_parallel<sync_average, gpu<1>> t{poisoned_model(16, 4, 5, loss), sgd{0.1f, 0.9f},
                                            sync_average{.accumulate = 2}};
      CHECK(t.fit(data, o).skipped == 1);
      const auto p = t.parameters();
      CHECK(std::all_of(p.begin(), p.end(), [](float v) { return std::isfinite(v); }));
    }
    const auto stops_at_3 = [&]<class Policy>(Policy policy) {
      auto o = quiet(1, 64);
      o.on_non_finite = non_finite::stop;
      data_parallel<Policy, gpu<1>> t{poisoned_model(16, 4, 3, loss), sgd{0.1f, 0.9f}, policy};
      const auto r = t.fit(data, o);
      CHECK(r.stopped);
      CHECK(r.curve.size() == 3);
    };
    stops_at_3(hogwild{.lookahead = false});
    stops_at_3(local_sgd{});
  }
}
#endif

#if LOCUS_HAS_GPUS
namespace {
/// Emulated GPUs take a resident training set's device path while it lives (CUDA GPUs always do).
struct resident_path {
  resident_path() { data::detail::resident_on_host_run_devices = true; }
  ~resident_path() { data::detail::resident_on_host_run_devices = false; }
  resident_path(const resident_path&) = delete;
  resident_path& operator=(const resident_path&) = delete;
};
}  // namespace

TEST_CASE("data::resident gathers what data::gather does, labels and float targets, and refuses a bad order",
          "[data][resident]") {
  const resident_path device_path;
  const auto labelled = synthetic(40, 3);
  std::vector<float> features(40 * 3), values(40 * 2);
  for (std::size_t i = 0; i < features.size(); ++i) features[i] = float(i) * 0.25f;
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = -float(i);
  const auto regression = data::make_dataset(std::span<const float>(features), 3, std::span<const float>(values), 2);
  const auto order = data::shuffled(40, 7, 1);
  for (const auto* set : {&labelled, &regression}) {
    data::resident<gpu<1>> rows(*set);
    CHECK(rows.holds(*set));
    CHECK_FALSE(rows.holds(set == &labelled ? regression : labelled));
    for (const auto& [first, count] : std::vector<std::pair<std::size_t, std::size_t>>{{0, 40}, {13, 9}, {39, 1}, {40, 0}}) {
      INFO("rows " << first << " + " << count);
      auto [x, y] = rows.gather(order, first, count);
      auto [hx, hy] = data::gather<gpu<1>>(*set, order, first, count);
      CHECK(x.shape() == hx.shape());
      CHECK(x.to_vector() == hx.to_vector());
      CHECK(y.labels.to_vector() == hy.labels.to_vector());
      CHECK(y.values.shape() == hy.values.shape());
      CHECK(y.values.to_vector() == hy.values.to_vector());
    }
    CHECK(rows.order_uploads() == 1);  // one order: uploaded once
    const auto next = data::shuffled(40, 7, 2);
    auto [x2, y2] = rows.gather(next, 0, 8);
    CHECK(rows.order_uploads() == 2);
    CHECK(x2.to_vector() == data::gather<gpu<1>>(*set, next, 0, 8).first.to_vector());
    // Another order whose entries for this batch differ from the held one's: uploaded, never the
    // held order's rows (only the entries a batch uses are compared: no upload when they agree).
    auto other = next;
    std::swap(other[3], other[30]);
    CHECK(rows.gather(other, 0, 8).first.to_vector() == data::gather<gpu<1>>(*set, other, 0, 8).first.to_vector());
    CHECK(rows.order_uploads() == 3);
    (void)rows.gather(next, 10, 8);  // entries 10..17 of next and other agree
    CHECK(rows.order_uploads() == 3);
  }
  data::resident<gpu<0>> rows(labelled);
  auto shorter = order;
  shorter.pop_back();
  CHECK_THROWS_WITH((void)rows.gather(shorter, 0, 4), Catch::Contains("an order of 39 over 40 rows"));
  auto bad = order;
  bad[5] = 40;
  CHECK_THROWS_WITH((void)rows.gather(bad, 0, 4), Catch::Contains("order[5] = 40 past the 40 rows"));
  CHECK(rows.order_uploads() == 0);  // nothing taken from a refused order
  CHECK_THROWS_WITH((void)rows.gather(order, 38, 3), Catch::Contains("rows [38, 38 + 3) of an order of 40"));
  CHECK_THROWS_WITH((void)rows.gather(order, std::size_t(-1), 2), Catch::Contains("rows [18446744073709551615, "));
  CHECK_THROWS_AS((void)rows.gather(order, 1, std::size_t(-1)), shape_error);
  (void)rows.gather(order, 0, 4);
  bad = order;
  bad[2] = 4000000000u;  // an entry of the batch past the rows, in an order of the right length
  CHECK_THROWS_WITH((void)rows.gather(bad, 0, 4), Catch::Contains("order[2] = 4000000000 past the 40 rows"));
  CHECK_THROWS_AS((void)data::resident<gpu<0>>{}.gather(order, 0, 1), config_error);
  CHECK_FALSE(data::resident<gpu<0>>{}.holds(labelled));
  // A set whose tensors are replaced after the copy is not held (read on the host), rows or labels.
  auto changing = synthetic(40, 3);
  data::resident<gpu<0>> copy(changing);
  REQUIRE(copy.holds(changing));
  changing.images = on<cpu>(changing.images * 2.f);
  CHECK_FALSE(copy.holds(changing));
  auto relabelled = synthetic(40, 3);
  data::resident<gpu<0>> copy2(relabelled);
  relabelled.labels = tensor<std::int32_t, cpu>(std::vector<std::int32_t>(40, 1));
  CHECK_FALSE(copy2.holds(relabelled));
}

TEST_CASE("a training set kept on the GPUs: the host path's steps bit for bit, uploaded once a fit, each epoch's "
          "order once, two kernels a batch, freed after",
          "[train][policy][resident]") {
  mlp<float> model({16, 12, 4}, 5);
  const auto data = synthetic(512, 2);
  const auto on_device = quiet(2, 64);  // 8 steps an epoch, 16 in all
  auto on_host = on_device;
  on_host.data_on_device_limit = 0;
  const resident_path device_path;
  const auto same_steps = [&](auto& a, auto& b) {
    const auto ra = a.fit(data, on_host);
    const auto rb = b.fit(data, on_device);
    REQUIRE(ra.curve.size() == rb.curve.size());
    for (std::size_t i = 0; i < ra.curve.size(); ++i) CHECK(ra.curve[i].loss == rb.curve[i].loss);
    CHECK(a.parameters() == b.parameters());
  };
  {
    data_parallel<sync_average, gpu<0>, gpu<1>> a{model, sgd{0.1f, 0.9f}}, b{model, sgd{0.1f, 0.9f}};
    same_steps(a, b);
  }
  {
    data_parallel<sync_average, gpu<1>> a{model, adamw{1e-2f}, sync_average{.accumulate = 2}},
        b{model, adamw{1e-2f}, sync_average{.accumulate = 2}};
    same_steps(a, b);
  }
  {
    data_parallel<local_sgd, gpu<0>, gpu<1>> a{model, sgd{0.1f, 0.9f}}, b{model, sgd{0.1f, 0.9f}};
    same_steps(a, b);
  }
  {
    data_parallel<hogwild, gpu<0>> a{model, sgd{0.1f, 0.9f}}, b{model, sgd{0.1f, 0.9f}};  // one worker: deterministic
    same_steps(a, b);
  }
  {
    // A set whose rows are replaced between epochs (on_epoch) is read on the host from then on: the
    // device copy never serves the old rows.
    auto changing = synthetic(512, 2);
    const auto flip = [&](const epoch_summary&) {
      changing.images = on<cpu>(1.f - changing.images);
      return true;
    };
    auto host_flip = on_host, device_flip = on_device;
    host_flip.on_epoch = device_flip.on_epoch = flip;
    data_parallel<sync_average, gpu<0>, gpu<1>> a{model, sgd{0.1f, 0.9f}}, b{model, sgd{0.1f, 0.9f}};
    const auto ra = a.fit(changing, host_flip);
    changing = synthetic(512, 2);
    const auto rb = b.fit(changing, device_flip);
    REQUIRE(ra.curve.size() == rb.curve.size());
    CHECK(ra.curve.back().loss == rb.curve.back().loss);
    CHECK(a.parameters() == b.parameters());
  }
#if !LOCUS_HAS_CUDA
  // Emulated GPUs: the host path writes a batch in place (no wait, no kernel), so what the device
  // path adds is exactly its uploads and its gathers. On replica 1 (no exchange reads of its own).
  const device_id g1 = id_of<gpu<1>>;
  data_parallel<sync_average, gpu<0>, gpu<1>> t{model, sgd{0.1f, 0.9f}};
  (void)t.fit(data, on_host);  // the trainer's first-fit set-up left out
  const auto live = memory_stats(g1).live_bytes;
  const auto w0 = host_waits(g1), l0 = kernel_launches(g1);
  (void)t.fit(data, on_host);
  const auto w1 = host_waits(g1), l1 = kernel_launches(g1);
  (void)t.fit(data, on_device);
  const auto w2 = host_waits(g1), l2 = kernel_launches(g1);
  CHECK((w2 - w1) - (w1 - w0) == 2 + 2);   // the rows and labels once, each of the 2 epochs' orders once
  CHECK((l2 - l1) - (l1 - l0) == 2 * 16);  // x and y: one kernel each, 16 batches
  CHECK(memory_stats(g1).live_bytes == live);  // the copy freed when the fit ends
  // A set past the limit takes the host path.
  auto small_limit = on_device;
  small_limit.data_on_device_limit = data::bytes_of(data) - 1;
  const auto w3 = host_waits(g1);
  (void)t.fit(data, small_limit);
  CHECK(host_waits(g1) - w3 == w1 - w0);
#endif
}
#endif
