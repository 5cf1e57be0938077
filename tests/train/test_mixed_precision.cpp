// Mixed precision: locus::ad on bfloat16 and half values (derivatives computed in float, rounded
// once at the store; sums accumulated in float), and train::mixed<bfloat16>(model): float master
// weights, the passes in bfloat16, every policy unchanged.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/train/mixed_precision.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <unistd.h>

using namespace locus;
using namespace locus::train;
using locus_test::flat;
using locus_test::quiet;
using locus_test::synthetic;
namespace nn = locus::train::nn;

namespace {
/// v rounded to H and back: inputs both precisions hold exactly, so that only the 16-bit passes'
/// own rounding separates their gradients from float's.
template <class H>
std::vector<float> representable(std::vector<float> v) {
  for (auto& x : v) x = float(H(x));
  return v;
}

/// The largest |a - b| over the largest |b|: a 16-bit gradient against float's.
template <class A>
double relative_error(const A& a16, const std::vector<float>& b) {
  const auto a = a16.to_vector();
  REQUIRE(a.size() == b.size());
  double m = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(double(float(a[i])) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  REQUIRE(scale > 0);
  return m / scale;
}

/// The largest |a - b| over the largest |b|: flat gradients, the mixed model's against float's.
double flat_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  REQUIRE(scale > 0);
  return m / scale;
}

template <class H, class D, int R>
tensor<H, D, R> narrow(const tensor<float, D, R>& t) {
  return on<D>(cast<H>(t));
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/locus_" + name + "_" + std::to_string(::getpid());
}

template <class D>
auto batch_on(std::size_t n, std::uint64_t seed) {
  auto data = synthetic(n, seed);
  return std::pair{to<D>(data.images), to<D>(data.labels)};
}
}  // namespace

using half_cases = std::tuple<bfloat16, locus::half>;

TEMPLATE_LIST_TEST_CASE("ad differentiates 16-bit values: its gradients are float's within the type's precision",
                        "[ad][half]", half_cases) {
  using H = TestType;
  using D = gpu<1>;
  const auto xs = representable<H>(locus_test::random_values<float>(6 * 5, -1, 1, 1));
  const auto ws = representable<H>(locus_test::random_values<float>(5 * 4, -1, 1, 2));
  const auto bs = representable<H>(locus_test::random_values<float>(4, -1, 1, 3));
  const tensor<float, D, 2> xf(shape{6, 5}, xs), wf(shape{5, 4}, ws);
  const tensor<float, D, 1> bf(shape{4}, bs);
  const auto xh = narrow<H>(xf);
  const auto wh = narrow<H>(wf);
  const auto bh = narrow<H>(bf);
  // Elementwise steps (one used twice), a product, a broadcast bias, a column, a mean: the same
  // function of float or 16-bit values.
  auto f = [](auto& p, const auto& x) {
    auto& [W, b] = p;
    auto h = ad::keep(tanh(matmul(x, W) + b));
    auto s = ad::sum<1>(h * h);  // float: a sum of 16-bit values
    return ad::mean(cast<float>(sigmoid(h)) * col(s) + exp(cast<float>(h) * 0.5f));
  };
  auto rf = ad::value_and_grad(f, std::tie(wf, bf), xf);
  auto rh = ad::value_and_grad(f, std::tie(wh, bh), xh);
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(std::get<0>(rh.grad))>, tensor<H, D, 2>>);
  STATIC_REQUIRE(std::is_same_v<decltype(rh.loss), tensor<float, D, 0>>);
  const double tol = std::is_same_v<H, bfloat16> ? 0.03 : 0.004;  // a few units of 2^-8 / 2^-11
  CHECK(std::abs(double(rh.loss.item()) - double(rf.loss.item())) <= tol * std::abs(double(rf.loss.item())));
  CHECK(relative_error(std::get<0>(rh.grad), std::get<0>(rf.grad).to_vector()) <= tol);
  CHECK(relative_error(std::get<1>(rh.grad), std::get<1>(rf.grad).to_vector()) <= tol);

  // The classifier's loss: 16-bit logits widened for softmax_cross_entropy.
  const tensor<std::int32_t, D> y(shape{6}, std::vector<std::int32_t>{0, 1, 2, 3, 1, 0});
  auto g = [](auto& p, const auto& x, const auto& labels) {
    auto& [W, b] = p;
    return softmax_cross_entropy(cast<float>(matmul(x, W) + b), labels);
  };
  auto cf = ad::value_and_grad(g, std::tie(wf, bf), xf, y);
  auto ch = ad::value_and_grad(g, std::tie(wh, bh), xh, y);
  CHECK(relative_error(std::get<0>(ch.grad), std::get<0>(cf.grad).to_vector()) <= tol);
  CHECK(relative_error(std::get<1>(ch.grad), std::get<1>(cf.grad).to_vector()) <= tol);
}

