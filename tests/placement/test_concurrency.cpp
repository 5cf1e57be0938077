#include "../common/test_support.hpp"

#include <atomic>
#include <thread>
#include <vector>

using namespace locus;

namespace {

// One worker: evaluations and transfers on device D, checked against a plain loop.
template <class D, class Other>
bool work(int seed, int iterations) {
  bool ok = true;
  for (int it = 0; it < iterations; ++it) {
    const auto host = locus_test::random_values<float>(257, -1, 1, static_cast<std::uint32_t>(seed * 1000 + it));
    tensor<float, D> a(host);
    auto b = on<D>(a * 2.f + 1.f);
    auto moved = to<Other>(b);
    auto back = to<D>(on<Other>(moved - 1.f));
    const auto got = back.to_vector();
    for (std::size_t i = 0; i < host.size(); ++i) ok = ok && got[i] == host[i] * 2.f + 1.f - 1.f;
  }
  return ok;
}

}  // namespace

TEST_CASE("concurrent evaluations, transfers and log lines from several threads", "[placement][threads]") {
  std::atomic<std::size_t> lines{0};
  scoped_placement_log log([&](std::string_view) { lines.fetch_add(1, std::memory_order_relaxed); });
  reset_transfer_stats();
  constexpr int iterations = 50;
  std::vector<char> ok(4, 0);
  std::vector<std::thread> threads;
#if LOCUS_HAS_GPUS
  threads.emplace_back([&] { ok[0] = work<cpu, gpu<0>>(0, iterations); });
  threads.emplace_back([&] { ok[1] = work<gpu<0>, gpu<1>>(1, iterations); });
  threads.emplace_back([&] { ok[2] = work<gpu<1>, cpu>(2, iterations); });
  threads.emplace_back([&] { ok[3] = work<gpu<1>, gpu<0>>(3, iterations); });
#else
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { ok[t] = work<cpu, cpu>(t, iterations); });
#endif
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<char>(4, 1));
  CHECK(lines.load() > 0);
  std::size_t copies = 0;
  for (const auto& [route, totals] : transfer_stats()) copies += totals.copies;
  CHECK(copies == (LOCUS_HAS_GPUS ? 4u * 2u * iterations : 0u));  // cpu->cpu clones are no transfers
}
