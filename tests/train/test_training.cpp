#include "../common/test_support.hpp"

#include <locus/train/data_parallel.hpp>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

using namespace locus;
using namespace locus::train;

namespace {

// A small, learnable data set: the class is the index of the largest of the first 4 features.
data::labelled_images synthetic(std::size_t n, std::uint64_t seed) {
  const std::size_t features = 16;
  auto x = on<cpu>(random::uniform<float>(shape{n, features}, seed, 0.0, 1.0));
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t best = 0;
    for (std::int32_t c = 1; c < 4; ++c)
      if (x(i, std::size_t(c)) > x(i, std::size_t(best))) best = c;
    y[i] = best;
  }
  return {std::move(x), tensor<std::int32_t, cpu>(y)};
}

[[maybe_unused]] fit_options quiet(std::size_t epochs, std::size_t batch) {
  fit_options o;
  o.epochs = epochs;
  o.batch = batch;
  o.log_every = 0;
  return o;
}

template <class T, device D>
std::vector<float> flat(const mlp_params<T, D>& p) {
  std::vector<float> out;
  p.for_each([&](auto v) {
    const auto h = v.to_vector();
    out.insert(out.end(), h.begin(), h.end());
  });
  return out;
}

}  // namespace

TEST_CASE("the mlp's gradient matches finite differences", "[train][mlp][gradient]") {
  mlp<float> model({16, 8, 4}, 3);
  auto data = synthetic(32, 1);
  auto p = model.init<cpu>();
  auto step = model.loss_and_grad(p, data.images, data.labels);
  const auto g = flat(step.grad);
  // Perturb a few weights of the first layer and the last bias.
  auto loss_with = [&](std::size_t layer, bool bias, std::size_t k, float d) {
    auto q = p.to<cpu>();
    if (bias) q.b[layer](k) += d;
    else q.w[layer](k / q.w[layer].extent(1), k % q.w[layer].extent(1)) += d;
    return double(model.loss_and_grad(q, data.images, data.labels).loss.item());
  };
  for (std::size_t k : {0u, 5u, 77u}) {
    const double numeric = (loss_with(0, false, k, 1e-2f) - loss_with(0, false, k, -1e-2f)) / 2e-2;
    CHECK(std::abs(g[k] - numeric) < 2e-3);
  }
  const std::size_t last_bias = g.size() - 4 + 1;
  const double numeric = (loss_with(1, true, 1, 1e-2f) - loss_with(1, true, 1, -1e-2f)) / 2e-2;
  CHECK(std::abs(g[last_bias] - numeric) < 2e-3);
}

#if LOCUS_HAS_GPUS
TEST_CASE("sync_average over K devices follows one device with the whole batch", "[train][sync]") {
  if (gpu_count() < 3) configure_logical_gpus(3);  // gpu<2> on the machine's GPUs
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  sgd opt{0.1f, 0.9f};
  data_parallel<sync_average, cpu> one{model, opt};
  data_parallel<sync_average, gpu<0>, gpu<1>> two{model, opt};
  data_parallel<sync_average, cpu, gpu<0>, gpu<1>, gpu<2>> four{model, opt};
  one.fit(data, quiet(2, 64));
  two.fit(data, quiet(2, 64));
  four.fit(data, quiet(2, 64));
  const auto p1 = flat(one.parameters<cpu>()), p2 = flat(two.parameters<cpu>()), p4 = flat(four.parameters<cpu>());
  REQUIRE(p1.size() == p2.size());
  double worst2 = 0, worst4 = 0;
  for (std::size_t i = 0; i < p1.size(); ++i) {
    worst2 = std::max(worst2, double(std::abs(p1[i] - p2[i])));
    worst4 = std::max(worst4, double(std::abs(p1[i] - p4[i])));
  }
  // 16 steps of float SGD with momentum: only the order of the sums differs.
  CHECK(worst2 < 1e-4);
  CHECK(worst4 < 1e-4);
  CHECK(std::abs(two.accuracy(data) - one.accuracy(data)) <= 0.01);
}

TEST_CASE("hogwild workers on their own threads train the shared parameters", "[train][hogwild][threads]") {
  mlp<float> model({16, 12, 4}, 7);
  auto data = synthetic(2048, 3);
  data_parallel<hogwild, cpu, gpu<0>, gpu<1>> trainer{model, sgd{0.05f, 0.9f}};
  const double before = trainer.accuracy(data);
  auto result = trainer.fit(data, quiet(3, 32));
  CHECK(result.curve.size() == 3 * (2048 / 32));
  CHECK(trainer.accuracy(data) > 0.8);
  CHECK(trainer.accuracy(data) > before + 0.2);
}
#endif

TEST_CASE("the textbook picture on two threads: stale asynchronous updates overshoot, synchronous averaging does not",
          "[train][hogwild][sync]") {
  // f(w) = (w - 3)^2 / 2, gradient w - 3, learning rate 1: one exact step lands on the minimum.
  const auto grad = [](float w) { return w - 3.f; };
  // Synchronous: two workers, the same w, their gradients averaged, one update.
  float w_sync = 0.f;
  const float g0 = grad(w_sync), g1 = grad(w_sync);
  w_sync -= 1.f * (g0 + g1) / 2.f;
  // Asynchronous: both workers read w = 0 before either writes, then each applies its own update
  // with the same lock-free relaxed fetch_sub the hogwild policy uses.
  float w_async = 0.f;
  const float stale = std::atomic_ref<float>(w_async).load(std::memory_order_relaxed);
  const float a0 = grad(stale), a1 = grad(stale);
  std::thread t0([&] { std::atomic_ref<float>(w_async).fetch_sub(1.f * a0, std::memory_order_relaxed); });
  std::thread t1([&] { std::atomic_ref<float>(w_async).fetch_sub(1.f * a1, std::memory_order_relaxed); });
  t0.join();
  t1.join();
  CHECK(w_sync == 3.f);   // at the minimum
  CHECK(w_async == 6.f);  // past it by as much again
}