TEST_CASE("a 16-bit gradient summed over a broadcast axis accumulates in float and rounds once", "[ad][half]") {
  using D = gpu<0>;
  // d/db sum(x + b) over 4096 rows is 4096 for each element of b: a bfloat16 accumulator stalls at
  // 256 (256 + 1 rounds back to 256), a float one reaches 4096, which bfloat16 holds exactly.
  const tensor<bfloat16, D, 2> x(shape{4096, 3}, bfloat16(0.f));
  const tensor<bfloat16, D, 1> b(shape{3}, bfloat16(0.5f));
  auto f = [](auto& p, const auto& rows) { return ad::sum(rows + p); };
  auto r = ad::value_and_grad(f, b, x);
  STATIC_REQUIRE(std::is_same_v<decltype(r.loss), tensor<float, D, 0>>);  // sums of bfloat16 are float
  CHECK(r.loss.item() == 6144.f);
  for (auto v : r.grad.to_vector()) CHECK(float(v) == 4096.f);
  // A rank-0 parameter spread over every element likewise.
  const tensor<bfloat16, D, 0> s(shape<0>{}, bfloat16(1.f));
  auto rs = ad::value_and_grad([](auto& p, const auto& rows) { return ad::sum(rows * p); }, s, x);
  CHECK(float(rs.grad.item()) == 0.f);
  auto ones = ad::value_and_grad([](auto& p, const auto& rows) { return ad::mean(rows + p); }, s, x);
  CHECK(float(ones.grad.item()) == 1.f);  // 12288 * (1 / 12288), summed in float
}

TEST_CASE("cast to a 16-bit type passes the gradient through, NaN and infinities stay themselves", "[ad][half]") {
  using D = cpu;
  const tensor<float, D, 1> w(shape{3}, std::vector<float>{0.1f, 1e30f, -2.f});
  // d/dw sum(cast<float>(cast<bfloat16>(w) * 3)) = 3: rounding's derivative is taken as 1.
  auto f = [](auto& p) { return ad::sum(cast<float>(cast<bfloat16>(p) * 3.f)); };
  auto g = ad::grad(f, w);
  CHECK(g.to_vector() == std::vector<float>{3.f, 3.f, 3.f});
  // A non-finite upstream stays non-finite through the 16-bit passes (the trainer's finite check
  // sees it): log(0) is -inf, its derivative 1/0.
  const tensor<bfloat16, D, 1> z(shape{2}, std::vector<bfloat16>{bfloat16(0.f), bfloat16(2.f)});
  auto gz = ad::grad([](auto& p) { return ad::sum(cast<float>(log(p))); }, z).to_vector();
  CHECK(std::isinf(float(gz[0])));
  CHECK(float(gz[1]) == 0.5f);
}

TEST_CASE("mixed<bfloat16>: float masters, a step computed in bfloat16 within its precision of float's",
          "[train][half]") {
  using D = gpu<1>;
  sequential mlp{nn::dense(16, 32), nn::relu, nn::dropout(0.25), nn::dense(32, 4)};
  const auto mixed_mlp = mixed<bfloat16>(mlp);
  using M = std::remove_cvref_t<decltype(mixed_mlp)>;
  STATIC_REQUIRE(std::is_same_v<M::params<D>, decltype(mlp)::params<D>>);  // the masters are float
  STATIC_REQUIRE(model_on<M, D>);
  const auto p = mixed_mlp.init<D>();
  CHECK(flat(p) == flat(mlp.init<D>()));
  auto [x, y] = batch_on<D>(64, 5);
  // The same dropout stream: the same masks in both precisions.
  auto sf = mlp.loss_and_grad(p, x, y, 7);
  auto sh = mixed_mlp.loss_and_grad(p, x, y, 7);
  STATIC_REQUIRE(std::is_same_v<decltype(sh.grad), M::params<D>>);
  CHECK(std::abs(double(sh.loss.item()) - double(sf.loss.item())) <= 0.02 * double(sf.loss.item()));
  const auto gf = flat(sf.grad), gh = flat(sh.grad);
  CHECK(flat_relative_error(gh, gf) <= 0.03);
  CHECK(gh != gf);  // computed in bfloat16 indeed (not the float path)
  // Evaluation runs the float model.
  CHECK(mixed_mlp.loss(p, x, y).item() == mlp.loss(p, x, y).item());
  CHECK(mixed_mlp.predict(p, x).to_vector() == mlp.predict(p, x).to_vector());
  CHECK(mixed_mlp.classes() == 4);
}

