#include "../common/test_support.hpp"

#include <cmath>
#if defined(__unix__)
#  include <dlfcn.h>
#endif
#include <vector>

using namespace locus;
using locus_test::float_cases;
using locus_test::random_values;

namespace {

// C = op(A) * op(B) in double, A stored [ar x ac], B [br x bc].
template <class T>
std::vector<double> reference(const std::vector<T>& a, std::size_t ar, std::size_t ac, bool ta, const std::vector<T>& b,
                              std::size_t br, std::size_t bc, bool tb) {
  const std::size_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  std::vector<double> c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::size_t p = 0; p < k; ++p) s += double(ta ? a[p * ac + i] : a[i * ac + p]) * double(tb ? b[j * bc + p] : b[p * bc + j]);
      c[i * n + j] = s;
    }
  return c;
}

template <class T>
double tol(std::size_t k) {
  return (std::is_same_v<T, float> ? 2e-6 : 1e-14) * double(k);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("matmul matches a double-precision loop, transposes included", "[ops][matmul]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const std::size_t m = 37, k = 65, n = 19;
  const auto ha = random_values<T>(m * k, -1, 1, 21), hb = random_values<T>(k * n, -1, 1, 22);
  tensor<T, D, 2> a(shape{m, k}, ha), b(shape{k, n}, hb);
  tensor<T, D, 2> at(shape{k, m}, ha), bt(shape{n, k}, hb);  // the same numbers read as the transposes' storage
  auto c = on<D>(matmul(a, b));
  STATIC_REQUIRE(std::is_same_v<decltype(c), tensor<T, D, 2>>);
  CHECK(c.shape() == shape{m, n});
  CHECK(locus_test::all_close(c.to_vector(), reference(ha, m, k, false, hb, k, n, false), tol<T>(k)));
  CHECK(locus_test::all_close(on<D>(matmul(transpose(at), b)).to_vector(), reference(ha, k, m, true, hb, k, n, false),
                              tol<T>(k)));
  CHECK(locus_test::all_close(on<D>(matmul(a, transpose(bt))).to_vector(), reference(ha, m, k, false, hb, n, k, true),
                              tol<T>(k)));
  CHECK(locus_test::all_close(on<D>(matmul(transpose(at), transpose(bt))).to_vector(),
                              reference(ha, k, m, true, hb, n, k, true), tol<T>(k)));
}

TEMPLATE_LIST_TEST_CASE("matmul writes into a destination and accumulates with +=", "[ops][matmul]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> a{{T(1), T(2)}, {T(3), T(4)}}, b{{T(5), T(6)}, {T(7), T(8)}};
  tensor<T, D, 2> c(shape{2, 2}, T(100));
  const T* storage = c.data();
  const auto live = memory_stats(id_of<D>).live_blocks;
  c = matmul(a, b);
  CHECK(c.data() == storage);
  CHECK(memory_stats(id_of<D>).live_blocks == live);  // no temporary
  CHECK(c.to_vector() == std::vector<T>{T(19), T(22), T(43), T(50)});
  c += matmul(a, b);
  CHECK(c.to_vector() == std::vector<T>{T(38), T(44), T(86), T(100)});
  a = matmul(a, a);  // the destination is an operand: computed through a temporary
  CHECK(a.to_vector() == std::vector<T>{T(7), T(10), T(15), T(22)});
}

TEMPLATE_LIST_TEST_CASE("matmul(a, b, tf32) is the float product, accumulation and transposes kept",
                        "[ops][matmul][tf32]", locus_test::devices) {
  using D = TestType;
  const auto va = random_values<float>(6 * 5, -1, 1, 7), vb = random_values<float>(5 * 4, -1, 1, 8);
  const tensor<float, D, 2> a = to<D>(tensor<float, cpu, 2>(shape{6, 5}, va));
  const tensor<float, D, 2> b = to<D>(tensor<float, cpu, 2>(shape{5, 4}, vb));
  tensor<float, D, 2> exact = matmul(a, b), fast = matmul(a, b, tf32);
  const auto e = to<cpu>(exact).to_vector(), f = to<cpu>(fast).to_vector();
  // TF32 keeps 10 of float's 23 fraction bits in the products: within 2^-10 relative of the sum of
  // magnitudes on a CUDA GPU; host-run devices compute the float product exactly.
  for (std::size_t i = 0; i < e.size(); ++i) {
    if constexpr (backend::runs_on_host<D>) CHECK(f[i] == e[i]);
    else CHECK(std::abs(f[i] - e[i]) <= 5.f * 0x1p-10f);
  }
  fast += matmul(a, b, tf32);
  const auto twice = to<cpu>(fast).to_vector();
  CHECK(std::abs(twice[3] - 2 * e[3]) <= 1e-2f);
  const tensor<float, D, 2> t = matmul(transpose(b), transpose(a), tf32);
  CHECK(t.shape() == shape<2>{4, 6});
  CHECK(std::abs(to<cpu>(t).to_vector()[1] - e[4]) <= 1e-2f);  // (B^T A^T)[0, 1] = (A B)[1, 0]
}

TEST_CASE("matmul checks inner extents before running", "[ops][matmul][errors]") {
  tensor<float, cpu, 2> a(shape{2, 3}), b(shape{4, 2});
  CHECK_THROWS_WITH(on<cpu>(matmul(a, b)), "locus: matmul: the inner extents differ: [2, 3] x [4, 2]");
  CHECK_THROWS_WITH(on<cpu>(matmul(transpose(a), b)), "locus: matmul: the inner extents differ: [2, 3]^T x [4, 2]");
  CHECK(on<cpu>(matmul(transpose(a), transpose(b))).shape() == shape{3, 4});
  tensor<float, cpu, 2> c(shape{5, 5}, 1.f);
  CHECK_THROWS_AS(c = matmul(a, transpose(b)), shape_error);  // [2, 4] into [5, 5]
  CHECK(c.to_vector() == std::vector<float>(25, 1.f));
}

TEST_CASE("matmul at the MLP's shapes", "[ops][matmul]") {
  const std::size_t batch = 256, in = 784, hidden = 256;
  const auto hx = random_values<float>(batch * in, 0, 1, 23), hw = random_values<float>(in * hidden, -0.1, 0.1, 24);
  tensor<float, cpu, 2> x(shape{batch, in}, hx), w(shape{in, hidden}, hw);
  const auto h = on<cpu>(matmul(x, w)).to_vector();
  const auto ref = reference(hx, batch, in, false, hw, in, hidden, false);
  CHECK(locus_test::all_close(h, ref, tol<float>(in)));
}

#if defined(__unix__) && LOCUS_HAS_CBLAS && !defined(LOCUS_NO_BLAS)
TEST_CASE("a pthread-built OpenBLAS runs each of locus's product pieces on its calling thread", "[ops][matmul][blas]") {
  // Its thread count is process-wide: left at the core count, every piece of a product on the host
  // pool started OpenBLAS's own threads beside the pool's (sched_yield spinning on shared cores).
  const auto threads = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  tensor<float, cpu, 2> a(shape{64, 64}, 1.f), b(shape{64, 64}, 2.f);
  auto c = on<cpu>(matmul(a, b));
  CHECK(c.to_vector()[0] == 128.f);
  if (backend::detail::pthreads_openblas_threads() == nullptr || threads == nullptr) {
    WARN("the BLAS is not a pthreads OpenBLAS: nothing to check");
    return;
  }
  CHECK(threads() == 1);
}
#endif

#if LOCUS_HAS_GPUS
TEST_CASE("matmul is placed like any expression", "[ops][matmul][placement]") {
  tensor<float, gpu<0>, 2> a{{1.f, 0.f}, {0.f, 1.f}};
  tensor<float, gpu<1>, 2> b{{2.f, 3.f}, {4.f, 5.f}};
  locus_test::log_capture log;
  auto c = on<gpu<1>, implicit_transfers>(matmul(a, b));
  STATIC_REQUIRE(std::is_same_v<decltype(c), tensor<float, gpu<1>, 2>>);
  CHECK(c.to_vector() == std::vector<float>{2.f, 3.f, 4.f, 5.f});
  CHECK(log.lines.back() == "matmul: (MatMul): " + locus_test::logged({device_kind::gpu, 1}));
}
#endif

TEMPLATE_LIST_TEST_CASE("C += matmul(A, B) into an empty C is refused, into a [0, n] product it does nothing",
                        "[ops][matmul][errors]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> a(shape{2, 3}, T(1)), b(shape{3, 2}, T(1));
  {
    // Leave a recycled block of the product's size in the arena, holding large values.
    tensor<T, D, 2> junk(shape{2, 2}, T(1000));
  }
  tensor<T, D, 2> c;
  CHECK_THROWS_WITH(c += matmul(a, b), Catch::Contains("C is empty"));
  CHECK(c.empty());
  c = matmul(a, b);
  c += matmul(a, b);
  CHECK(c.to_vector() == std::vector<T>(4, T(6)));
  tensor<T, D, 2> a0(shape{0, 3}), c0(shape{0, 2});
  c0 += matmul(a0, b);
  CHECK(c0.empty());
}

TEMPLATE_LIST_TEST_CASE("extents past BLAS's int go to a path that counts in 64 bits", "[ops][matmul][large]",
                        float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  // Operands past INT_MAX need 16 GB; the limit is lowered instead, so the same dispatch runs on
  // small ones: the results must equal the plain BLAS path's, transposes and accumulation included.
  const std::size_t m = 37, k = 150, n = 41;
  const auto ha = locus_test::random_values<T>(m * k, -1, 1, 1), hb = locus_test::random_values<T>(k * n, -1, 1, 2);
  tensor<T, D, 2> a(shape{m, k}, ha), b(shape{k, n}, hb), at(shape{k, m}, ha);
  const auto plain = on<D>(matmul(a, b)).to_vector();
  const auto plain_t = on<D>(matmul(transpose(at), b)).to_vector();
  struct restore {
    std::size_t saved = backend::detail::blas_int_limit;
    ~restore() { backend::detail::blas_int_limit = saved; }
  } guard;
  for (std::size_t limit : {std::size_t{100}, std::size_t{40}}) {
    backend::detail::blas_int_limit = limit;
    const auto big = on<D>(matmul(a, b)).to_vector();
    const auto big_t = on<D>(matmul(transpose(at), b)).to_vector();
    tensor<T, D, 2> acc = on<D>(matmul(a, b));
    acc += matmul(a, b);
    const auto twice = acc.to_vector();
    REQUIRE(big.size() == plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      CHECK(std::abs(double(big[i]) - double(plain[i])) <= 1e-4 * (1 + std::abs(double(plain[i]))));
      CHECK(std::abs(double(big_t[i]) - double(plain_t[i])) <= 1e-4 * (1 + std::abs(double(plain_t[i]))));
      CHECK(std::abs(double(twice[i]) - 2 * double(plain[i])) <= 2e-4 * (1 + std::abs(double(plain[i]))));
    }
  }
}

TEMPLATE_LIST_TEST_CASE("a product over an empty inner extent is zeros, and += leaves C as it was",
                        "[ops][matmul][empty]", float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> a(shape{3, 0}), b(shape{0, 2});
  CHECK(on<D>(matmul(a, b)).to_vector() == std::vector<T>(6, T(0)));
  tensor<T, D, 2> c(shape{3, 2}, T(5));
  c += matmul(a, b);
  CHECK(c.to_vector() == std::vector<T>(6, T(5)));
  c = matmul(a, b);
  CHECK(c.to_vector() == std::vector<T>(6, T(0)));
}
