// Tensors of bfloat16 and half (issue 28): storage, transfers, views and printing; expressions that
// compute in float and round once at the store; casts; reductions that accumulate in float; products.
#include "../common/test_support.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace locus;
using locus_test::half_cases;
using locus_test::log_capture;

namespace {

template <class H>
std::vector<std::uint16_t> bits_of(const std::vector<H>& v) {
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = v[i].bits;
  return b;
}

template <class H, class D>
tensor<H, D> from_floats(const std::vector<float>& v) {
  std::vector<H> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = H(v[i]);
  return to<D>(tensor<H, cpu>(shape<1>{v.size()}, h));
}

template <class H, class D>
tensor<H, D, 2> matrix(const std::vector<float>& v, std::size_t rows, std::size_t cols) {
  std::vector<H> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = H(v[i]);
  return to<D>(tensor<H, cpu, 2>(shape<2>{rows, cols}, h));
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("16-bit tensors: filled, copied between devices, viewed and printed", "[half]", half_cases) {
  using D = typename TestType::device;
  using H = typename TestType::value;
  const tensor<H, D> filled(shape<1>{5}, H(0.1f));
  CHECK(bits_of(filled.to_vector()) == std::vector<std::uint16_t>(5, H(0.1f).bits));
  CHECK(bits_of(tensor<H, D>(shape<1>{3}).to_vector()) == std::vector<std::uint16_t>(3, 0));  // +0

  const auto t = from_floats<H, D>({1.f, -2.f, 0.1f, 65504.f, -0.f});
  const auto back = to<cpu>(t).to_vector();
  CHECK(float(back[0]) == 1.f);
  CHECK(float(back[1]) == -2.f);
  CHECK(back[2].bits == H(0.1f).bits);
  CHECK(std::signbit(float(back[4])));

  const tensor<H, D, 2> m = matrix<H, D>({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, 2, 3);
  const auto row = m.row(1);
  CHECK(float(to<cpu>(row).to_vector()[2]) == 6.f);

  const std::string name = std::is_same_v<H, bfloat16> ? "bfloat16" : "half";
  // Each element with the fewest digits that read back as the same 16-bit value (0.1, not the
  // float 0.1 rounds to in 16 bits).
  CHECK(to_string(from_floats<H, D>({1.f, 2.f, 0.1f})) ==
        "tensor<" + name + ", " + id_of<D>.type_name() + "> [3]\n[1.0, 2.0, 0.1]");
  CHECK(to_string(from_floats<H, D>({std::numeric_limits<float>::infinity(), std::nanf(""), -1.5f})) ==
        "tensor<" + name + ", " + id_of<D>.type_name() + "> [3]\n[ inf,  nan, -1.5]");
}

TEMPLATE_LIST_TEST_CASE("a fused 16-bit expression computes in float and rounds once, at the store", "[half]",
                        half_cases) {
  using D = typename TestType::device;
  using H = typename TestType::value;
  // One ulp of 1 is 2^-7 in bfloat16, 2^-10 in half. 1 + u/2 + u/2 rounded step by step stays 1
  // (each half-ulp is a tie, to even); computed in float and rounded once it is 1 + u.
  const float u = std::is_same_v<H, bfloat16> ? 0x1p-7f : 0x1p-10f;
  const auto one = from_floats<H, D>({1.f, 1.f});
  const auto half_ulp = from_floats<H, D>({u / 2, u / 2});
  const std::size_t before = locus::kernel_launches(id_of<D>);
  tensor<H, D> fused = one + half_ulp + half_ulp;
  CHECK(locus::kernel_launches(id_of<D>) == before + 1);  // one kernel, no 16-bit temporary
  CHECK(float(to<cpu>(fused).to_vector()[0]) == 1.f + u);
  tensor<H, D> stepped = one + half_ulp;
  stepped = stepped + half_ulp;
  CHECK(float(to<cpu>(stepped).to_vector()[0]) == 1.f);

  // Against a float reference over many values, functions included: the result is the float
  // computation rounded to H.
  std::vector<float> a(3000), b(3000);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = float(H(0.37f * float(i) - 555.f));
    b[i] = float(H(1.f + 0.01f * float(i % 97)));
  }
  const auto ta = from_floats<H, D>(a), tb = from_floats<H, D>(b);
  const tensor<H, D> got = (ta * tb - 2.f) / tb + sqrt(abs(ta)) * 0.1;
  const auto g = to<cpu>(got).to_vector();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float ref = (a[i] * b[i] - 2.f) / b[i] + std::sqrt(std::abs(a[i])) * 0.1f;
    wrong += g[i].bits != H(ref).bits && std::abs(float(g[i]) - ref) > std::abs(ref) * 1e-6f;
  }
  CHECK(wrong == 0);

  // Scalars of any arithmetic type, comparisons (bool), where, and integer scalars.
  const tensor<bool, D> less = ta < 0;
  CHECK(to<cpu>(less).to_vector()[0] == (a[0] < 0));
  const tensor<H, D> clipped = where(ta < 0, 0, ta);
  CHECK(float(to<cpu>(clipped).to_vector()[0]) == std::max(a[0], 0.f));
  const tensor<H, D> r = relu(ta * 2);
  CHECK(float(to<cpu>(r).to_vector()[2999]) == float(H(std::max(a[2999] * 2, 0.f))));
}

TEMPLATE_LIST_TEST_CASE("cast to a 16-bit type rounds to nearest even: overflow is inf, NaN stays NaN", "[half]",
                        half_cases) {
  using D = typename TestType::device;
  using H = typename TestType::value;
  // Halfway between the largest finite value and the next power of two: a tie, rounded to even, inf.
  const float big = std::is_same_v<H, bfloat16> ? std::bit_cast<float>(0x7f7f8000u) : 65520.f;
  const std::vector<float> in{big, -big, std::nanf(""), -0.f, 1e-30f, 0.1f, 1.f + 0x1p-11f};
  const tensor<float, D> f = to<D>(tensor<float, cpu>(shape<1>{in.size()}, in));
  log_capture log;
  const tensor<H, D> h = cast<H>(f);
  CHECK(log.contains("cast: (Cast)"));
  const auto got = to<cpu>(h).to_vector();
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i].bits == H(in[i]).bits);
  }
  CHECK(std::isinf(float(got[0])));
  CHECK(float(got[1]) < 0);
  CHECK(std::isnan(float(got[2])));
  // And back: cast<float> is exact.
  const tensor<float, D> wide = cast<float>(h);
  const auto w = to<cpu>(wide).to_vector();
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!std::isnan(w[i])) CHECK(w[i] == float(got[i]));
  // Integers convert too (rounded once, from the exact value).
  const tensor<int, D> ints = to<D>(tensor<int, cpu>{16777217, -3, 2049});
  const auto hi = to<cpu>(tensor<H, D>(cast<H>(ints))).to_vector();
  CHECK(hi[0].bits == H(16777217.0).bits);
  CHECK(float(hi[1]) == -3.f);
  CHECK(hi[2].bits == H(2049.0).bits);
}