TEST_CASE("mixed<bfloat16>: a convolutional model's step (conv2d and pooling in float inside)", "[train][half]") {
  using D = gpu<0>;
  sequential cnn{nn::reshape(shape{1, 4, 4}), nn::conv2d(1, 3, 3, {.padding = 1}), nn::relu, nn::max_pool2d(2),
                 nn::flatten, nn::dense(12, 4)};
  const auto mixed_cnn = mixed<bfloat16>(cnn);
  const auto p = cnn.init<D>();
  auto [x, y] = batch_on<D>(32, 6);
  auto sf = cnn.loss_and_grad(p, x, y);
  auto sh = mixed_cnn.loss_and_grad(p, x, y);
  const auto gf = flat(sf.grad), gh = flat(sh.grad);
  CHECK(flat_relative_error(gh, gf) <= 0.03);
}

// The trainers below share a few model types (sequential<dense, relu, dense>, and one functional
// regression): each distinct (policy, devices, model) instantiates a trainer, the largest part of
// this file's compile time.
TEST_CASE("mixed<bfloat16> trains on two GPUs with sync_average and hogwild", "[train][half]") {
  auto data = synthetic(2048, 8);
  const auto test = synthetic(512, 9);
  sequential mlp{nn::dense(16, 32), nn::relu, nn::dense(32, 4)};
  data_parallel<sync_average, gpu<0>, gpu<1>> sync{mixed<bfloat16>(mlp), sgd{0.2f, 0.9f}};
  data_parallel<sync_average, gpu<0>, gpu<1>> reference{mlp, sgd{0.2f, 0.9f}};
  const double before = sync.accuracy(test);
  const auto r = sync.fit(data, quiet(6, 64));
  const auto rf = reference.fit(data, quiet(6, 64));
  CHECK(sync.accuracy(test) > 0.85);
  CHECK(sync.accuracy(test) > before + 0.3);
  CHECK(std::abs(sync.accuracy(test) - reference.accuracy(test)) <= 0.03);
  REQUIRE(r.curve.size() == rf.curve.size());
  CHECK(std::abs(r.curve.front().loss - rf.curve.front().loss) <= 0.02 * rf.curve.front().loss);
  CHECK(sync.parameters() != reference.parameters());

  data_parallel<hogwild, gpu<0>, gpu<1>> async{mixed<bfloat16>(mlp), sgd{0.2f, 0.9f}};
  async.fit(data, quiet(6, 64));
  CHECK(async.accuracy(test) > 0.85);
  // The trained parameters come back in the model's own (float) type.
  auto p = mlp.init<gpu<0>>();
  async.parameters_into(p);
  CHECK(flat(p) == async.parameters());
}

namespace {
/// At namespace scope: nvcc's front end sees a forward lambda written inside a test's body as an
/// incomplete type when mixed_precision checks the model in its class body.
auto classifier_model() {
  return functional{parameters{nn::glorot(16, 32), nn::zeros(32), nn::glorot(32, 4), nn::zeros(4)},
                    [](const auto& p, const auto& x) {
                      const auto& [w1, b1, w2, b2] = p;
                      return matmul(tanh(matmul(x, w1) + b1), w2) + b2;
                    }};
}
}  // namespace

