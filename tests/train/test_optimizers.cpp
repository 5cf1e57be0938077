// The optimisers (optimizer.hpp): each step against a double-precision reference, one kernel per
// tensor, their validation, and Adam / AdamW through the policies and checkpoints.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/optimizer.hpp>
#include <locus/train/softmax_regression.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace locus;
using namespace locus::train;
using namespace locus_test;

namespace {
// Two tensors (3 and 2 elements) and three steps of gradients: enough to see the offsets of the
// state buffers, the bias correction change from step to step, and a zero gradient.
const std::vector<float> p0 = {0.5f, -1.25f, 2.f, 0.75f, -0.3f};
const std::vector<std::vector<float>> grads_at = {
    {0.1f, -0.2f, 0.3f, 0.f, 1.5f}, {-0.05f, 0.4f, 0.3f, 0.f, -2.f}, {0.2f, 0.1f, -0.6f, 0.f, 0.25f}};
const std::vector<std::size_t> sizes = {3, 2};

/// p, m, v after each step, computed in double from the formulas of torch.optim.Adam / AdamW.
struct adam_reference {
  std::vector<double> p, m, v;
};
adam_reference adam_steps(double lr, double b1, double b2, double eps, double wd, bool decoupled, double scale,
                          int steps) {
  adam_reference r{std::vector<double>(p0.begin(), p0.end()), std::vector<double>(p0.size()),
                   std::vector<double>(p0.size())};
  for (int t = 1; t <= steps; ++t)
    for (std::size_t i = 0; i < p0.size(); ++i) {
      double g = scale * grads_at[std::size_t(t - 1)][i];
      if (!decoupled) g += wd * r.p[i];
      else r.p[i] *= 1 - lr * wd;
      r.m[i] = b1 * r.m[i] + (1 - b1) * g;
      r.v[i] = b2 * r.v[i] + (1 - b2) * g * g;
      const double mhat = r.m[i] / (1 - std::pow(b1, t)), vhat = r.v[i] / (1 - std::pow(b2, t));
      r.p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  return r;
}

/// A replica's tensors on D: the parameters, one gradient per step, the flat state.
template <device D>
struct bench {
  std::vector<tensor<float, D, 1>> p, g;
  tensor<float, D, 1> state;
  explicit bench(std::size_t buffers) : state(shape{buffers * p0.size()}, 0.f) {
    std::size_t at = 0;
    for (auto n : sizes) {
      p.emplace_back(shape{n}, std::vector<float>(p0.begin() + std::ptrdiff_t(at), p0.begin() + std::ptrdiff_t(at + n)));
      g.emplace_back(shape{n}, 0.f);
      at += n;
    }
  }
  template <optimizer O>
  void step(const O& opt, float lr, std::uint64_t t, float scale) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const auto& src = grads_at[t - 1];
      from_host(std::vector<float>(src.begin() + std::ptrdiff_t(at), src.begin() + std::ptrdiff_t(at + sizes[k])),
                std::vector{g[k].view()});
      at += sizes[k];
    }
    apply_step(opt, lr, t, params(), gradients(), state.view(), scale);
  }
  std::vector<tensor_view<float, D, 1>> params() {
    std::vector<tensor_view<float, D, 1>> out;
    for (auto& t : p) out.push_back(t.view());
    return out;
  }
  std::vector<tensor_view<const float, D, 1>> gradients() const {
    std::vector<tensor_view<const float, D, 1>> out;
    for (const auto& t : g) out.push_back(t.view());
    return out;
  }
  std::vector<float> flat() { return to_host(params()); }
};

void check_close(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(double(got[i]) - want[i]) <= rel * std::max(std::abs(want[i]), 1e-30));
  }
}
}  // namespace

