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