TEST_CASE("mixed<bfloat16> of a functional model: its forward gets bfloat16 vars, the loss float", "[train][half]") {
  using D = gpu<1>;
  const auto model = classifier_model();
  const auto m = mixed<bfloat16>(model);
  STATIC_REQUIRE(model_on<std::remove_cvref_t<decltype(m)>, D>);
  const auto p = model.init<D>();
  auto [x, y] = batch_on<D>(64, 4);
  auto sf = model.loss_and_grad(p, x, y);
  auto sh = m.loss_and_grad(p, x, y);
  CHECK(std::abs(double(sh.loss.item()) - double(sf.loss.item())) <= 0.02 * double(sf.loss.item()));
  const auto gf = flat(sf.grad), gh = flat(sh.grad);
  CHECK(flat_relative_error(gh, gf) <= 0.03);
  CHECK(gh != gf);
  CHECK(m.predict(p, x).to_vector() == model.predict(p, x).to_vector());
}

TEST_CASE("mixed<bfloat16>: a checkpoint holds the float masters, and a resumed run is the uninterrupted one",
          "[train][half][checkpoint]") {
  const auto path = temp_path("mixed");
  auto data = synthetic(512, 4);
  sequential mlp{nn::dense(16, 16), nn::relu, nn::dense(16, 4)};
  auto o = quiet(2, 64);  // 2 epochs of 8 steps
  data_parallel<sync_average, gpu<0>, gpu<1>> whole{mixed<bfloat16>(mlp), adamw{1e-2f}};
  whole.fit(data, o);
  data_parallel<sync_average, gpu<0>, gpu<1>> first{mixed<bfloat16>(mlp), adamw{1e-2f}};
  auto half_way = o;
  half_way.max_steps = 11;
  half_way.checkpoint_path = path;
  first.fit(data, half_way);
  data_parallel<sync_average, gpu<0>, gpu<1>> resumed{mixed<bfloat16>(mlp), adamw{1e-2f}};
  auto rest = o;
  rest.checkpoint_path = path;
  CHECK(resumed.fit(data, rest).resumed_from == 11);
  CHECK(resumed.parameters() == whole.parameters());
  // The masters (written again at the resumed fit's end) load into the float model's trainer.
  data_parallel<sync_average, gpu<0>, gpu<1>> as_float{mlp, adamw{1e-2f}};
  as_float.load(path);
  CHECK(as_float.parameters() == resumed.parameters());
  std::remove(path.c_str());
}

TEST_CASE("float16's loss scale: 2^16 at first, halved by a non-finite step, doubled after 2000 finite ones",
          "[train][half]") {
  train::detail::loss_scaler s;
  CHECK(s.scale() == 65536.0);
  CHECK(s.back_off());
  CHECK(s.scale() == 32768.0);
  for (int i = 0; i < 1999; ++i) s.finite_step();
  CHECK(s.scale() == 32768.0);
  CHECK(s.clean() == 1999);
  CHECK(s.back_off());  // the count starts again
  CHECK(s.scale() == 16384.0);
  CHECK(s.clean() == 0);
  for (int i = 0; i < 2000; ++i) s.finite_step();
  CHECK(s.scale() == 32768.0);
  for (int i = 0; i < 39; ++i) CHECK(s.back_off());  // 2^15 down to 2^-24
  CHECK(s.scale() == 0x1p-24);
  CHECK_FALSE(s.back_off());  // no scale left: the policies apply on_non_finite
  CHECK(s.scale() == 0x1p-24);
  const train::detail::loss_scaler copy(s);
  s.finite_step();
  CHECK(copy.clean() == 0);  // a copy is its own
  s.restore(0x1p63, 1999);
  s.finite_step();
  CHECK(s.scale() == 0x1p64);
  s.restore(0x1p64, 1999);
  s.finite_step();
  CHECK(s.scale() == 0x1p64);  // the largest
}

