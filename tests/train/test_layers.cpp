// Models written forward only: train::mlp on locus::ad against the hand-written backward pass,
// train::sequential and train::functional through data_parallel with both policies, dropout, the
// kernels one step launches and the arena's allocations.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/train/layers.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

using namespace locus;
using namespace locus::train;
using locus_test::flat;
using locus_test::quiet;
using locus_test::synthetic;
namespace nn = locus::train::nn;

namespace {
template <class D>
auto batch_on(std::size_t n, std::uint64_t seed) {
  auto data = synthetic(n, seed);
  return std::pair{to<D>(data.images), to<D>(data.labels)};
}

template <class P>
std::vector<float> flat_grad(const P& g) {
  return flat(g);
}

/// The largest difference between two flat parameter vectors, relative to max(1, |b|).
double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - double(b[i])) / std::max(1.0, std::abs(double(b[i]))));
  return m;
}

/// What one model step launches on D: forward + backward.
template <class D, class M>
std::size_t launches_of_step(const M& m, const typename M::template params<D>& p, const tensor<float, D, 2>& x,
                             const tensor<std::int32_t, D>& y) {
  const auto before = kernel_launches(id_of<D>);
  auto s = m.loss_and_grad(p, x, y);
  (void)s;
  return kernel_launches(id_of<D>) - before;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("mlp's gradients from ad equal the hand-written backward pass", "[train][ad]", locus_test::devices) {
  using D = TestType;
  auto [x, y] = batch_on<D>(96, 3);
  for (const auto& sizes : {std::vector<std::size_t>{16, 4}, {16, 12, 4}, {16, 32, 12, 4}}) {
    mlp<float> autodiff(sizes, 5);
    handwritten_mlp<float> by_hand(sizes, 5);
    const auto p = autodiff.init<D>();
    auto a = autodiff.loss_and_grad(p, x, y);
    auto h = by_hand.loss_and_grad(p, x, y);
    CHECK(a.loss.item() == Approx(h.loss.item()).epsilon(1e-6));
    CHECK(max_difference(flat_grad(a.grad), flat_grad(h.grad)) <= 1e-5);
  }
}

TEST_CASE("sequential starts from mlp's weights and computes its loss and gradients", "[train][ad]") {
  sequential model{nn::dense(16, 12), nn::relu, nn::dense(12, 8), nn::relu, nn::dense(8, 4)};
  const auto seeded = model.with_seed(5);
  mlp<float> reference({16, 12, 8, 4}, 5);
  const auto p = seeded.init<cpu>();
  const auto q = reference.init<cpu>();
  CHECK(flat(p) == flat(q));
  auto [x, y] = batch_on<cpu>(64, 4);
  auto a = seeded.loss_and_grad(p, x, y);
  auto b = reference.loss_and_grad(q, x, y);
  CHECK(a.loss.item() == b.loss.item());
  CHECK(max_difference(flat(a.grad), flat(b.grad)) <= 1e-6);
  CHECK(seeded.predict(p, x).to_vector() == reference.predict(q, x).to_vector());
}

TEST_CASE("layer models meet model_on for every device", "[train][ad]") {
  using S = sequential<nn::dense, nn::activation<nn::relu_fn>, nn::dense>;
  STATIC_REQUIRE(model_on<S, cpu>);
#if LOCUS_HAS_GPUS
  STATIC_REQUIRE(model_on<S, gpu<0>>);
  STATIC_REQUIRE(model_on<S, gpu<3>>);
#endif
  [[maybe_unused]] auto forward = [](const auto& p, const auto& x) {
    const auto& [w, b] = p;
    return matmul(x, w) + b;
  };
  using F = decltype(functional{parameters{nn::glorot(4, 3), nn::zeros(3)}, forward});
  STATIC_REQUIRE(model_on<F, cpu>);
  STATIC_REQUIRE(model_on<mlp<float>, cpu>);
  STATIC_REQUIRE(model_on<handwritten_mlp<float>, cpu>);
#if LOCUS_HAS_GPUS
  STATIC_REQUIRE(model_on<F, gpu<1>>);
  STATIC_REQUIRE(model_on<mlp<float>, gpu<1>>);
  STATIC_REQUIRE(model_on<handwritten_mlp<float>, gpu<1>>);
#endif
}

#if LOCUS_HAS_GPUS
TEST_CASE("a functional model trains on two GPUs with both policies", "[train][ad]") {
  auto data = synthetic(2048, 8);
  const auto test = synthetic(512, 9);
  functional model{parameters{nn::glorot(16, 32), nn::zeros(32), nn::glorot(32, 4), nn::zeros(4)},
                   [](const auto& p, const auto& x) {
                     const auto& [w1, b1, w2, b2] = p;
                     return matmul(tanh(matmul(x, w1) + b1), w2) + b2;
                   }};
  data_parallel<sync_average, gpu<0>, gpu<1>> sync{model, sgd{0.2f, 0.9f}};
  const double before = sync.accuracy(test);
  sync.fit(data, quiet(6, 64));
  CHECK(sync.accuracy(test) > 0.85);
  CHECK(sync.accuracy(test) > before + 0.3);
  data_parallel<hogwild, gpu<0>, gpu<1>> async{model, sgd{0.2f, 0.9f}};
  async.fit(data, quiet(6, 64));
  CHECK(async.accuracy(test) > 0.85);
  // The trained parameters come back in the model's own type.
  auto p = model.init<gpu<0>>();
  sync.parameters_into(p);
  CHECK(flat(p) == sync.parameters());
}
#endif

TEST_CASE("sequential with dropout: masks while training, the identity when predicting", "[train][ad]") {
  sequential model{nn::dense(16, 64), nn::relu, nn::dropout(0.5), nn::dense(64, 4)};
  const auto p = model.init<cpu>();
  auto [x, y] = batch_on<cpu>(32, 5);
  // Predicting twice gives the same classes; the logits equal those of the model without dropout.
  sequential plain{nn::dense(16, 64), nn::relu, nn::dense(64, 4)};
  const auto q = plain.init<cpu>();
  CHECK(flat(p) == flat(q));
  CHECK(model.logits(p, x).to_vector() == plain.logits(q, x).to_vector());
  CHECK(model.predict(p, x).to_vector() == model.predict(p, x).to_vector());
  // Training: each step draws another mask, so two steps' gradients differ; about half of the
  // second layer's input rows are dropped, so its weight gradient has zero rows.
  auto a = model.loss_and_grad(p, x, y);
  auto b = model.loss_and_grad(p, x, y);
  CHECK(flat(a.grad) != flat(b.grad));
  const auto& g2 = std::get<0>(std::get<3>(a.grad.tensors));  // dense(64, 4)'s weight gradient
  const auto g = g2.to_vector();
  CHECK(std::isfinite(a.loss.item()));
  std::size_t zero_entries = 0;
  for (float v : g) zero_entries += v == 0.f;
  CHECK(zero_entries > 0);
  CHECK_THROWS_AS(nn::dropout(1.0), config_error);
  CHECK_THROWS_AS(nn::dropout(-0.1), config_error);
}

TEST_CASE("dropout sites: one pass, two sites, independent masks, and the same site the same mask", "[train][ad]") {
  const tensor<float, cpu> ones(shape{20000}, 1.f);
  const pass c{true, 77};
  const auto zeros_of = [](const tensor<float, cpu>& t) {
    std::size_t z = 0;
    for (float v : t.to_vector()) z += v == 0.f;
    return double(z) / double(t.size());
  };
  const nn::dropout half(0.5);
  tensor<float, cpu> a = half(ones, c.site(0)), b = half(ones, c.site(1)), a2 = half(ones, c.site(0));
  CHECK(a.to_vector() == a2.to_vector());
  CHECK(a.to_vector() != b.to_vector());
  CHECK(std::abs(zeros_of(a) - 0.5) < 0.02);
  // Two dropouts in a row keep a quarter with two sites (one site would keep half: the same mask).
  tensor<float, cpu> twice = half(half(ones, c.site(0)), c.site(1));
  CHECK(std::abs(zeros_of(twice) - 0.75) < 0.02);
  // Not training: the identity at every site.
  tensor<float, cpu> off = half(ones, pass{false, 77}.site(3));
  CHECK(off.to_vector() == ones.to_vector());
  CHECK(c.site(0).training);
  CHECK_FALSE(pass{}.site(0).training);
}

TEST_CASE("functional: a forward with the pass uses dropout, a loss of one's own reads the parameters",
          "[train][ad]") {
  auto [x, y] = batch_on<cpu>(64, 4);
  const auto inits = parameters{nn::glorot(16, 32), nn::zeros(32), nn::glorot(32, 4), nn::zeros(4)};
  const auto plain_forward = [](const auto& p, const auto& xs) {
    const auto& [w1, b1, w2, b2] = p;
    return matmul(tanh(matmul(xs, w1) + b1), w2) + b2;
  };
  const functional plain{inits, plain_forward};
  // The forward with the pass: dropout while training, the identity when predicting.
  const functional dropping{inits, [](const auto& p, const auto& xs, const pass& s) {
                              const auto& [w1, b1, w2, b2] = p;
                              return matmul(nn::dropout(0.5)(tanh(matmul(xs, w1) + b1), s.site(0)), w2) + b2;
                            }};
  const auto p = plain.init<cpu>();
  CHECK(flat(dropping.init<cpu>()) == flat(p));
  CHECK(dropping.predict(p, x).to_vector() == plain.predict(p, x).to_vector());
  const auto g1 = dropping.loss_and_grad(p, x, y), g2 = dropping.loss_and_grad(p, x, y);
  CHECK(flat(g1.grad) != flat(g2.grad));  // each call draws another mask
  CHECK(flat(g1.grad) != flat(plain.loss_and_grad(p, x, y).grad));
  CHECK(flat(dropping.loss_and_grad(p, x, y, 5).grad) == flat(dropping.loss_and_grad(p, x, y, 5).grad));
  // Cross-entropy plus L2 on the first weights, reading the parameters: d/dW1 gains 2 lambda W1.
  const float lambda = 0.25f;
  const functional decayed{inits, plain_forward, [lambda](const auto& out, const auto& labels, const auto& ps) {
                             const auto& w1 = std::get<0>(ps);
                             return softmax_cross_entropy(out, labels) + lambda * sum(w1 * w1);
                           }};
  const auto base = plain.loss_and_grad(p, x, y);
  const auto with = decayed.loss_and_grad(p, x, y);
  const auto w1 = std::get<0>(p.tensors).to_vector();
  double sq = 0;
  for (float v : w1) sq += double(v) * v;
  CHECK(std::abs(double(with.loss.item()) - double(base.loss.item()) - lambda * sq) < 1e-4 * std::max(1.0, sq));
  const auto gb = std::get<0>(base.grad.tensors).to_vector(), gw = std::get<0>(with.grad.tensors).to_vector();
  for (std::size_t i = 0; i < gb.size(); ++i) CHECK(std::abs(gw[i] - (gb[i] + 2 * lambda * w1[i])) < 1e-5f);
  CHECK(std::get<1>(with.grad.tensors).to_vector() == std::get<1>(base.grad.tensors).to_vector());
  // A loss of (output, labels) alone: the summed cross-entropy is rows x the mean's.
  const functional summed{inits, plain_forward, [](const auto& out, const auto& labels) {
                            return softmax_cross_entropy(out, labels) * 64.f;
                          }, 1};
  const auto gs = flat(summed.loss_and_grad(p, x, y).grad), gm = flat(base.grad);
  for (std::size_t i = 0; i < gs.size(); ++i) CHECK(std::abs(gs[i] - 64.f * gm[i]) < 1e-4f * std::max(1.f, std::abs(gs[i])));
  // The trainer takes all of it: dropout and a loss of one's own, trained to the same accuracy.
  const functional both{inits, [](const auto& ps, const auto& xs, const pass& s) {
                          const auto& [w1, b1, w2, b2] = ps;
                          return matmul(nn::dropout(0.1)(tanh(matmul(xs, w1) + b1), s.site(0)), w2) + b2;
                        },
                        [](const auto& out, const auto& labels, const auto& ps) {
                          return softmax_cross_entropy(out, labels) + 1e-4f * sum(std::get<2>(ps) * std::get<2>(ps));
                        }};
  const auto data = synthetic(2048, 8), test = synthetic(512, 9);
  data_parallel<sync_average, cpu> trainer{both, sgd{0.2f, 0.9f}};
  const double before = trainer.accuracy(test);
  (void)trainer.fit(data, quiet(6, 64));
  CHECK(trainer.accuracy(test) > 0.85);
  CHECK(trainer.accuracy(test) > before + 0.3);
}

TEST_CASE("ad::keep: a residual block's intermediate is computed once forward and once backward",
          "[train][ad]") {
  auto [x, y] = batch_on<cpu>(64, 2);
  const auto inits = parameters{nn::glorot(16, 16), nn::zeros(16), nn::glorot(16, 16), nn::zeros(16)};
  const functional twice{inits, [](const auto& p, const auto& xs) {
                           const auto& [w1, b1, w2, b2] = p;
                           const auto h = relu(matmul(xs, w1) + b1);  // an expression: run at each use
                           return matmul(h, w2) + b2 + h;
                         }};
  const functional once{inits, [](const auto& p, const auto& xs) {
                          const auto& [w1, b1, w2, b2] = p;
                          const auto h = ad::keep(relu(matmul(xs, w1) + b1));  // a value
                          return matmul(h, w2) + b2 + h;
                        }};
  const auto p = once.init<cpu>();
  const auto a = twice.loss_and_grad(p, x, y);
  const auto b = once.loss_and_grad(p, x, y);
  CHECK(std::abs(a.loss.item() - b.loss.item()) <= 1e-6f * std::max(1.f, std::abs(a.loss.item())));
  CHECK(max_difference(flat(b.grad), flat(a.grad)) <= 1e-5);
  CHECK(launches_of_step<cpu>(once, p, x, y) < launches_of_step<cpu>(twice, p, x, y));
  // Predicting (plain tensors): keep evaluates h once; written twice, its product runs twice.
  const auto predict_launches = [&](const auto& m) {
    const auto before = kernel_launches(id_of<cpu>);
    (void)m.predict(p, x);
    return kernel_launches(id_of<cpu>) - before;
  };
  CHECK(predict_launches(once) < predict_launches(twice));
  CHECK(once.predict(p, x).to_vector() == twice.predict(p, x).to_vector());
  // A tensor is handed on as it is (a reference for a named one), a var as it is.
  const tensor<float, cpu, 2> t(shape{2, 2}, 1.f);
  CHECK(ad::keep(t).data() == t.data());  // a view, no copy
  static_assert(std::is_same_v<decltype(ad::keep(t)), tensor_view<const float, cpu, 2>>);
  static_assert(std::is_same_v<decltype(ad::keep(tensor<float, cpu>(shape{2}, 1.f))), tensor<float, cpu>>);
  // `auto w = ad::keep(parameter)` in a forward serves training (a var) and predict (a view).
  const functional kept{inits, [](const auto& ps, const auto& xs) {
                          const auto& [w1, b1, w2, b2] = ps;
                          const auto w = ad::keep(w1);
                          const auto in = ad::keep(xs);
                          return matmul(relu(matmul(in, w) + b1), w2) + b2;
                        }};
  CHECK(kept.predict(p, x).to_vector() == functional{inits, [](const auto& ps, const auto& xs) {
                                            const auto& [w1, b1, w2, b2] = ps;
                                            return matmul(relu(matmul(xs, w1) + b1), w2) + b2;
                                          }}.predict(p, x).to_vector());
  CHECK(std::isfinite(kept.loss_and_grad(p, x, y).loss.item()));
}

TEST_CASE("a functional model takes any label of 0 or more, INT32_MAX included: it picks no class",
          "[train][ad][errors]") {
  auto data = synthetic(64, 3);
  data.labels.data()[5] = std::numeric_limits<std::int32_t>::max();
  const functional model{parameters{nn::glorot(16, 4), nn::zeros(4)}, [](const auto& p, const auto& x) {
                           const auto& [w, b] = p;
                           return matmul(x, w) + b;
                         }};
  data_parallel<sync_average, cpu> trainer{model, sgd{0.1f}};
  CHECK_NOTHROW((void)trainer.accuracy(data));
  CHECK_NOTHROW((void)trainer.fit(data, quiet(1, 16)));
  data.labels.data()[5] = -1;
  CHECK(locus_test::error_of([&] { (void)trainer.accuracy(data); }) ==
        "locus: accuracy: label 5 is -1: a label is a class, 0 or more");
}

TEST_CASE("sequential refuses layers that do not chain and batches of the wrong width", "[train][ad]") {
  CHECK(locus_test::error_of([] { sequential bad{nn::dense(4, 3), nn::relu, nn::dense(5, 2)}; }) ==
        "locus: sequential: layer 2 is dense(5, 2) after a layer of 3 outputs");
  CHECK_THROWS_AS(nn::dense(0, 3), shape_error);
  sequential model{nn::dense(16, 4)};
  const auto p = model.init<cpu>();
  const auto batch = batch_on<cpu>(8, 1);
  const auto& y = batch.second;
  tensor<float, cpu, 2> narrow(shape{8, 15}, 0.f);
  CHECK(locus_test::error_of([&] { (void)model.loss_and_grad(p, narrow, y); }) ==
        "locus: sequential: a batch of 15 features for 16 inputs");
}

TEST_CASE("sequential's classes are its last dense layer's outputs: fit and accuracy refuse other labels",
          "[train][ad][errors]") {
  sequential three{nn::dense(16, 8), nn::relu, nn::dense(8, 3), nn::tanh};
  CHECK(three.classes() == 3);
  auto data = synthetic(64, 3);  // labels 0 to 3
  std::size_t first_three = 0;
  while (data.labels.data()[first_three] != 3) ++first_three;
  data_parallel<sync_average, cpu> t{three, sgd{0.1f}};
  const auto before = t.parameters();
  const std::string why = "locus: fit: label " + std::to_string(first_three) +
                          " is 3, outside the model's classes [0, 3)";
  CHECK(locus_test::error_of([&] { (void)t.fit(data, quiet(1, 16)); }) == why);
  CHECK(t.parameters() == before);  // refused before the first step
  CHECK_THROWS_AS(t.accuracy(data), data::data_error);
  sequential four{nn::dense(16, 4)};
  data_parallel<sync_average, cpu> ok{four, sgd{0.1f}};
  CHECK(ok.fit(data, quiet(1, 16)).steps == 4);
}

TEST_CASE("one mlp step: ad launches as many kernels as the hand-written backward pass", "[train][ad]") {
  mlp<float> autodiff({784, 128, 64, 10}, 1);
  handwritten_mlp<float> by_hand({784, 128, 64, 10}, 1);
  const auto p = autodiff.init<cpu>();
  tensor<float, cpu, 2> x = on<cpu>(random::uniform<float>(shape{256, 784}, 3));
  tensor<std::int32_t, cpu> y(shape{256}, 3);
  const auto a = launches_of_step<cpu>(autodiff, p, x, y);
  const auto h = launches_of_step<cpu>(by_hand, p, x, y);
  // Hand-written: forward 8 (3 products, 3 bias(+relu) passes, the loss row kernel and its mean),
  // backward 10 (3 weight products, 2 input products, 3 bias sums, 2 relu masks). ad: the same;
  // the seed d loss / d loss is never written (softmax_cross_entropy's kept gradient is the
  // logits' gradient as it is) and the logits' gradient is handed to the product of `+ b` as it is.
  CHECK(h == 18);
  CHECK(a == 18);
}

TEST_CASE("after the first step a training step allocates nothing from the system", "[train][ad]") {
  sequential model{nn::dense(784, 128), nn::relu, nn::dense(128, 64), nn::relu, nn::dense(64, 10)};
  const auto p = model.init<cpu>();
  tensor<float, cpu, 2> x = on<cpu>(random::uniform<float>(shape{256, 784}, 3));
  tensor<std::int32_t, cpu> y(shape{256}, 3);
  { auto first = model.loss_and_grad(p, x, y); }
  const auto before = memory_stats(id_of<cpu>);
  for (int i = 0; i < 5; ++i) {
    auto s = model.loss_and_grad(p, x, y);
    CHECK(std::isfinite(s.loss.item()));
  }
  const auto after = memory_stats(id_of<cpu>);
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.reuses > before.reuses);
}

