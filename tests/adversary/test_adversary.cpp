// The public API attacked as a hostile user would: empty and rank-0 tensors, NaN and infinities,
// integer edge values, overlapping views, absurd sizes, hostile checkpoint and IDX bytes, two threads
// at once, callbacks and functors that throw, moved-from tensors, self-assignment. Every case says
// what must hold; those marked "regression" failed before their fix.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/data/idx.hpp>
#include <locus/train/checkpoint.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/softmax_regression.hpp>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace locus;
using namespace locus::train;
using namespace locus_test;

namespace {

/// A host-only functor that throws on values above 2 (a user's validation inside map).
struct throws_above_two {
  float operator()(float x) const {
    if (x > 2.f) throw std::runtime_error("adversary: value above two");
    return x;
  }
};

/// Where a throwing functor can run: the cpu, and GPUs emulated on the host (a CUDA kernel cannot throw).
#if LOCUS_HAS_GPUS && !LOCUS_HAS_CUDA
using host_run_devices = std::tuple<cpu, gpu<0>, gpu<1>>;
#else
using host_run_devices = std::tuple<cpu>;
#endif

/// A trainer over two replicas where there are GPUs (emulated), else over the cpu alone.
#if LOCUS_HAS_GPUS
using two_replicas = data_parallel<sync_average, cpu, gpu<0>>;
#else
using two_replicas = data_parallel<sync_average, cpu>;
#endif
constexpr std::size_t replicas = two_replicas::device_count;

bool mentions(const std::string& message, const std::string& needle) {
  UNSCOPED_INFO("message: " << message);
  return message.find(needle) != std::string::npos;
}

}  // namespace

// ---- empty destinations whose evaluation throws (regression: dst was resized first) ----------

TEMPLATE_LIST_TEST_CASE("adversary: an empty destination stays empty and keeps its name when the evaluation throws",
                        "[adversary][assign]", host_run_devices) {
  using D = TestType;
  tensor<float, D> src(std::vector<float>{1.f, 2.f, 3.f, 4.f});
  tensor<float, D> dst;
  dst.set_name("keep_me");
  CHECK_THROWS_WITH(dst = map(throws_above_two{}, src), Catch::Contains("above two"));
  CHECK(dst.empty());
  CHECK(dst.shape() == shape<1>{});
  CHECK(dst.data() == nullptr);
  CHECK(dst.name() == "keep_me");

  // The same through the constructor and a rank-2, a rank-0 destination.
  tensor<float, D, 2> m;
  m.set_name("matrix");
  tensor<float, D, 2> src2(shape{2, 2}, 5.f);
  CHECK_THROWS(m = map(throws_above_two{}, src2) + 1.f);
  CHECK(m.shape() == shape<2>{});
  CHECK(m.name() == "matrix");
  tensor<float, D, 0> s;
  s.set_name("scalar");
  tensor<float, D, 0> five(shape<0>{}, 5.f);
  CHECK_THROWS(s = map(throws_above_two{}, five));
  CHECK(s.empty());
  CHECK(s.name() == "scalar");

  // On success the empty destination takes the shape, the values and keeps its name.
  dst = map(throws_above_two{}, src * 0.5f);
  CHECK(dst.to_vector() == std::vector<float>{0.5f, 1.f, 1.5f, 2.f});
  CHECK(dst.name() == "keep_me");
  // A non-empty destination that throws mid-way keeps its shape (its elements are unspecified).
  CHECK_THROWS(dst = map(throws_above_two{}, src));
  CHECK(dst.shape() == shape{4});
  CHECK(dst.name() == "keep_me");
}