TEST_CASE("a 16-bit parameter read by many steps sums its gradient in float and rounds once", "[ad][half]") {
  // 512 steps each add 1 to d/dw: a bfloat16 running sum stops at 256 (256 + 1 rounds to 256).
  const tensor<bfloat16, gpu<0>, 1> w(shape{1}, bfloat16(1.f));
  auto f = [](auto& W) {
    auto acc = ad::sum(W * 1.f);
    for (int i = 1; i < 512; ++i) acc = ad::evaluate(acc + ad::sum(W * 1.f));
    return acc;
  };
  CHECK(float(ad::grad(f, w).item()) == 512.f);
  // half: 3000 contributions of 1 (a half running sum stops at 2048); 3000 rounds to 3000 in half.
  const tensor<locus::half, cpu, 0> h(shape<0>{}, locus::half(2.f));
  auto g = [](auto& H) {
    auto acc = ad::sum(H * 1.f);
    for (int i = 1; i < 3000; ++i) acc = ad::evaluate(acc + ad::sum(H * 1.f));
    return acc;
  };
  CHECK(float(ad::grad(g, h).item()) == 3000.f);
  // The same over 512 backward passes into one parameter, its gradient read after each: a read
  // rounds a copy and keeps the float sum.
  auto W = ad::parameter(w);
  for (int i = 0; i < 512; ++i) {
    ad::backward(ad::evaluate(ad::sum(cast<float>(W) * 1.f)));
    CHECK(float(W.grad().item()) == float(bfloat16(float(i + 1))));
  }
  CHECK(float(W.take_grad().item()) == 512.f);
}

TEST_CASE("mixed<half>: a moved-from wrapper keeps its scale (a move copies)", "[train][half]") {
  sequential mlp{nn::dense(16, 8), nn::relu, nn::dense(8, 4)};
  auto m = mixed<locus::half>(mlp);
  auto moved = std::move(m);
  REQUIRE(m.loss_scaler() != nullptr);  // NOLINT(bugprone-use-after-move): what is tested
  CHECK(moved.loss_scaler() != m.loss_scaler());
  const auto p = mlp.init<cpu>();
  auto [x, y] = batch_on<cpu>(16, 2);
  CHECK(std::isfinite(m.loss_and_grad(p, x, y).loss.item()));
  data_parallel<sync_average, gpu<0>, gpu<1>> t{m, sgd{0.1f}};
  CHECK(t.fit(synthetic(64, 1), quiet(1, 32)).steps == 2);
}

TEST_CASE("mixed<half>: a forward pass that overflows float16 is on_non_finite's, not the scale's",
          "[train][half]") {
  // Features of 1e5 are inf in float16: no loss scale helps, the loss itself is not finite.
  auto x = on<cpu>(random::uniform<float>(shape{128, 16}, 3, 0.0, 1.0));
  for (std::size_t j = 0; j < 16; ++j) x(0, j) = 1e5f;
  std::vector<std::int32_t> labels(128, 1);
  const auto data = data::make_dataset(x, tensor<std::int32_t, cpu>(labels), 4);
  sequential mlp{nn::dense(16, 8), nn::relu, nn::dense(8, 4)};
  auto o = quiet(1, 128);  // one batch: it holds the row of 1e5
  data_parallel<sync_average, gpu<0>, gpu<1>> sync{mixed<locus::half>(mlp), sgd{0.1f}};
  CHECK_THROWS_AS(sync.fit(data, o), non_finite_error);
  CHECK(sync.state().loss_scale == 65536.0);  // not halved: it was not the backward pass
  auto skip = o;
  skip.on_non_finite = non_finite::skip_step;
  data_parallel<sync_average, gpu<0>, gpu<1>> skipping{mixed<locus::half>(mlp), sgd{0.1f}};
  CHECK(skipping.fit(data, skip).skipped == 1);
}

namespace {
/// Targets in the thousands: a float16 gradient scaled by 2^16 overflows, so the first steps of a
/// float16 run are skipped until the scale has come down.
data::labelled_images large_targets(std::size_t n, std::uint64_t seed) {
  const auto x = on<cpu>(random::uniform<float>(shape{n, 16}, seed, 0.0, 1.0));
  std::vector<float> t(n);
  for (std::size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (std::size_t j = 0; j < 16; ++j) sum += x(i, j);
    t[i] = 300.f * sum;
  }
  return data::make_dataset(x, tensor<float, cpu, 2>(shape{n, 1}, t));
}

auto regression_model() {
  return functional{parameters{nn::glorot(16, 8), nn::zeros(8), nn::glorot(8, 1), nn::zeros(1)},
                    [](const auto& p, const auto& x) {
                      const auto& [w1, b1, w2, b2] = p;
                      return matmul(relu(matmul(x, w1) + b1), w2) + b2;
                    },
                    losses::mean_squared_error};
}
}  // namespace

