// Slices along any axis and concat (expr/gather.hpp, ad/ops.hpp): values against hand loops on the
// cpu and an emulated GPU, fusion into the consuming kernel, the placement log, bad ranges and
// shapes, an overlapping destination, gradients, and a two-input model trained through them.
#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/ad/ad.hpp>
#include <locus/train/layers.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

using namespace locus;
using locus_test::error_of;

namespace {
/// 0, 1, 2, ... as a tensor of shape s on D.
template <class D, int R>
tensor<float, D, R> iota(shape<R> s) {
  std::vector<float> v(s.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return tensor<float, D, R>(s, v);
}

template <class D>
void slices_and_concats() {
  const auto m = iota<D>(shape{3, 4});  // m(r, c) = 4r + c
  // Columns [1, 3): one kernel with the arithmetic around it.
  const auto before = kernel_launches(id_of<D>);
  tensor<float, D, 2> cols = on<D>(slice<1>(m, 1, 3) * 2.f + 1.f);
  CHECK(kernel_launches(id_of<D>) - before == 1);
  CHECK(cols.shape() == shape{3, 2});
  CHECK(cols.to_vector() == std::vector<float>{3, 5, 11, 13, 19, 21});
  // Rows of an expression, and an empty slice.
  tensor<float, D, 2> rows = slice<0>(m * 1.f, 1, 3);
  CHECK(rows.to_vector() == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11});
  tensor<float, D, 2> none = slice<1>(m, 2, 2);
  CHECK(none.shape() == shape{3, 0});
  // Rank 3, the middle and the last axis.
  const auto c = iota<D>(shape{2, 3, 4});  // c(i, j, k) = 12i + 4j + k
  tensor<float, D, 3> mid = slice<1>(c, 1, 3), last = slice<2>(c, 3, 4);
  CHECK(mid.to_vector() == std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23});
  CHECK(last.to_vector() == std::vector<float>{3, 7, 11, 15, 19, 23});
  // concat along each axis, of tensors and expressions, two or three operands.
  const auto a = iota<D>(shape{2, 2});  // [[0, 1], [2, 3]]
  tensor<float, D, 2> rows2 = concat<0>(a, a * 10.f);
  CHECK(rows2.to_vector() == std::vector<float>{0, 1, 2, 3, 0, 10, 20, 30});
  tensor<float, D, 2> cols3 = concat<1>(a, a + 1.f, slice<1>(a, 1, 2));
  CHECK(cols3.shape() == shape{2, 5});
  CHECK(cols3.to_vector() == std::vector<float>{0, 1, 1, 2, 1, 2, 3, 3, 4, 3});
  tensor<float, D, 3> deep = concat<2>(slice<2>(c, 0, 1), slice<2>(c, 3, 4));
  CHECK(deep.to_vector() == std::vector<float>{0, 3, 4, 7, 8, 11, 12, 15, 16, 19, 20, 23});
  tensor<float, D, 2> with_empty = concat<1>(slice<1>(a, 0, 0), a);
  CHECK(with_empty.to_vector() == a.to_vector());
  // Concat of two slices is the identity; a reduction reads through them.
  tensor<float, D, 0> total = sum(concat<1>(slice<1>(m, 0, 1), slice<1>(m, 1, 4)));
  CHECK(total.item() == 66.f);
  // Swapping columns in place: the operands overlap the destination, read into a temporary first.
  auto s = iota<D>(shape{2, 2});
  s = concat<1>(slice<1>(s, 1, 2), slice<1>(s, 0, 1));
  CHECK(s.to_vector() == std::vector<float>{1, 0, 3, 2});
  // 16-bit operands keep their type.
  const tensor<bfloat16, D, 2> h = cast<bfloat16>(a);
  tensor<bfloat16, D, 2> hh = concat<1>(h, slice<1>(h, 0, 1));
  CHECK(hh.shape() == shape{2, 3});
  CHECK(float(hh.to_vector()[5]) == 2.f);
}
}  // namespace

TEST_CASE("slice on any axis and concat: values, one fused kernel, rank 3, empty parts, overlap, 16 bits",
          "[expr][gather]") {
  slices_and_concats<cpu>();
#if LOCUS_HAS_GPUS
  slices_and_concats<gpu<1>>();
#endif
}