namespace {
template <class D, class T>
struct loss_case {
  using device_type = D;
  using value_type = T;
};
#if LOCUS_HAS_GPUS
using loss_cases = std::tuple<loss_case<cpu, float>, loss_case<gpu<1>, float>, loss_case<cpu, double>>;
#else
using loss_cases = std::tuple<loss_case<cpu, float>, loss_case<cpu, double>>;
#endif

/// Rows of 8 features in [-1, 1) and 2 float targets each: t = x A + c, plus noise of the given size.
data::dataset linear_targets(std::size_t n, std::uint64_t seed, float noise) {
  const auto x = on<cpu>(random::uniform<float>(shape{n, 8}, seed, -1.0, 1.0));
  const auto e = on<cpu>(random::uniform<float>(shape{n, 2}, seed + 1, -1.0, 1.0));
  std::vector<float> t(n * 2);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < 2; ++k) {
      float v = k == 0 ? 0.5f : -1.f;
      for (std::size_t j = 0; j < 8; ++j) v += x(i, j) * (k == 0 ? float(j) / 4.f - 1.f : (j % 2 ? 0.75f : -0.5f));
      t[i * 2 + k] = v + noise * e(i, k);
    }
  return data::make_dataset(x.to_vector(), 8, t, 2);
}

/// The mean absolute error, a final class (losses::regression wraps it, cannot derive from it).
struct mean_absolute_error final {
  auto operator()(const auto& z, const auto& t) const { return mean(abs(z - t)); }
};

