#include "../common/test_support.hpp"

#include <locus/ad/ad.hpp>

#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
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

TEST_CASE("a limited placement log counts evaluations exactly across threads, each one whole",
          "[placement][log][limit][threads]") {
  tensor<float, cpu> a{1.f, 2.f}, b{3.f, 4.f};
  a.set_name("a");
  b.set_name("b");
  std::mutex m;
  std::vector<std::string> lines;
  constexpr std::size_t first = 70;
  {
    scoped_placement_log log(placement_log_options{.first = first}, [&](std::string_view l) {
      std::lock_guard lock(m);
      lines.emplace_back(l);
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) auto c = on<cpu>(a + b);  // 3 lines each
      });
    for (auto& t : threads) t.join();
    CHECK_FALSE(log_device_placement());
  }
  CHECK(lines.size() == 3 * first);
  std::size_t as = 0, bs = 0, adds = 0;
  for (const auto& l : lines) {
    as += l.rfind("a: ", 0) == 0;
    bs += l.rfind("b: ", 0) == 0;
    adds += l.rfind("add: ", 0) == 0;
  }
  CHECK(as == first);
  CHECK(bs == first);
  CHECK(adds == first);
}

TEST_CASE("placement-log scopes on two threads overlap and end in any order, and no sink is called after its scope",
          "[placement][log][threads]") {
  tensor<float, cpu> a{1.f, 2.f};
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> evaluations{0};
  // A third thread evaluates all along, so that lines are in flight while the scopes come and go.
  std::thread evaluator([&] {
    while (!stop.load()) {
      auto c = on<cpu>(a + 1.f);
      evaluations.fetch_add(c.size() > 0 ? 1 : 0);
    }
  });
  // A sink's state: lines from several threads arrive concurrently, so it locks.
  struct lines_seen {
    std::mutex m;
    std::vector<std::string> lines;
    void add(std::string_view l) {
      std::lock_guard lock(m);
      lines.emplace_back(l);
    }
  };
  for (int round = 0; round < 200; ++round) {
    auto first = std::make_unique<lines_seen>();
    auto second = std::make_unique<lines_seen>();
    auto outer = std::make_unique<scoped_placement_log>([v = first.get()](std::string_view l) { v->add(l); });
    std::thread other([&] {
      scoped_placement_log inner([v = second.get()](std::string_view l) { v->add(l); });
      auto c = on<cpu>(a * 2.f);
      // `outer` ends first, on the main thread, while this scope is alive (non-LIFO).
    });
    outer.reset();
    first.reset();  // its sink is gone: a line routed to it now would write into freed memory
    other.join();
    second.reset();
  }
  stop = true;
  evaluator.join();
  CHECK(evaluations.load() > 0);
  CHECK_FALSE(log_device_placement());  // no scope alive: off again (nothing switched it on for good)
}

TEST_CASE("a placement sink may wait for another thread that logs, and may end its own scope",
          "[placement][log][threads]") {
  tensor<float, cpu> a{1.f, 2.f};
  std::atomic<int> depth{0}, lines{0};
  {
    scoped_placement_log log([&](std::string_view) {
      lines.fetch_add(1);
      if (depth.fetch_add(1) == 0) {
        // Another thread evaluates (and so logs into this very sink) while this call waits for it.
        std::thread helper([&] { (void)on<cpu>(a * 2.f); });
        helper.join();
      }
    });
    auto r = on<cpu>(a + a);
    CHECK(r.to_vector() == std::vector<float>{2.f, 4.f});
  }
  CHECK(lines.load() >= 2);
  // A sink that ends its own scope (the scope lives on the heap) returns; its line is the last.
  std::unique_ptr<scoped_placement_log> self_ending;
  std::atomic<int> calls{0};
  self_ending = std::make_unique<scoped_placement_log>([&](std::string_view) {
    calls.fetch_add(1);
    self_ending.reset();
  });
  (void)on<cpu>(a + 1.f);
  (void)on<cpu>(a + 2.f);
  CHECK(calls.load() == 1);
  CHECK(self_ending == nullptr);
}

TEST_CASE("a placement sink may read transfer_stats and log again without deadlocking", "[placement][log][threads]") {
  std::size_t seen = 0;
  std::vector<std::string> lines;
  {
    scoped_placement_log log([&](std::string_view l) {
      lines.emplace_back(l);
      for (const auto& entry : transfer_stats()) seen += entry.second.copies;  // takes locus's ledger lock
      if (lines.size() == 1) (void)on<cpu>(tensor<float, cpu>{1.f} + 1.f);   // re-enters the log
    });
    tensor<float, cpu> a{1.f};
    auto b = on<cpu>(a + 1.f);
    CHECK(b.item() == 2.f);
  }
  CHECK(lines.size() >= 2);
  (void)seen;
}

TEST_CASE("configure_logical_gpus racing allocations on other threads never frees what they use",
          "[placement][registry][threads]") {
#if LOCUS_HAS_GPUS
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> done{0}, refused{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&] {
      while (!stop.load()) {
        try {
          tensor<float, gpu<0>> x(shape{64}, 1.f);
          auto y = on<gpu<0>>(x * 2.f);
          if (y.to_vector()[63] == 2.f) done.fetch_add(1);
        } catch (const device_error&) {
          refused.fetch_add(1);  // gpu<0> momentarily unavailable: refused by name, never a crash
        }
      }
    });
  std::size_t reconfigured = 0, busy = 0, rounds = 0;
  // At least 300 reconfigurations, and on until the workers have finished some work (bounded).
  for (int i = 0; (i < 300 || done.load() < 20) && i < 2000000; ++i, ++rounds) {
    try {
      configure_logical_gpus(1 + i % 3);
      ++reconfigured;
    } catch (const device_error&) {
      ++busy;  // a worker's tensor was alive
    }
  }
  stop = true;
  for (auto& w : workers) w.join();
  configure_logical_gpus(2);
  CHECK(gpu_count() == 2);
  CHECK(done.load() > 0);
  CHECK(reconfigured + busy == rounds);  // each call either reconfigured or was refused by name
#endif
  CHECK_THROWS_WITH(configure_logical_gpus(std::numeric_limits<int>::max()),
                    Catch::Contains("need 1 to 4096 logical GPUs"));
  CHECK_THROWS_AS(configure_logical_gpus(0), device_error);
#if LOCUS_HAS_GPUS
  CHECK(gpu_count() == 2);  // a refused configuration changes nothing
#endif
}

TEST_CASE("ad: two threads differentiate at once", "[ad]") {
  auto work = [](float k, std::vector<float>& out) {
    tensor<float, cpu> a(shape{1000}, k);
    for (int i = 0; i < 20; ++i) out = ad::grad([](auto& x) { return sum(x * x * x); }, a).to_vector();
  };
  std::vector<float> r1, r2;
  std::thread t1(work, 1.f, std::ref(r1)), t2(work, 2.f, std::ref(r2));
  t1.join();
  t2.join();
  CHECK(r1 == std::vector<float>(1000, 3.f));
  CHECK(r2 == std::vector<float>(1000, 12.f));
}