TEST_CASE("slice and concat: the placement log names them, bad ranges and shapes are named", "[expr][gather]") {
  const auto m = iota<cpu>(shape{3, 4});
  std::string lines;
  {
    scoped_placement_log log([&](std::string_view l) { lines += std::string(l) + "\n"; });
    tensor<float, cpu, 2> t = concat<1>(slice<1>(m, 0, 1), m);
  }
  CHECK(lines.find("slice: (Slice)") != std::string::npos);
  CHECK(lines.find("concat: (ConcatV2)") != std::string::npos);
  CHECK(error_of([&] { (void)slice<1>(m, 3, 2); }) ==
        "locus: slice<1>(3, 2): not a range of axis 1 of shape [3, 4] (0 <= first <= last <= 4)");
  CHECK(error_of([&] { (void)slice<1>(m, 0, 5); }).find("not a range of axis 1 of shape [3, 4]") != std::string::npos);
  CHECK(error_of([&] { (void)slice<1>(m, -1, 2); }).find("slice<1>(-1, 2)") != std::string::npos);
  const auto other = iota<cpu>(shape{2, 4});
  CHECK(error_of([&] { (void)concat<1>(m, other); }) ==
        "locus: concat<1>: operands of shapes [3, 4] and [2, 4] differ outside axis 1");
  CHECK_NOTHROW((void)concat<0>(m, other));
  // Three operands: the message names two of them as written, not an inner join.
  const auto three = iota<cpu>(shape{3, 4});
  CHECK(error_of([&] { (void)concat<1>(other, three, three); }) ==
        "locus: concat<1>: operands of shapes [2, 4] and [3, 4] differ outside axis 1");
  // A joined extent or a result size that size_t cannot count: refused, not wrapped to empty.
  const auto huge = random::uniform<float>(shape{std::size_t{1} << 63}, 1);
  CHECK(error_of([&] { (void)concat<0>(huge, huge); }).find("more elements than size_t can count") !=
        std::string::npos);
  const auto wide = random::uniform<float>(shape{std::size_t{1} << 32, std::size_t{1} << 31}, 1);
  CHECK(error_of([&] { (void)concat<1>(wide, wide); }) ==
        "locus: concat<1>: the shape [4294967296, 4294967296] has more elements than size_t can count");
  // Refused before anything is written.
  tensor<float, cpu, 2> dst(shape{3, 8}, 7.f);
  CHECK_THROWS_AS(dst = concat<1>(m, slice<1>(m, 0, 5)), shape_error);
  CHECK(dst.to_vector() == std::vector<float>(24, 7.f));
}

TEST_CASE("ad: gradients through slice and concat", "[expr][gather][ad]") {
  const auto x0 = iota<cpu>(shape{2, 4});
  // d/dx sum(slice<1>(x, 1, 3)^2) = 2x inside the window, 0 outside.
  auto g = ad::grad([](auto& x) { return sum(slice<1>(x, 1, 3) * slice<1>(x, 1, 3)); }, x0);
  CHECK(g.to_vector() == std::vector<float>{0, 2, 4, 0, 0, 10, 12, 0});
  // d/dx and d/dy of sum(concat<1>(x, y * y) * w): w's left part for x, 2 y w's right part for y.
  const auto y0 = iota<cpu>(shape{2, 2});
  const auto w = iota<cpu>(shape{2, 6});  // w(r, c) = 6r + c
  auto [loss, grads] = ad::value_and_grad(
      [&](auto& p) {
        auto& [x, y] = p;
        return sum(concat<1>(x, y * y) * w);
      },
      std::tie(x0, y0));
  CHECK(std::get<0>(grads).to_vector() == std::vector<float>{0, 1, 2, 3, 6, 7, 8, 9});
  CHECK(std::get<1>(grads).to_vector() == std::vector<float>{0, 2 * 1 * 5, 2 * 2 * 10, 2 * 3 * 11});
  double want = 0;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 6; ++c) {
      const double v = c < 4 ? 4 * r + c : std::pow(2 * r + (c - 4), 2);
      want += v * (6 * r + c);
    }
  CHECK(double(loss.item()) == want);
  // Rows (axis 0) and a slice of a concat.
  auto g0 = ad::grad([](auto& x) { return sum(slice<0>(concat<0>(x, x * 3.f), 1, 3)); }, y0);
  CHECK(g0.to_vector() == std::vector<float>{3, 3, 1, 1});
}

TEST_CASE("a two-input model: slices of the features, two branches, concat, trained", "[expr][gather][train]") {
  namespace nn = train::nn;
  // Features 0-7 and 8-15 go through branches of their own, joined by concat.
  train::functional model{train::parameters{nn::glorot(8, 8), nn::glorot(8, 8), nn::glorot(16, 4), nn::zeros(4)},
                          [](const auto& p, const auto& x) {
                            const auto& [wa, wb, w, b] = p;
                            const auto left = tanh(matmul(slice<1>(x, 0, 8), wa));
                            const auto right = tanh(matmul(slice<1>(x, 8, 16), wb));
                            return matmul(concat<1>(left, right), w) + b;
                          }};
  const auto data = locus_test::synthetic(2048, 8), test = locus_test::synthetic(512, 9);
  train::data_parallel<train::sync_average, cpu> trainer{model, train::sgd{0.2f, 0.9f}};
  const double before = trainer.accuracy(test);
  (void)trainer.fit(data, locus_test::quiet(6, 64));
  CHECK(trainer.accuracy(test) > 0.85);
  CHECK(trainer.accuracy(test) > before + 0.3);
}