TEMPLATE_LIST_TEST_CASE("16-bit reductions accumulate in float: sums return float, max and min the element",
                        "[half][reduce]", half_cases) {
  using D = typename TestType::device;
  using H = typename TestType::value;
  const tensor<H, D> ones(shape<1>{1000000}, H(1.f));
  auto s = on<D>(sum(ones));
  static_assert(std::is_same_v<typename decltype(s)::value_type, float>);
  CHECK(to<cpu>(s).to_vector()[0] == 1e6f);  // a 16-bit accumulator stops at 256 (bfloat16) or 2048 (half)
  CHECK(to<cpu>(on<D>(mean(ones))).to_vector()[0] == 1.f);
  CHECK(to<cpu>(on<D>(dot(ones, ones))).to_vector()[0] == 1e6f);

  const auto v = from_floats<H, D>({3.f, -7.f, 12.f, 0.5f});
  auto mx = on<D>(max(v));
  static_assert(std::is_same_v<typename decltype(mx)::value_type, H>);
  CHECK(float(to<cpu>(mx).to_vector()[0]) == 12.f);
  CHECK(float(to<cpu>(on<D>(min(v))).to_vector()[0]) == -7.f);
  CHECK(to<cpu>(on<D>(argmax(v))).to_vector()[0] == 2);
  const auto with_nan = from_floats<H, D>({3.f, std::nanf(""), 12.f});
  CHECK(std::isnan(float(to<cpu>(on<D>(max(with_nan))).to_vector()[0])));
  CHECK(std::isnan(to<cpu>(on<D>(sum(with_nan))).to_vector()[0]));

  // Along an axis.
  const tensor<H, D, 2> m = matrix<H, D>({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, 2, 3);
  const auto rows = to<cpu>(on<D>(sum<1>(m))).to_vector();
  CHECK(rows == std::vector<float>{6.f, 15.f});
  const auto cols = to<cpu>(on<D>(max<0>(m))).to_vector();
  CHECK(float(cols[2]) == 6.f);
}

TEMPLATE_LIST_TEST_CASE("a 16-bit product is a float product rounded once", "[half][matmul]", half_cases) {
  using D = typename TestType::device;
  using H = typename TestType::value;
  const std::size_t m = 7, k = 33, n = 5;
  std::vector<float> a(m * k), b(k * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(H(std::sin(float(i)) * 3.f));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(H(std::cos(float(i) * 0.7f)));
  const tensor<H, D, 2> ta = matrix<H, D>(a, m, k);
  const tensor<H, D, 2> tb = matrix<H, D>(b, k, n);
  const tensor<H, D, 2> c = matmul(ta, tb) + 1.f;
  const auto got = to<cpu>(c).to_vector();
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double ref = 0;
      for (std::size_t p = 0; p < k; ++p) ref += double(a[i * k + p]) * double(b[p * n + j]);
      ref = double(float(H(ref))) + 1.0;  // the product rounded to H (its staged temporary), then + 1
      INFO(i << ", " << j);
      CHECK(std::abs(double(float(got[i * n + j])) - double(float(H(ref)))) <=
            std::abs(ref) * double(float(std::numeric_limits<H>::epsilon())));
    }
  const tensor<H, D, 2> ct = matmul(transpose(tb), transpose(ta));
  CHECK(to<cpu>(ct).shape() == shape<2>{n, m});
}

TEMPLATE_LIST_TEST_CASE("16-bit operands beside rank-0 floats, bool conditions and random numbers", "[half]",
                        half_cases) {
  using D = typename TestType::device;
  using H = typename TestType::value;
  const auto h = from_floats<H, D>({1.f, 2.f, 3.f, 6.f});
  // A mean is a float; h - mean(h) is a 16-bit expression, as h - 3.f is.
  const tensor<H, D> centred = h - mean(h);
  CHECK(float(to<cpu>(centred).to_vector()[3]) == 3.f);
  // where's condition does not take part in the element type: a 16-bit condition choosing floats
  // gives floats, a bool condition choosing 16-bit values gives 16-bit values.
  auto chosen = on<D>(where(h > 2.f, 0.1f, 0.2f));
  static_assert(std::is_same_v<typename decltype(chosen)::value_type, float>);
  CHECK(to<cpu>(chosen).to_vector()[3] == 0.1f);
  auto by_16 = on<D>(where(h, 0.1f, 0.2f));
  static_assert(std::is_same_v<typename decltype(by_16)::value_type, float>);
  const tensor<float, D> f = to<D>(tensor<float, cpu>{-1.f, 1.f, -1.f, 1.f});
  const tensor<H, D> picked = where(f > 0.f, h, 0);
  CHECK(float(to<cpu>(picked).to_vector()[1]) == 2.f);
  CHECK(float(to<cpu>(picked).to_vector()[2]) == 0.f);
  // Random numbers of a 16-bit type: rounded to it, usable in expressions and reductions.
  const tensor<H, D> r = random::uniform<H>(shape<1>{1000}, 7, -1.0, 1.0);
  const tensor<H, D> twice = random::uniform<H>(shape<1>{1000}, 7, -1.0, 1.0) * 2.f;
  const auto rv = to<cpu>(r).to_vector(), tv = to<cpu>(twice).to_vector();
  for (std::size_t i = 0; i < rv.size(); ++i) CHECK(float(tv[i]) == float(H(2.f * float(rv[i]))));
  const float s = to<cpu>(on<D>(sum(random::uniform<H>(shape<1>{1000}, 7, -1.0, 1.0)))).to_vector()[0];
  double ref = 0;
  for (const H v : rv) ref += double(float(v));
  CHECK(std::abs(double(s) - ref) < 1e-3);
}

TEST_CASE("host loops storing 16-bit values give the baseline instruction set's bits in every version", "[half]") {
  // GCC builds run these loops compiled for AVX2 or AVX-512 when the CPU has them; conversions are
  // exact integer work and contraction into FMAs stays off, so each version stores the same bits.
  using backend::detail::host_isa;
  const host_isa detected = backend::detail::sixteen_bit_isa;
  INFO("this host's version: " << (detected == host_isa::avx512 ? "AVX-512" : detected == host_isa::avx2 ? "AVX2" : "baseline"));
  struct restore {
    host_isa isa;
    ~restore() { backend::detail::sixteen_bit_isa = isa; }
  } restore_after{detected};
  const std::size_t n = 1 << 16;
  const auto a = on<cpu>(random::uniform<float>(shape{n}, 11, -3.0, 3.0));
  const auto b = on<cpu>(random::uniform<float>(shape{n}, 12, -3.0, 3.0));
  const auto c = on<cpu>(random::uniform<float>(shape{n}, 13, -9.0, 9.0));
  const auto run = [&]<class H>(H) {
    std::vector<std::uint16_t> every(n);
    for (std::size_t i = 0; i < n; ++i) every[i] = std::uint16_t(i);  // all 65536 patterns: NaN, inf, subnormals
    tensor<H, cpu> x(shape{n});
    std::vector<H> xs(n);
    for (std::size_t i = 0; i < n; ++i) xs[i] = H::from_bits(every[i]);
    x = tensor<H, cpu>(shape{n}, xs);
    const tensor<H, cpu> z = cast<H>(b);
    std::vector<std::vector<std::uint16_t>> results;
    for (const host_isa isa : {host_isa::baseline, detected}) {
      backend::detail::sixteen_bit_isa = isa;
      std::vector<std::uint16_t> bits;
      const auto keep = [&](const auto& t) {
        for (const H v : t.to_vector()) bits.push_back(v.bits);
      };
      keep(tensor<H, cpu>(1.5f * x + z));
      keep(tensor<H, cpu>(cast<H>(a * b + c)));                        // an FMA would round a*b+c once
      keep(tensor<H, cpu>(cast<H>(a * c - b * c + a)));
      keep(tensor<H, cpu, 2>(cast<H>(reshape(a, shape{256, 256}) * 3.1f + reshape(c, shape{256, 256}))));  // by rows
      results.push_back(std::move(bits));
    }
    REQUIRE(results[0].size() == results[1].size());
    std::size_t differ = 0, first = 0;
    for (std::size_t i = results[0].size(); i-- > 0;)
      if (results[0][i] != results[1][i]) ++differ, first = i;
    INFO(differ << " of " << results[0].size() << " stores differ, the first at " << first);
    CHECK(differ == 0);
  };
  run(bfloat16{});
  run(locus::half{});
}