// Regression: a sum's host loop was an `omp simd` loop, and an exception may not leave one (GCC and
// clang call std::terminate): sum(map(f, x)) with a throwing f ended the process.
TEMPLATE_LIST_TEST_CASE("adversary: a map() functor that throws inside a reduction reaches the caller",
                        "[adversary][reduce]", host_run_devices) {
  using D = TestType;
  for (const std::size_t n : {std::size_t(7), std::size_t(100), std::size_t(1) << 16}) {
    INFO("n = " << n);
    std::vector<float> values(n, 1.f);
    values[n / 2] = 5.f;
    tensor<float, D> x(values);
    CHECK_THROWS_WITH(on<D>(sum(map(throws_above_two{}, x))), Catch::Contains("above two"));
    CHECK_THROWS_WITH(on<D>(mean(map(throws_above_two{}, x))), Catch::Contains("above two"));
    CHECK_THROWS_WITH(on<D>(dot(map(throws_above_two{}, x), x)), Catch::Contains("above two"));
    CHECK_THROWS_WITH(on<D>(norm(map(throws_above_two{}, x))), Catch::Contains("above two"));
    CHECK_THROWS_WITH(on<D>(max(map(throws_above_two{}, x))), Catch::Contains("above two"));
    std::vector<float> column(n, 1.f);
    column[n - 1] = 3.f;
    tensor<float, D, 2> m(shape{n, 1}, column);
    CHECK_THROWS_WITH(on<D>(sum<0>(map(throws_above_two{}, m))), Catch::Contains("above two"));
    CHECK_THROWS_WITH(on<D>(sum<1>(map(throws_above_two{}, m))), Catch::Contains("above two"));
    // The same functor on values it accepts: the sums are exact (whole numbers below 2^24).
    CHECK(on<D>(sum(map(throws_above_two{}, x * 0.f + 1.f))).item() == float(n));
  }
}
TEST_CASE("adversary: a shape error inside the expression leaves an empty destination untouched",
          "[adversary][assign]") {
  tensor<float, cpu, 2> a(shape{2, 3}, 1.f), b(shape{4, 5}, 1.f);
  tensor<float, cpu, 2> c;
  c.set_name("c");
  CHECK_THROWS_AS(c = matmul(a, b), shape_error);
  CHECK(c.empty());
  CHECK(c.name() == "c");
  CHECK_THROWS_AS(c = a + b, shape_error);
  CHECK(c.empty());
  CHECK(c.name() == "c");
}

// ---- moved-from tensors, self-assignment ----------------------------------------------------------

TEST_CASE("adversary: moved-from tensors as operands and destinations", "[adversary][move]") {
  tensor<float, cpu> a{1.f, 2.f, 3.f};
  tensor<float, cpu> b = std::move(a);
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move): that is the point
  CHECK(a.name().empty());
  // An operand of the wrong (empty) shape: a shape error, not a read of freed memory.
  CHECK_THROWS_AS(eval(a + b), shape_error);
  // Empty with empty: an empty result.
  tensor<float, cpu> c = a * 2.f;
  CHECK(c.empty());
  // A moved-from destination takes the shape again.
  a = b + 1.f;
  CHECK(a.to_vector() == std::vector<float>{2.f, 3.f, 4.f});
  // A moved-from rank-0 tensor: item() says it is empty; assigning a reduction fills it.
  tensor<float, cpu, 0> s = sum(b);
  tensor<float, cpu, 0> t = std::move(s);
  CHECK_THROWS_AS(s.item(), shape_error);
  CHECK(t.item() == 6.f);
  s = sum(b);
  CHECK(s.item() == 6.f);
  // += onto a moved-from tensor: refused by name, nothing written.
  tensor<float, cpu> gone = std::move(c);
  (void)gone;
  CHECK_THROWS_AS(c += b * 1.f, shape_error);
  CHECK(c.empty());
}

