// Views of part of a tensor: t.row(i), t.rows(a, b), slice<0>(t, a, b), reshape(t, shape) as
// operands and destinations on the tensor's device, and what they refuse.
#include "../common/test_support.hpp"

#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

using namespace locus;
using locus_test::numeric_cases;

namespace {
template <class T>
std::vector<T> iota(std::size_t n, int from = 0) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(from + static_cast<int>(i));
  return v;
}
template <class T>
std::vector<T> part(const std::vector<T>& v, std::size_t first, std::size_t last) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(first), v.begin() + static_cast<std::ptrdiff_t>(last));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("row, rows, slice<0> and reshape view the same elements on the same device", "[tensor][views]",
                        numeric_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const auto values = iota<T>(12);
  tensor<T, D, 2> m(shape{4, 3}, values);

  auto r = m.row(2);
  STATIC_REQUIRE(std::is_same_v<decltype(r), tensor_view<T, D, 1>>);
  CHECK(r.data() == m.data() + 6);
  CHECK(r.shape() == shape{3});
  CHECK(r.to_vector() == part(values, 6, 9));

  auto rs = m.rows(1, 3);
  STATIC_REQUIRE(std::is_same_v<decltype(rs), tensor_view<T, D, 2>>);
  CHECK(rs.shape() == shape{2, 3});
  CHECK(rs.to_vector() == part(values, 3, 9));
  CHECK(slice<0>(m, 1, 3).data() == rs.data());
  CHECK(slice<0>(m, 1, 3).shape() == rs.shape());
  CHECK(slice<0>(m, 0, 4).to_vector() == values);

  auto flat = reshape(m, shape{12});
  STATIC_REQUIRE(std::is_same_v<decltype(flat), tensor_view<T, D, 1>>);
  CHECK(flat.data() == m.data());
  CHECK(flat.to_vector() == values);
  auto cube = reshape(m, shape{2, 2, 3});
  CHECK(cube.shape() == shape{2, 2, 3});
  CHECK(cube.row(1).row(0).to_vector() == part(values, 6, 9));

  // A view of a view, and the row of a vector: a rank-0 view of one element.
  CHECK(m.rows(1, 4).row(0).to_vector() == part(values, 3, 6));
  auto e = m.row(3).row(1);
  STATIC_REQUIRE(std::is_same_v<decltype(e), tensor_view<T, D, 0>>);
  CHECK(e.size() == 1);
  CHECK(e.to_vector() == std::vector<T>{T(10)});

  // A const tensor gives views of const elements; any integral index type works.
  const auto& cm = m;
  STATIC_REQUIRE(std::is_same_v<decltype(cm.row(0)), tensor_view<const T, D, 1>>);
  STATIC_REQUIRE(std::is_same_v<decltype(reshape(cm, shape{3, 4})), tensor_view<const T, D, 2>>);
  STATIC_REQUIRE(std::is_same_v<decltype(slice<0>(cm, 0u, 1ull)), tensor_view<const T, D, 2>>);
  CHECK(cm.row(std::uint8_t{1}).to_vector() == part(values, 3, 6));
}

TEMPLATE_LIST_TEST_CASE("views are expression operands: rows, broadcast rows and rank-0 elements", "[tensor][views]",
                        numeric_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> m(shape{3, 4}, iota<T>(12));
  const auto h = iota<T>(12);

  auto sum_rows = on<D>(m.row(0) + m.row(2));
  STATIC_REQUIRE(std::is_same_v<decltype(sum_rows), tensor<T, D, 1>>);
  std::vector<T> want(4);
  for (std::size_t c = 0; c < 4; ++c) want[c] = static_cast<T>(h[c] + h[8 + c]);
  CHECK(sum_rows.to_vector() == want);

  // A row broadcast over a matrix, and a rank-0 element broadcast everywhere.
  auto shifted = on<D>(m - m.row(0) + m.row(1).row(3));
  std::vector<T> want2(12);
  for (std::size_t i = 0; i < 12; ++i) want2[i] = static_cast<T>(h[i] - h[i % 4] + h[7]);
  CHECK(shifted.to_vector() == want2);

  auto v = on<D>(reshape(m, shape{2, 6}) * T(2));
  CHECK(v.shape() == shape{2, 6});
  std::vector<T> want3(12);
  for (std::size_t i = 0; i < 12; ++i) want3[i] = static_cast<T>(h[i] * 2);
  CHECK(v.to_vector() == want3);

  // Reductions and the placement rules take views too.
  auto s = on<D>(sum(m.row(1)));
  CHECK(s.item() == static_cast<decltype(s.item())>(h[4] + h[5] + h[6] + h[7]));
}