TEST_CASE("the built-in optimisers meet the concept, other types do not", "[train][optim]") {
  STATIC_REQUIRE(optimizer<sgd>);
  STATIC_REQUIRE(optimizer<adam>);
  STATIC_REQUIRE(optimizer<adamw>);
  STATIC_REQUIRE_FALSE(optimizer<int>);
  STATIC_REQUIRE_FALSE(optimizer<sync_average>);
  STATIC_REQUIRE(std::string_view(adam::name) == "adam");
  STATIC_REQUIRE(std::string_view(adamw::name) == "adamw");
  CHECK(sgd{0.1f, 0.f}.state_buffers() == 0);
  CHECK(sgd{0.1f, 0.9f}.state_buffers() == 1);
  CHECK(sgd{0.1f, 0.9f, true}.state_buffers() == 1);
  CHECK(adam{}.state_buffers() == 2);
  CHECK(adamw{}.weight_decay == 0.01f);
  CHECK(adam{}.weight_decay == 0.f);
}

TEMPLATE_LIST_TEST_CASE("Adam's and AdamW's first three steps equal the double-precision formulas", "[train][optim][adam]",
                        devices) {
  using D = TestType;
  const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  for (const float wd : {0.f, 0.1f})
    for (const float scale : {1.f, 0.5f}) {
      INFO("weight decay " << wd << ", gradient scale " << scale);
      bench<D> a(2), w(2);
      for (std::uint64_t t = 1; t <= 3; ++t) {
        a.step(adam{lr, b1, b2, eps, wd}, lr, t, scale);
        w.step(adamw{lr, b1, b2, eps, wd}, lr, t, scale);
        const auto ra = adam_steps(lr, b1, b2, eps, wd, false, scale, int(t));
        const auto rw = adam_steps(lr, b1, b2, eps, wd, true, scale, int(t));
        check_close(a.flat(), ra.p, 1e-6);
        check_close(w.flat(), rw.p, 1e-6);
        const auto sa = a.state.to_vector(), sw = w.state.to_vector();
        check_close({sa.begin(), sa.begin() + 5}, ra.m, 1e-6);  // the first moments, then the second
        check_close({sa.begin() + 5, sa.end()}, ra.v, 1e-6);
        check_close({sw.begin(), sw.begin() + 5}, rw.m, 1e-6);
        check_close({sw.begin() + 5, sw.end()}, rw.v, 1e-6);
      }
      // Without weight decay the two are one optimiser, bit for bit.
      if (wd == 0.f) CHECK(a.flat() == w.flat());
    }
}

TEMPLATE_LIST_TEST_CASE("coupled and decoupled weight decay differ as they should", "[train][optim][adam]", devices) {
  using D = TestType;
  const float lr = 0.01f, wd = 0.1f;
  // A zero gradient: AdamW shrinks the parameters by exactly 1 - lr * wd and its moments stay 0;
  // Adam's decay enters the moments, which normalise it: each parameter moves by about lr, towards 0.
  bench<D> a(2), w(2);  // its gradients start at 0
  apply_step(adam{lr, 0.9f, 0.999f, 1e-8f, wd}, lr, 1, a.params(), a.gradients(), a.state.view());
  apply_step(adamw{lr, 0.9f, 0.999f, 1e-8f, wd}, lr, 1, w.params(), w.gradients(), w.state.view());
  const auto pa = a.flat(), pw = w.flat();
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(pw[i] == p0[i] * (1.f - lr * wd));
    CHECK(std::abs(p0[i] - pa[i]) == Approx(lr).epsilon(1e-5));
    CHECK(std::abs(pa[i]) < std::abs(p0[i]));
  }
  const auto sw = w.state.to_vector();
  CHECK(std::all_of(sw.begin(), sw.end(), [](float x) { return x == 0.f; }));
  const auto sa = a.state.to_vector();
  CHECK(sa[0] == Approx(0.1 * wd * p0[0]).epsilon(1e-6));  // (1 - beta1) * wd * p
}