TEST_CASE("adversary: self-assignment and self-move keep the tensor whole", "[adversary][move]") {
  tensor<float, cpu> a{1.f, 2.f, 3.f};
  a.set_name("a");
  auto& alias = a;
  a = std::move(alias);
  CHECK(a.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(a.name() == "a");
  a = copy(a);
  CHECK(a.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  a = a * a - a;  // element for element: in place
  CHECK(a.to_vector() == std::vector<float>{0.f, 2.f, 6.f});
  a.view() = copy(a.view());
  CHECK(a.to_vector() == std::vector<float>{0.f, 2.f, 6.f});
}

// ---- overlapping views as destination and operand --------------------------------------------------

TEST_CASE("adversary: shifted overlapping views read the old values", "[adversary][views]") {
  tensor<int, cpu> t{0, 1, 2, 3, 4, 5};
  t.rows(1, 6) = t.rows(0, 5) + 10;  // forward shift: a naive loop would smear t[0]
  CHECK(t.to_vector() == std::vector<int>{0, 10, 11, 12, 13, 14});
  tensor<int, cpu> u{0, 1, 2, 3, 4, 5};
  u.rows(0, 5) = u.rows(1, 6) * u.rows(0, 5);  // backward shift, the destination also an operand
  CHECK(u.to_vector() == std::vector<int>{0, 2, 6, 12, 20, 5});
  // A reduction of the destination's own matrix into one of its rows.
  tensor<float, cpu, 2> m{{1.f, 2.f}, {3.f, 4.f}};
  m.row(0) = sum<0>(m);
  CHECK(m.to_vector() == std::vector<float>{4.f, 6.f, 3.f, 4.f});
}

// ---- rank-0 and empty tensors -----------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("adversary: empty and rank-0 tensors through every path", "[adversary][empty]", devices) {
  using D = TestType;
  tensor<float, D> empty(shape{0});
  tensor<float, D, 0> s = sum(empty);
  CHECK(s.item() == 0.f);
  tensor<float, D> e2 = empty * 2.f + empty;
  CHECK(e2.size() == 0);
  tensor<float, D, 2> none(shape{0, 3});
  tensor<float, D, 1> col_sums = sum<0>(none);
  CHECK(col_sums.to_vector() == std::vector<float>{0.f, 0.f, 0.f});
  tensor<float, D, 0> default_scalar;
  CHECK_THROWS_AS(default_scalar.item(), shape_error);
  CHECK(default_scalar.clone().empty());
  tensor<float, D, 0> one(shape<0>{}, 3.f);
  tensor<float, D, 0> sq = one * one;
  CHECK(sq.item() == 9.f);
  // A rank-0 view of an empty rank-0 tensor cannot be written through.
  tensor<float, D, 0> hollow;
  CHECK_THROWS_AS(hollow.view() = one + 1.f, shape_error);
  CHECK(hollow.empty());
}

// ---- NaN, infinities, integer edges -----------------------------------------------------------

TEST_CASE("adversary: NaN and infinities flow through and are not hidden", "[adversary][ieee]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float, cpu> v{inf, -inf, nan, 1.f};
  CHECK(std::isnan(on<cpu>(sum(v)).item()));
  tensor<float, cpu> w{inf, 1.f};
  CHECK(on<cpu>(sum(w)).item() == inf);
  tensor<float, cpu> q = v / 0.f;
  const auto h = q.to_vector();
  CHECK(h[0] == inf);
  CHECK(h[1] == -inf);
  CHECK(std::isnan(h[2]));
  CHECK(h[3] == inf);
  // argmax of rows holding NaN still names a column of the row.
  tensor<float, cpu, 2> m{{nan, 1.f, 2.f}, {1.f, nan, nan}};
  const auto idx = on<cpu>(argmax<1>(m)).to_vector();
  REQUIRE(idx.size() == 2);
  for (auto i : idx) CHECK((i >= 0 && i < 3));
}

TEST_CASE("adversary: integer edge values follow the documented rules", "[adversary][integers]") {
  tensor<int, cpu> a{INT_MIN, INT_MIN, 7, -7, INT_MAX};
  tensor<int, cpu> b{-1, 0, 0, -1, -1};
  tensor<int, cpu> q = a / b;  // no SIGFPE: INT_MIN / -1 wraps, x / 0 is 0
  CHECK(q.to_vector() == std::vector<int>{INT_MIN, 0, 0, 7, -INT_MAX});
  tensor<std::int8_t, cpu> c{std::int8_t(-128)};
  tensor<std::int8_t, cpu> d{std::int8_t(-1)};
  tensor<std::int8_t, cpu> r = c / d;
  CHECK(r.to_vector() == std::vector<std::int8_t>{std::int8_t(-128)});
  tensor<std::uint32_t, cpu> u{0u, 1u};
  tensor<std::uint32_t, cpu> wrapped = u - 1u;
  CHECK(wrapped.to_vector() == std::vector<std::uint32_t>{UINT_MAX, 0u});
}

// ---- absurd sizes: refused, never allocated ----------------------------------------------------

TEST_CASE("adversary: sizes past INT_MAX and past size_t are refused before any allocation",
          "[adversary][sizes]") {
  const std::size_t huge = std::size_t{1} << 40;
  CHECK_THROWS_AS((tensor<float, cpu, 2>(shape{huge, huge})), allocation_error);  // 2^80 elements
  CHECK_THROWS_AS((tensor<double, cpu>(shape{std::numeric_limits<std::size_t>::max() / 4})), allocation_error);
  CHECK_THROWS_AS((tensor<float, cpu, 3>(shape{huge, std::size_t{1} << 30, std::size_t{1} << 30})), allocation_error);
  // More than INT_MAX elements, but within size_t: the arena refuses what it cannot get.
  CHECK_THROWS_AS((tensor<std::uint8_t, cpu>(shape{std::numeric_limits<std::size_t>::max()})), locus::error);
  CHECK_THROWS_AS((shape{-1, 2}), shape_error);
  CHECK_THROWS_AS((shape{INT_MIN}), shape_error);
  // An expression over a zero extent and a huge one has no elements: nothing to allocate.
  tensor<float, cpu, 2> flat(shape{std::size_t{0}, huge});
  CHECK(flat.size() == 0);
}

// ---- hostile checkpoint files -----------------------------------------------------------------

namespace {
checkpoint small_checkpoint() {
  checkpoint c;
  c.steps = 3;
  c.seed = 7;
  c.shapes = {{2, 2}, {2}};
  c.parameters = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  c.optimizer = "adam";
  c.state_buffers = 2;
  c.optimizer_steps = {3, 3};
  c.optimizer_state = {std::vector<float>(12, 0.5f), std::vector<float>(12, 0.25f)};
  return c;
}
void put_u64(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v) {
  if (b.size() < 8 || at > b.size() - 8) throw std::out_of_range("adversary: put_u64 past the end");
  for (std::size_t i = 0; i < 8; ++i) b.at(at + i) = std::uint8_t(v >> (8 * i));
}
void reseal(std::vector<std::uint8_t>& b) {
  const std::uint64_t h = locus::train::detail::fnv1a(b.data(), b.size() - 8);
  put_u64(b, b.size() - 8, h);
}
}  // namespace

TEST_CASE("adversary: every truncation and every flipped byte of a checkpoint is a checkpoint_error",
          "[adversary][checkpoint]") {
  const auto bytes = small_checkpoint().serialize();
  const auto round = checkpoint::parse(bytes.data(), bytes.size(), "good.ckpt");
  CHECK(round.parameters == small_checkpoint().parameters);
  for (std::size_t n = 0; n < bytes.size(); ++n)
    CHECK_THROWS_AS(checkpoint::parse(bytes.data(), n, "cut.ckpt"), checkpoint_error);
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    auto b = bytes;
    b[at] ^= 0x5a;
    CHECK_THROWS_AS(checkpoint::parse(b.data(), b.size(), "flipped.ckpt"), checkpoint_error);
  }
  auto b = bytes;
  b[0] = 'X';
  CHECK(mentions(error_of([&] { (void)checkpoint::parse(b.data(), b.size(), "magic.ckpt"); }), "magic.ckpt"));
}