TEMPLATE_LIST_TEST_CASE("views are destinations: only their elements change", "[tensor][views]", numeric_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  const auto h = iota<T>(12);
  tensor<T, D, 2> m(shape{4, 3}, h);

  m.row(1) = m.row(0) * T(10);
  slice<0>(m, 2, 4) = slice<0>(m, 2, 4) + T(100);  // element for element: in place
  auto got = m.to_vector();
  std::vector<T> want = h;
  for (std::size_t c = 0; c < 3; ++c) want[3 + c] = static_cast<T>(h[c] * 10);
  for (std::size_t i = 6; i < 12; ++i) want[i] = static_cast<T>(h[i] + 100);
  CHECK(got == want);

  reshape(m, shape{12}) = reshape(m, shape{12}) - T(1);
  for (auto& x : want) x = static_cast<T>(x - 1);
  CHECK(m.to_vector() == want);

  m.row(3).fill(T(7));
  for (std::size_t c = 0; c < 3; ++c) want[9 + c] = T(7);
  CHECK(m.to_vector() == want);

  // An empty range is a destination and an operand that does nothing.
  m.rows(2, 2) = m.rows(1, 1) * T(3);
  CHECK(m.to_vector() == want);
}

TEMPLATE_LIST_TEST_CASE("an overlapping view as destination reads its operands first, as numpy's x[1:] = x[:-1]",
                        "[tensor][views][overlap]", numeric_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  // Long enough for the host's parallel loop: a plain in-place loop would smear x[0] forward.
  const std::size_t n = 40000;
  const auto h = iota<T>(n, -7);
  tensor<T, D> x(h);
  x.rows(1, n) = x.rows(0, n - 1) + T(0);
  auto got = x.to_vector();
  CHECK(got[0] == h[0]);
  bool shifted = true;
  for (std::size_t i = 1; i < n; ++i) shifted = shifted && got[i] == h[i - 1];
  CHECK(shifted);

  // The other way round, through reshape: rows of a matrix from the rows below them.
  tensor<T, D, 2> m(shape{3, 2}, iota<T>(6));
  slice<0>(m, 0, 2) = slice<0>(m, 1, 3) * T(2);
  CHECK(m.to_vector() == std::vector<T>{T(4), T(6), T(8), T(10), T(4), T(5)});
  // A matrix's own row broadcast over the matrix it writes.
  reshape(m, shape{3, 2}) = m + m.row(2);
  CHECK(m.to_vector() == std::vector<T>{T(8), T(11), T(12), T(15), T(8), T(10)});
}