TEMPLATE_LIST_TEST_CASE("sgd: heavy-ball steps are bit-identical to the old formula, Nesterov's equal the reference",
                        "[train][optim][sgd]", devices) {
  using D = TestType;
  const float lr = 0.05f, mu = 0.9f, scale = 0.5f;
  bench<D> heavy(1), nesterov(1), plain(0);
  std::vector<float> hp = p0, hv(5, 0.f), pp = p0;
  std::vector<double> np(p0.begin(), p0.end()), nv(5, 0.0);
  for (std::uint64_t t = 1; t <= 3; ++t) {
    heavy.step(sgd{lr, mu}, lr, t, scale);
    nesterov.step(sgd{lr, mu, true}, lr, t, scale);
    plain.step(sgd{lr, 0.f}, lr, t, scale);
    for (std::size_t i = 0; i < 5; ++i) {
      const float g = grads_at[t - 1][i];
      // What apply_step computed before the optimiser concept, rounding for rounding.
      hv[i] = hv[i] * mu + g * scale;
      hp[i] = hp[i] + -(hv[i] * lr);
      pp[i] = pp[i] + -(g * (lr * scale));
      nv[i] = double(mu) * nv[i] + double(scale) * g;
      np[i] -= double(lr) * (double(scale) * g + double(mu) * nv[i]);
    }
    CHECK(heavy.flat() == hp);
    CHECK(heavy.state.to_vector() == hv);
    CHECK(plain.flat() == pp);
    check_close(nesterov.flat(), np, 1e-6);
    check_close(nesterov.state.to_vector(), nv, 1e-6);
  }
}

TEMPLATE_LIST_TEST_CASE("one optimiser step is one kernel per parameter tensor", "[train][optim][fusion]", devices) {
  using D = TestType;
  bench<D> a(2), s(1), n(1), p(0);
  const auto before = kernel_launches(id_of<D>);
  a.step(adamw{}, 1e-3f, 1, 1.f);
  s.step(sgd{}, 0.1f, 1, 1.f);
  n.step(sgd{0.1f, 0.9f, true}, 0.1f, 1, 1.f);
  p.step(sgd{0.1f, 0.f}, 0.1f, 1, 1.f);
  // bench::step also copies the gradients in (no kernels: transfers).
  CHECK(kernel_launches(id_of<D>) - before == 4 * sizes.size());
}

TEST_CASE("apply_step refuses mismatched sizes and a step count of 0 before any tensor changes", "[train][optim][errors]") {
  bench<cpu> a(2);
  auto g = a.gradients();
  std::swap(g[0], g[1]);
  CHECK_THROWS_WITH(apply_step(adam{}, 1e-3f, 1, a.params(), g, a.state.view()),
                    "locus: adam step: tensor 0 has 3 elements and a gradient of 2");
  g.pop_back();
  CHECK_THROWS_WITH(apply_step(adam{}, 1e-3f, 1, a.params(), g, a.state.view()),
                    "locus: adam step: 2 parameter tensors and 1 gradients");
  tensor<float, cpu, 1> small(shape{5}, 0.f);
  CHECK_THROWS_WITH(apply_step(adam{}, 1e-3f, 1, a.params(), a.gradients(), small.view()),
                    "locus: adam step: a state of 5 floats for 2 buffer(s) of 5 parameters");
  CHECK_THROWS_WITH(apply_step(adam{}, 1e-3f, 0, a.params(), a.gradients(), a.state.view()),
                    "locus: adam step: the step count starts at 1");
  CHECK(a.flat() == p0);
  // Empty tensors: nothing to do, nothing launched.
  std::vector<tensor_view<float, cpu, 1>> none;
  tensor<float, cpu, 1> empty(shape{0}, 0.f);
  apply_step(adam{}, 1e-3f, 1, none, {}, empty.view());
}