TEST_CASE("adversary: huge counts in a resealed checkpoint are refused by offset, not allocated",
          "[adversary][checkpoint]") {
  const auto bytes = small_checkpoint().serialize();
  // The tensor count at offset 32.
  {
    auto b = bytes;
    put_u64(b, 32, std::numeric_limits<std::uint64_t>::max());
    reseal(b);
    const auto m = error_of([&] { (void)checkpoint::parse(b.data(), b.size(), "tensors.ckpt"); });
    CHECK(mentions(m, "tensors.ckpt"));
    CHECK(mentions(m, "offset 32"));
  }
  // The replica count: 8 + 4 x 2 x 6 bytes per replica, then the stream count (no streams) and the
  // loss scale (16 bytes), before the checksum.
  {
    auto b = bytes;
    const std::size_t replicas_at = b.size() - 8 - 16 - 8 - 2 * (8 + 4 * 12) - 8;
    put_u64(b, replicas_at, std::uint64_t{1} << 62);
    reseal(b);
    const auto m = error_of([&] { (void)checkpoint::parse(b.data(), b.size(), "replicas.ckpt"); });
    CHECK(mentions(m, "replica count"));
    CHECK(mentions(m, "offset " + std::to_string(replicas_at)));
  }
  // An extent of 2^63.
  {
    auto b = bytes;
    put_u64(b, 32 + 8 + 4, std::uint64_t{1} << 63);
    reseal(b);
    CHECK_THROWS_AS(checkpoint::parse(b.data(), b.size(), "extent.ckpt"), checkpoint_error);
  }
}