/// A linear model of 8 features and 2 outputs on float targets, with the loss given.
template <class Loss>
auto linear_regression(Loss loss) {
  return functional{parameters{nn::glorot(8, 2), nn::zeros(2)},
                    [](const auto& p, const auto& x) {
                      const auto& [w, b] = p;
                      return matmul(x, w) + b;
                    },
                    loss};
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("losses of float targets: values and gradients of their formulas, zero and huge outputs too",
                        "[train][ad]", loss_cases) {
  using D = typename TestType::device_type;
  using T = typename TestType::value_type;
  // Outputs at 0 exactly (both kinks of the cross-entropy's stable form), far out on both sides
  // (no overflow), and ordinary; targets 0, 1 and in between.
  const std::vector<T> zs{T(0), T(0), T(0), T(-100), T(100), T(-100), T(100), T(0.7), T(-2.5), T(3)};
  const std::vector<T> ts{T(0), T(1), T(0.3), T(0), T(1), T(1), T(0), T(0.25), T(1), T(0)};
  const tensor<T, D, 2> z = to<D>(tensor<T, cpu, 2>(shape{5, 2}, zs));
  const tensor<T, D, 2> t = to<D>(tensor<T, cpu, 2>(shape{5, 2}, ts));
  const double n = 10, tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const auto mse = ad::value_and_grad([&](const auto& v) { return losses::mean_squared_error(v, t); }, z);
  const auto bce = ad::value_and_grad([&](const auto& v) { return losses::binary_cross_entropy(v, t); }, z);
  double mse_want = 0, bce_want = 0;
  const auto dm = mse.grad.to_vector(), db = bce.grad.to_vector();
  for (std::size_t i = 0; i < zs.size(); ++i) {
    const double zi = double(zs[i]), ti = double(ts[i]);
    mse_want += (zi - ti) * (zi - ti) / n;
    // -t log s(z) - (1 - t) log(1 - s(z)), s the logistic function, written out per side.
    bce_want += (zi >= 0 ? zi * (1 - ti) + std::log1p(std::exp(-zi)) : -zi * ti + std::log1p(std::exp(zi))) / n;
    CHECK(std::abs(double(dm[i]) - 2 * (zi - ti) / n) <= tol * 10);
    CHECK(std::abs(double(db[i]) - (1 / (1 + std::exp(-zi)) - ti) / n) <= tol);
  }
  CHECK(std::abs(double(mse.loss.item()) - mse_want) <= tol * mse_want);
  CHECK(std::abs(double(bce.loss.item()) - bce_want) <= tol * bce_want);
  CHECK(std::isfinite(double(bce.loss.item())));
  // ad::value_of: the same value without the gradient.
  CHECK(double(ad::value_of([&](const auto& v) { return losses::binary_cross_entropy(v, t); }, z).item()) ==
        double(bce.loss.item()));
  // Outputs and targets of different shapes: a named error, not a broadcast.
  const tensor<T, D, 2> narrow = to<D>(tensor<T, cpu, 2>(shape{5, 1}, T(1)));
  CHECK(locus_test::error_of([&] {
          (void)ad::value_and_grad([&](const auto& v) { return losses::mean_squared_error(v, narrow); }, z);
        }) == "locus: mean_squared_error: outputs [5, 2] and targets [5, 1] differ in shape");
  // Binary cross-entropy's targets are probabilities: above 1 the loss has no lower bound (training
  // would drive the logits to infinity), so a batch with one outside [0, 1], or NaN, is refused.
  for (const T bad : {T(1.5), T(-0.25), std::numeric_limits<T>::quiet_NaN()}) {
    auto tv = ts;
    tv[3] = bad;
    const tensor<T, D, 2> outside = to<D>(tensor<T, cpu, 2>(shape{5, 2}, tv));
    CHECK(locus_test::error_of([&] {
            (void)ad::value_and_grad([&](const auto& v) { return losses::binary_cross_entropy(v, outside); }, z);
          }) == "locus: binary_cross_entropy: 1 target(s) of the batch outside [0, 1] (or NaN): they are probabilities");
  }
}

TEST_CASE("a regression on the program's arrays: functional with mean squared error, trained and evaluated",
          "[train][ad]") {
  const auto parts = data::split(linear_targets(1200, 21, 0.01f), 0.25, 4);
  const auto& train_set = parts.train;
  const auto& val = parts.validation;
  const auto model = linear_regression(losses::mean_squared_error);
  STATIC_REQUIRE(trains_on_values<decltype(model)>);
  STATIC_REQUIRE(model_on<decltype(model), cpu>);
  data_parallel<sync_average, cpu> trainer{model, sgd{0.1f, 0.9f}};
  const double before = trainer.mean_loss(val);
  (void)trainer.fit(train_set, quiet(10, 30));
  const double after = trainer.mean_loss(val);
  CHECK(before > 1.0);
  CHECK(after < 1e-3);  // the noise's variance is 3.3e-5
  // mean_loss is the mean of the model's loss over the rows, whatever the batching.
  auto p = model.init<cpu>();
  trainer.parameters_into(p);
  CHECK(std::abs(double(model.loss(p, to<cpu>(val.images), to<cpu>(val.targets)).item()) - after) < 1e-6 + 1e-4 * after);
  // output() is the prediction: the mean squared error again, by hand.
  const auto out = model.output(p, val.images).to_vector();
  const auto want = val.targets.to_vector();
  double sq = 0;
  for (std::size_t i = 0; i < out.size(); ++i) sq += (double(out[i]) - want[i]) * (double(out[i]) - want[i]);
  CHECK(std::abs(sq / double(out.size()) - after) < 1e-6 + 1e-4 * after);
  // What has no meaning for a regression, or data of the other kind, is a named error.
  CHECK(locus_test::error_of([&] { (void)trainer.accuracy(val); }).find("accuracy counts classes; use mean_loss") !=
        std::string::npos);
  const auto labelled = synthetic(64, 3);
  CHECK(locus_test::error_of([&] { (void)trainer.fit(labelled, quiet(1, 8)); })
            .find("the model trains on float targets (regression) and the data set has none (it has labels)") !=
        std::string::npos);
  data_parallel<sync_average, cpu> classifier{softmax_regression<float>(8, 2), sgd{0.1f}};
  CHECK(locus_test::error_of([&] { (void)classifier.fit(val, quiet(1, 8)); })
            .find("the model is a classifier (int32 labels) and the data set has float targets") != std::string::npos);
  CHECK(locus_test::error_of([&] { (void)classifier.mean_loss(val); }).find("locus: mean_loss: the model is a classifier") !=
        std::string::npos);
  // A hand-made data set with a NaN target is refused before the first step (make_dataset refuses it too).
  auto nan_target = data::make_dataset(train_set.images.to_vector(), 8, train_set.targets.to_vector(), 2);
  nan_target.targets(std::size_t(3), std::size_t(1)) = std::numeric_limits<float>::quiet_NaN();
  const auto kept = trainer.parameters();
  CHECK(locus_test::error_of([&] { (void)trainer.fit(nan_target, quiet(1, 30)); }) ==
        "locus: fit: target 1 of row 3 is NaN");
  CHECK(trainer.parameters() == kept);
  // A loss of one's own on float targets: the mean absolute error through losses::regression (a
  // final class: wrapped, not derived from).
  const auto mae = linear_regression(losses::regression(mean_absolute_error{}));
  data_parallel<sync_average, cpu> robust{mae, sgd{0.05f, 0.9f}};
  const double mae_before = robust.mean_loss(val);
  (void)robust.fit(train_set, quiet(10, 30));
  CHECK(robust.mean_loss(val) < 0.1 * mae_before);
}

#if LOCUS_HAS_GPUS
TEST_CASE("a regression trains on two GPUs with both policies and the same data as on the cpu", "[train][ad]") {
  const auto data = linear_targets(1024, 5, 0.01f), val = linear_targets(256, 6, 0.01f);
  const auto model = linear_regression(losses::mean_squared_error);
  data_parallel<sync_average, gpu<0>, gpu<1>> sync{model, sgd{0.1f, 0.9f}};
  data_parallel<sync_average, cpu> one{model, sgd{0.1f, 0.9f}};
  (void)sync.fit(data, quiet(4, 32));
  (void)one.fit(data, quiet(4, 32));
  CHECK(sync.mean_loss(val) < 1e-3);
  // Two replicas averaging halves of each batch take the one replica's steps (to rounding).
  CHECK(max_difference(sync.parameters(), one.parameters()) < 1e-4);
  data_parallel<hogwild, gpu<0>, gpu<1>> async{model, sgd{0.05f, 0.9f}};
  (void)async.fit(data, quiet(4, 16));
  CHECK(async.mean_loss(val) < 1e-2);
}
#endif

TEST_CASE("mean_loss: the loss in evaluation mode, dropout off, nothing drawn", "[train][ad]") {
  const auto data = synthetic(512, 8), test = synthetic(300, 9);
  // With dropout and without: the same initial weights (dropout has none), the same evaluation loss.
  data_parallel<sync_average, cpu> dropping{sequential{nn::dense(16, 32), nn::relu, nn::dropout(0.5), nn::dense(32, 4)},
                                            sgd{0.2f}};
  data_parallel<sync_average, cpu> plain{sequential{nn::dense(16, 32), nn::relu, nn::dense(32, 4)}, sgd{0.2f}};
  const double first = dropping.mean_loss(test);
  CHECK(first == dropping.mean_loss(test));
  CHECK(std::abs(first - plain.mean_loss(test)) < 1e-6);
  CHECK(dropping.replicas().draws() == std::vector<std::uint64_t>{0});
  // A model without loss(p, x, y) whose loss_and_grad takes no stream: its loss_and_grad's value,
  // the mean over rows (300 rows: batches of 1000 and less weigh by their rows).
  const mlp<float> net({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> m{net, sgd{0.2f}};
  (void)m.fit(data, quiet(2, 32));
  auto p = net.init<cpu>();
  m.parameters_into(p);
  const double direct = double(net.loss_and_grad(p, test.images, test.labels).loss.item());
  CHECK(std::abs(m.mean_loss(test) - direct) < 1e-6);
  CHECK(locus_test::error_of([&] { (void)m.mean_loss(data::dataset{}); }).find("mean_loss") != std::string::npos);
}