TEST_CASE("bad optimiser options are refused with the value named, before anything is made", "[train][optim][errors]") {
  mlp<float> model({16, 8, 4}, 3);
  const auto refused = [&](const auto& opt) { return error_of([&] { data_parallel<sync_average, cpu> t{model, opt}; }); };
  CHECK(refused(adam{0.f}) == "locus: adam: the learning rate must be positive and finite, not 0");
  CHECK(refused(adamw{std::nanf("")}) == "locus: adamw: the learning rate must be positive and finite, not nan");
  CHECK(refused(adam{1e-3f, 1.f}) == "locus: adam: beta1 must be in [0, 1), not 1");
  CHECK(refused(adam{1e-3f, 0.9f, -0.5f}) == "locus: adam: beta2 must be in [0, 1), not -0.5");
  CHECK(refused(adamw{1e-3f, 0.9f, 0.999f, 0.f}) == "locus: adamw: eps must be positive and finite, not 0");
  CHECK(refused(adam{1e-3f, 0.9f, 0.999f, 1e-8f, -1.f}) ==
        "locus: adam: weight_decay must be at least 0 and finite, not -1");
  CHECK(refused(adamw{0.5f, 0.9f, 0.999f, 1e-8f, 2.f}) ==
        "locus: adamw: lr * weight_decay must be below 1 (the decay factor 1 - lr * weight_decay), not 1");
  CHECK(refused(sgd{0.1f, 0.f, true}) == "locus: sgd: nesterov needs a momentum in (0, 1), not 0");
  CHECK(refused(sgd{0.1f, 1.f}) == "locus: sgd: momentum must be in [0, 1), not 1");
  // Values print as the shortest text that reads back to them: a tiny negative rate is not "-0.000000".
  CHECK(refused(sgd{-1e-9f}) == "locus: sgd: the learning rate must be positive and finite, not -1e-09");
  CHECK(refused(adamw{std::numeric_limits<float>::infinity()}) ==
        "locus: adamw: the learning rate must be positive and finite, not inf");
  CHECK(refused(sgd{0.1f, 0.99999994f}).empty());
  CHECK(refused(sgd{0.1f, -0.f}).empty());
  CHECK(refused(sgd{0.1f, -1e-30f}) == "locus: sgd: momentum must be in [0, 1), not -1e-30");
  // The product as the user's floats give it (0.1f * 10 is 1.0000000149 in double).
  CHECK(refused(adamw{0.1f, 0.9f, 0.999f, 1e-8f, 10.f}) ==
        "locus: adamw: lr * weight_decay must be below 1 (the decay factor 1 - lr * weight_decay), not 1");
  // Coupled decay has no such bound: Adam's L2 term is a gradient.
  CHECK(refused(adam{0.5f, 0.9f, 0.999f, 1e-8f, 2.f}).empty());
}

#if LOCUS_HAS_GPUS
TEST_CASE("sync_average with adamw on two GPUs and on a cpu + GPU keeps every replica bit-identical",
          "[train][optim][sync]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  train::data_parallel<train::sync_average, gpu<0>, gpu<1>> t{model, train::adamw{1e-3f}};
  data_parallel<sync_average, cpu, gpu<0>> mixed{model, adamw{1e-2f}};
  const double before = mixed.accuracy(data);
  t.fit(data, quiet(2, 64));
  mixed.fit(data, quiet(2, 64));
  auto same = [](auto& trainer) {
    auto& s = trainer.replicas();
    const auto p0 = s.at(0, [](auto& r) { return to_host(r.model().parameters()); });
    CHECK(p0 == s.at(1, [](auto& r) { return to_host(r.model().parameters()); }));
    const auto states = s.states_host();
    REQUIRE(states.size() == 2);
    CHECK(states[0].size() == 2 * s.parameter_count());
    CHECK(states[0] == states[1]);
    CHECK(s.optimizer_steps() == std::vector<std::uint64_t>{16, 16});
    CHECK(s.optimizer().name == "adamw");
  };
  same(t);
  same(mixed);
  CHECK(mixed.accuracy(data) > before + 0.1);
}