TEST_CASE("adversary: restore refuses optimiser step counts and states for another number of replicas",
          "[adversary][checkpoint]") {
  // Regression: step counts for fewer replicas than the trainer has were indexed out of range.
  const auto data = synthetic(64, 3);
  two_replicas trainer(softmax_regression<float>(16, 4), adam{});
  (void)trainer.fit(data, quiet(1, 32));
  const auto before = trainer.parameters();
  auto good = trainer.state();
  REQUIRE(good.optimizer_steps.size() == replicas);
  REQUIRE(good.optimizer_state.size() == replicas);
  auto changed = good;
  for (auto& p : changed.parameters) p += 1.f;

  const std::string mine = std::to_string(replicas);
  if (replicas > 1) {
    auto fewer_steps = changed;
    fewer_steps.optimizer_steps.resize(replicas - 1);
    const auto m = error_of([&] { trainer.restore(fewer_steps, "fewer_steps.ckpt"); });
    CHECK(mentions(m, "fewer_steps.ckpt"));
    CHECK(mentions(m, "step counts for " + std::to_string(replicas - 1) + " replicas, this trainer has " + mine));
    CHECK(trainer.parameters() == before);  // untouched
  }

  auto more_steps = changed;
  more_steps.optimizer_steps.push_back(9);
  auto m = error_of([&] { trainer.restore(more_steps, "more_steps.ckpt"); });
  CHECK(mentions(m, "more_steps.ckpt"));
  CHECK(mentions(m, "step counts for " + std::to_string(replicas + 1) + " replicas, this trainer has " + mine));
  CHECK(trainer.parameters() == before);

  auto steps_without_state = changed;
  steps_without_state.optimizer_state.clear();
  steps_without_state.optimizer_steps.assign(replicas + 2, 5);
  m = error_of([&] { trainer.restore(steps_without_state, "stateless.ckpt"); });
  CHECK(mentions(m, "stateless.ckpt"));
  CHECK(mentions(m, std::to_string(replicas + 2) + " replicas"));
  CHECK(trainer.parameters() == before);

  auto more_states = changed;
  more_states.optimizer_state.push_back(more_states.optimizer_state.back());
  m = error_of([&] { trainer.restore(more_states, "more_states.ckpt"); });
  CHECK(mentions(m, "optimiser state for " + std::to_string(replicas + 1) + " replicas, this trainer has " + mine));
  CHECK(trainer.parameters() == before);

  // What it wrote itself still restores, and so does a checkpoint without optimiser state.
  trainer.restore(good, "good.ckpt");
  CHECK(trainer.parameters() == before);
  auto bare = changed;
  bare.optimizer_state.clear();
  bare.optimizer_steps.clear();
  trainer.restore(bare, "bare.ckpt");
  CHECK(trainer.parameters() == changed.parameters);
}

// ---- hostile IDX files ------------------------------------------------------------------------