TEMPLATE_LIST_TEST_CASE("bad rows, ranges and reshape sizes throw shape_error naming the shape and the index",
                        "[tensor][views][errors]", locus_test::float_cases) {
  using D = typename TestType::device;
  using T = typename TestType::value;
  tensor<T, D, 2> m(shape{3, 4}, T(1));
  CHECK_THROWS_WITH(m.row(3), "locus: row(3): index out of range for shape [3, 4] (rows 0 to 2)");
  CHECK_THROWS_WITH(m.row(-1), "locus: row(-1): index out of range for shape [3, 4] (rows 0 to 2)");
  CHECK_THROWS_WITH(m.row(0).row(4), "locus: row(4): index out of range for shape [4] (rows 0 to 3)");
  CHECK_THROWS_WITH(m.rows(2, 1), "locus: rows(2, 1): not a range of rows of shape [3, 4] (0 <= first <= last <= 3)");
  CHECK_THROWS_WITH(m.rows(0, 4), "locus: rows(0, 4): not a range of rows of shape [3, 4] (0 <= first <= last <= 3)");
  CHECK_THROWS_WITH(slice<0>(m, -2, 1),
                    "locus: slice<0>(-2, 1): not a range of rows of shape [3, 4] (0 <= first <= last <= 3)");
  CHECK_THROWS_WITH(reshape(m, shape{5, 3}),
                    "locus: reshape: a tensor of shape [3, 4] (12 elements) cannot be viewed as [5, 3] (15 elements)");
  CHECK_THROWS_WITH(reshape(m, shape<0>{}),
                    "locus: reshape: a tensor of shape [3, 4] (12 elements) cannot be viewed as [] (1 elements)");
  tensor<T, D, 2> none(shape{0, 4});
  CHECK_THROWS_WITH(none.row(0), "locus: row(0): index out of range for shape [0, 4] (no rows)");
  CHECK(none.rows(0, 0).size() == 0);
  tensor<T, D, 0> empty;
  CHECK_THROWS_WITH(reshape(empty, shape{1}),
                    "locus: reshape: a tensor of shape [] (0 elements, an empty rank-0 tensor) cannot be viewed as [1] "
                    "(1 elements)");
  // A shape whose element count wraps size_t is refused, not compared by its wrapped count:
  // 2^62 + 1 rows of 4 "are" 4 elements modulo 2^64, 2^32 x 2^32 "are" none.
  tensor<T, D, 1> four(shape{4}, T(1));
  const std::size_t big = (std::size_t{1} << 62) + 1, half = std::size_t{1} << 32;
  CHECK_THROWS_WITH(reshape(four, shape{big, std::size_t{4}}),
                    "locus: reshape: the shape [4611686018427387905, 4] has more elements than size_t can count");
  tensor<T, D, 1> nothing(shape{0});
  CHECK_THROWS_WITH(reshape(nothing, shape{half, half}),
                    "locus: reshape: the shape [4294967296, 4294967296] has more elements than size_t can count");
  // numpy's rule, as tensors: the non-zero extents' product must fit, whatever the zero extents.
  CHECK_THROWS_WITH(reshape(nothing, shape{half, std::size_t{0}, half}),
                    "locus: reshape: the shape [4294967296, 0, 4294967296] has more elements than size_t can count");
  CHECK(reshape(nothing, shape{half, std::size_t{0}, std::size_t{4}}).size() == 0);
  CHECK_THROWS_WITH((make_view<D>(four.data(), shape{half, half})),
                    "locus: make_view<" + id_of<D>.type_name() +
                        ">: the shape [4294967296, 4294967296] has more elements than size_t can count");
  CHECK_THROWS_WITH((make_view<D>(four.data(), shape{std::size_t{1} << 62, std::size_t{2}})),
                    "locus: make_view<" + id_of<D>.type_name() +
                        ">: the shape [4611686018427387904, 2] has more elements than size_t can count" +
                        (sizeof(T) > 1 ? std::string(" in bytes") : std::string()));
  // A reduction's rank-0 result reshapes to one element and back.
  auto s = on<D>(sum(m));
  CHECK(reshape(s, shape{1}).to_vector() == std::vector<T>{T(12)});
  CHECK(reshape(reshape(s, shape{1, 1}), shape<0>{}).size() == 1);

  // A mismatched destination view throws before anything is written.
  const auto before = m.to_vector();
  CHECK_THROWS_WITH(m.row(0) = m.row(1).rows(0, 2) * T(2),
                    "locus: assignment: the destination has shape [4], the expression [2]");
  CHECK(m.to_vector() == before);
}

TEST_CASE("cpu views have element access, and named views rebind like std::span", "[tensor][views]") {
  tensor<int, cpu, 2> m{{1, 2, 3}, {4, 5, 6}};
  CHECK(m.row(1)(2) == 6);
  m.row(1)(2) = 9;
  CHECK(m(1, 2) == 9);
  CHECK(reshape(m, shape{3, 2})(2, 1) == 9);
  CHECK(m.rows(1, 2)(0, 0) == 4);
  auto v = m.row(0);
  const auto w = m.row(1);
  v = w;  // rebinds v; writes nothing
  CHECK(v.data() == m.data() + 3);
  CHECK(m.to_vector() == std::vector<int>{1, 2, 3, 4, 5, 9});
  v = copy(m.row(0));  // writes the elements
  CHECK(m.to_vector() == std::vector<int>{1, 2, 3, 1, 2, 3});
}

TEMPLATE_LIST_TEST_CASE("views of bool tensors select and are selected", "[tensor][views]", locus_test::devices) {
  using D = TestType;
  tensor<bool, D, 2> mask{{true, false, true}, {false, false, true}};
  tensor<float, D, 2> x{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  auto picked = on<D>(where(mask.row(1), x.row(0), x.row(1)));
  CHECK(picked.to_vector() == std::vector<float>{4.f, 5.f, 3.f});
  mask.row(0) = x.row(1) > 4.5f;
  CHECK(mask.to_vector() == std::vector<bool>{false, true, true, false, false, true});
}

#if LOCUS_HAS_GPUS
TEST_CASE("views keep the placement rules: a gpu<1> view is an operand on gpu<1> only", "[tensor][views][gpu]") {
  tensor<float, gpu<1>, 2> m{{1.f, 2.f}, {3.f, 4.f}};
  tensor<float, gpu<0>> y{10.f, 20.f};
  auto z = on<gpu<1>, implicit_transfers>(m.row(1) + y);
  STATIC_REQUIRE(std::is_same_v<decltype(z), tensor<float, gpu<1>>>);
  CHECK(z.to_vector() == std::vector<float>{13.f, 24.f});
  auto h = to<cpu>(m.row(0));
  CHECK(h.to_vector() == std::vector<float>{1.f, 2.f});
}
#endif