TEST_CASE("local_sgd with adam averages both moments, and hogwild trains with adam", "[train][optim][policy]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(512, 2);
  data_parallel<local_sgd, cpu, gpu<0>> local{model, adam{1e-2f}, local_sgd{.period = 3}};
  const double before = local.accuracy(data);
  local.fit(data, quiet(2, 64));  // 16 steps: the last average is at the end
  const auto states = local.replicas().states_host();
  CHECK(states[0] == states[1]);
  CHECK(local.accuracy(data) > before + 0.1);
  data_parallel<local_sgd, cpu, gpu<0>> apart{model, adam{1e-2f}, local_sgd{.period = 3, .average_momentum = false}};
  apart.fit(data, quiet(2, 64));
  const auto own = apart.replicas().states_host();
  CHECK(own[0] != own[1]);

  data_parallel<hogwild, cpu, gpu<0>> async{model, adamw{1e-2f}};
  async.fit(data, quiet(2, 64));
  CHECK(async.accuracy(data) > before + 0.1);
}
#endif

TEST_CASE("hogwild weighs a stale step by 1/(1+tau) for sgd by default, not for adam, and as told", "[train][optim][hogwild]") {
  const auto info = [](const auto& opt) { return train::detail::erase_optimizer<cpu>(opt).info; };
  CHECK(hogwild{}.weighs_staleness(info(sgd{0.1f, 0.9f})));
  CHECK(hogwild{}.weighs_staleness(info(sgd{0.1f, 0.f})));
  CHECK(hogwild{}.weighs_staleness(info(sgd{.lr = 0.1f, .momentum = 0.9f, .nesterov = true})));
  CHECK_FALSE(hogwild{}.weighs_staleness(info(adam{1e-3f})));
  CHECK_FALSE(hogwild{}.weighs_staleness(info(adamw{1e-3f})));
  CHECK(hogwild{.scale_by_staleness = true}.weighs_staleness(info(adamw{1e-3f})));
  CHECK_FALSE(hogwild{.scale_by_staleness = false}.weighs_staleness(info(sgd{0.1f, 0.9f})));
}

TEST_CASE("one hogwild worker with adam follows sync_average's steps, and look-ahead stays sgd's", "[train][optim][hogwild]") {
  mlp<float> model({16, 12, 4}, 5);
  auto data = synthetic(256, 3);
  data_parallel<sync_average, cpu> sync{model, adam{1e-2f}};
  data_parallel<hogwild, cpu> async{model, adam{1e-2f}, hogwild{.scale_by_staleness = true}};
  sync.fit(data, quiet(1, 64));
  async.fit(data, quiet(1, 64));
  // The worker adds (its new parameters - those it read) to the home copy: equal up to that rounding.
  const auto a = sync.parameters(), b = async.parameters();
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  CHECK(worst < 1e-5);
  CHECK(a != data_parallel<sync_average, cpu>(model, adam{}).parameters());
  data_parallel<hogwild, cpu> ahead{model, adam{1e-2f}, hogwild{.lookahead = true}};
  CHECK_THROWS_WITH(ahead.fit(data, quiet(1, 64)),
                    "locus: fit: lookahead needs momentum and in-process hogwild (the optimiser is adam, not sgd)");
  data_parallel<hogwild, cpu> nesterov{model, sgd{0.1f, 0.9f, true}, hogwild{.lookahead = true}};
  CHECK_THROWS_WITH(nesterov.fit(data, quiet(1, 64)), "locus: fit: lookahead needs momentum and in-process hogwild "
                                                      "(sgd's nesterov is a look-ahead of its own)");
  CHECK(ahead.state().steps == 0);
  data_parallel<hogwild, cpu> nesterov_plain{model, sgd{0.05f, 0.9f, true}};
  const double before = nesterov_plain.accuracy(data);
  nesterov_plain.fit(data, quiet(2, 64));
  CHECK(nesterov_plain.accuracy(data) > before + 0.1);
}