TEST_CASE("adversary: hostile IDX bytes are data errors naming the file and offset", "[adversary][idx]") {
  using bytes = std::vector<std::uint8_t>;
  const auto message = [](const bytes& b) { return error_of([&] { (void)data::parse_idx(b, "evil.idx"); }); };
  CHECK(mentions(message({}), "evil.idx"));
  CHECK(mentions(message({1, 0, 8, 1}), "magic"));
  CHECK(mentions(message({0, 0, 0x0d, 1}), "0x0d"));
  CHECK(mentions(message({0, 0, 8, 0}), "dimensions"));
  CHECK(mentions(message({0, 0, 8, 200}), "dimensions"));
  // Dimensions announcing 2^32 x 2^32 bytes: refused from the header, nothing allocated.
  CHECK(mentions(message({0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), "offset"));
  // A header that announces 2^30 bytes with none behind it: truncated, not a gigabyte allocated.
  CHECK(mentions(message({0, 0, 8, 1, 0x40, 0, 0, 0}), "truncated"));
  CHECK(mentions(message({0, 0, 8, 1, 0, 0, 0, 2, 7}), "truncated"));
  CHECK(mentions(message({0, 0, 8, 1, 0, 0, 0, 1, 7, 8}), "past the end"));
  CHECK(mentions(message({0, 0, 8, 2, 0, 0, 0}), "truncated inside the dimensions"));
  const auto ok = data::parse_idx({0, 0, 8, 1, 0, 0, 0, 2, 7, 9}, "good.idx");
  CHECK(ok.bytes == bytes{7, 9});
  CHECK_THROWS_AS(data::read_idx("/nonexistent/adversary.idx"), data::data_error);
}

// ---- two threads at once ----------------------------------------------------------------------

TEST_CASE("adversary: two threads evaluating on two GPUs while the placement log captures",
          "[adversary][threads]") {
  // The sink runs on both threads at once: it must be thread-safe (log_capture is not).
  std::mutex m;
  std::size_t lines = 0;
  scoped_placement_log log([&](std::string_view) {
    const std::lock_guard lock(m);
    ++lines;
  });
  std::atomic<int> failures{0};
  const auto work = [&failures](auto device_tag) {
    using D = decltype(device_tag);
    try {
      for (int i = 0; i < 200; ++i) {
        tensor<float, D> a(shape{std::size_t(1 + i % 17)}, float(i));
        tensor<float, D> b = a * 2.f + a;  // arena traffic and log lines from both threads
        if (b.to_vector()[0] != 3.f * float(i)) ++failures;
        tensor<float, D, 0> s = sum(b);
        (void)s;
      }
    } catch (...) {
      ++failures;
    }
  };
#if LOCUS_HAS_GPUS
  std::thread t1(work, gpu<0>{}), t2(work, gpu<1>{});
#else
  std::thread t1(work, cpu{}), t2(work, cpu{});
#endif
  t1.join();
  t2.join();
  CHECK(failures.load() == 0);
  CHECK(lines >= 400 * 3);
}

// ---- callbacks that throw or re-enter ---------------------------------------------------------

TEST_CASE("adversary: an on_step callback that throws stops fit, and the trainer goes on",
          "[adversary][callbacks]") {
  const auto data = synthetic(128, 5);
  two_replicas trainer(softmax_regression<float>(16, 4), sgd{});
  auto o = quiet(1, 32);
  int calls = 0;
  o.on_step = [&](const progress& p) {
    ++calls;
    (void)trainer.parameters();  // re-entering a read while the fit runs
    if (p.step == 2) throw std::runtime_error("adversary: user callback failed");
  };
  CHECK_THROWS_WITH(trainer.fit(data, o), Catch::Contains("user callback failed"));
  CHECK(calls == 2);
  o.on_step = nullptr;
  o.print = [](const std::string&) { throw std::runtime_error("adversary: printer failed"); };
  o.log_every = 1;
  CHECK_THROWS_WITH(trainer.fit(data, o), Catch::Contains("printer failed"));
  o.print = nullptr;
  const auto r = trainer.fit(data, o);
  CHECK(r.curve.size() == 4);
  for (float p : trainer.parameters()) CHECK(std::isfinite(p));
}

TEST_CASE("adversary: fit refuses empty data, batch 0 and out-of-range labels before a step",
          "[adversary][callbacks]") {
  two_replicas trainer(softmax_regression<float>(16, 4), sgd{});
  const auto before = trainer.parameters();
  auto data = synthetic(64, 9);
  CHECK_THROWS_AS(trainer.fit(data, quiet(1, 0)), config_error);
  CHECK_THROWS_AS(trainer.fit(data, quiet(1, 65)), config_error);
  data.labels.data()[5] = -1;
  CHECK_THROWS_AS(trainer.fit(data, quiet(1, 32)), data::data_error);
  data.labels.data()[5] = 4;
  CHECK_THROWS_AS(trainer.fit(data, quiet(1, 32)), data::data_error);
  CHECK(trainer.parameters() == before);
}