TEST_CASE("mixed<half>: a step's gradient is float's within float16's precision (scaled, then unscaled)",
          "[train][half]") {
  using D = gpu<1>;
  sequential mlp{nn::dense(16, 32), nn::relu, nn::dense(32, 4)};
  const auto m = mixed<locus::half>(mlp);
  CHECK(m.loss_scaler()->scale() == 65536.0);
  const auto p = mlp.init<D>();
  auto [x, y] = batch_on<D>(64, 5);
  auto sf = mlp.loss_and_grad(p, x, y);
  auto sh = m.loss_and_grad(p, x, y);
  CHECK(std::abs(double(sh.loss.item()) - double(sf.loss.item())) <= 0.005 * double(sf.loss.item()));
  const auto gf = flat(sf.grad), gh = flat(sh.grad);
  CHECK(flat_relative_error(gh, gf) <= 0.005);
  CHECK(gh != gf);
}

TEST_CASE("mixed<half> under every policy: overflowing steps are skipped and halve the scale, whatever "
          "on_non_finite says, and a checkpoint keeps the scale and a resumed run is the uninterrupted one",
          "[train][half][checkpoint]") {
  const auto data = large_targets(1024, 3);
  const auto model = regression_model();
  auto o = quiet(2, 64);  // on_non_finite: throw_error, the default
  data_parallel<sync_average, gpu<0>, gpu<1>> sync{mixed<locus::half>(model), sgd{1e-6f}};
  const auto r = sync.fit(data, o);
  CHECK(r.skipped > 0);
  CHECK(r.skipped < r.steps);
  const auto s = sync.state();
  CHECK(s.loss_scale < 65536.0);
  CHECK(s.loss_scale == std::ldexp(65536.0, -int(r.skipped)));  // each skipped step halved it once
  for (float v : sync.parameters()) REQUIRE(std::isfinite(v));
  CHECK(r.curve.back().loss < r.curve.front().loss);
  {
    data_parallel<hogwild, gpu<0>, gpu<1>> async{mixed<locus::half>(model), sgd{1e-6f}};
    const auto ra = async.fit(data, o);
    CHECK(ra.skipped > 0);
    for (float v : async.parameters()) REQUIRE(std::isfinite(v));
    // A feature of 1e5 is inf in float16: that forward pass is on_non_finite's (throw_error).
    auto features = data.images.to_vector();
    for (std::size_t j = 0; j < 16; ++j) features[j] = 1e5f;
    const auto overflowing = data::make_dataset(features, 16, data.targets.to_vector(), 1);
    data_parallel<hogwild, gpu<0>, gpu<1>> failing{mixed<locus::half>(model), sgd{1e-6f}};
    CHECK_THROWS_AS(failing.fit(overflowing, o), non_finite_error);
    data_parallel<local_sgd, gpu<0>, gpu<1>> local{mixed<locus::half>(model), sgd{1e-6f}};
    auto stop = o;
    stop.on_non_finite = non_finite::stop;  // does not stop: the scale handles it
    const auto rl = local.fit(data, stop);
    CHECK_FALSE(rl.stopped);
    CHECK(rl.skipped > 0);
    for (const auto& e : rl.curve) CHECK(e.loss > 1e5);  // a skipped step reports its (finite) loss too
    CHECK(local.state().loss_scale == std::ldexp(65536.0, -int(rl.skipped)));  // halved once a step
  }
  // Resumed from a checkpoint taken after the skipped steps: the same scale, the same run.
  const auto path = temp_path("mixed_half");
  data_parallel<sync_average, gpu<0>, gpu<1>> first{mixed<locus::half>(model), sgd{1e-6f}};
  auto part = o;
  part.max_steps = 20;
  part.checkpoint_path = path;
  first.fit(data, part);
  CHECK(checkpoint::load(path).loss_scale == first.state().loss_scale);
  data_parallel<sync_average, gpu<0>, gpu<1>> resumed{mixed<locus::half>(model), sgd{1e-6f}};
  auto rest = o;
  rest.checkpoint_path = path;
  CHECK(resumed.fit(data, rest).resumed_from == 20);
  CHECK(resumed.parameters() == sync.parameters());
  CHECK(resumed.state().loss_scale == s.loss_scale);
  std::remove(path.c_str());
}
