// The host's thread budget and pool (backend/pool.hpp, issue 31).
#include "../common/test_support.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include <mutex>
#include <utility>
#if defined(__unix__)
#  include <sys/wait.h>
#  include <unistd.h>
#endif

using namespace locus;
namespace bd = locus::backend::detail;

TEST_CASE("cgroup cpu.max lines give the quota in CPUs, or none", "[threads]") {
  CHECK(bd::parse_cpu_max("max 100000") == std::nullopt);
  CHECK(bd::parse_cpu_max("150000 100000") == 1.5);
  CHECK(bd::parse_cpu_max("50000 100000\n") == 0.5);
  CHECK(bd::parse_cpu_max("200000") == 2.0);  // the period defaults to 100000
  CHECK(bd::parse_cpu_max("") == std::nullopt);
  CHECK(bd::parse_cpu_max("-1 100000") == std::nullopt);  // v1's "no limit"
  CHECK(bd::parse_cpu_max("0 100000") == std::nullopt);
  CHECK(bd::parse_cpu_max("abc 100000") == std::nullopt);
  CHECK(bd::parse_cpu_max("100000 0") == std::nullopt);
  CHECK(bd::parse_cpu_max("1e400 1") == std::nullopt);
}

TEST_CASE("OMP_NUM_THREADS values: a positive count or nothing", "[threads]") {
  CHECK(bd::parse_thread_count(nullptr) == std::nullopt);
  CHECK(bd::parse_thread_count("4") == 4);
  CHECK(bd::parse_thread_count("4,2") == 4);  // nested levels: the first is locus's
  CHECK(bd::parse_thread_count(" 3") == 3);
  CHECK(bd::parse_thread_count("0") == std::nullopt);
  CHECK(bd::parse_thread_count("-2") == std::nullopt);
  CHECK(bd::parse_thread_count("two") == std::nullopt);
  CHECK(bd::parse_thread_count("4x") == std::nullopt);
  CHECK(bd::parse_thread_count("99999999999999999999") == std::nullopt);
  CHECK(bd::parse_thread_count("4 junk") == std::nullopt);
  CHECK(bd::parse_thread_count("4 ") == 4);
  CHECK(bd::parse_thread_count("5000") == backend::max_host_threads);  // capped, not ignored
}

TEST_CASE("the budget: affinity, then the cgroup quota, shared by the ranks on the node, an override first",
          "[threads]") {
  auto p = bd::choose_threads(8, std::nullopt, 1, std::nullopt, "OMP_NUM_THREADS");
  CHECK(p.threads == 8);
  CHECK(p.source == "affinity");
  p = bd::choose_threads(8, 2.5, 1, std::nullopt, "OMP_NUM_THREADS");
  CHECK(p.threads == 3);  // a quota of 2.5 CPUs: 3 threads, none idle
  CHECK(p.source == "cgroup quota");
  p = bd::choose_threads(8, 0.2, 1, std::nullopt, "OMP_NUM_THREADS");
  CHECK(p.threads == 1);
  p = bd::choose_threads(2, 16.0, 1, std::nullopt, "OMP_NUM_THREADS");
  CHECK(p.threads == 2);  // a quota above the affinity mask changes nothing
  CHECK(p.source == "affinity");
  p = bd::choose_threads(2, std::nullopt, 2, std::nullopt, "OMP_NUM_THREADS");
  CHECK(p.threads == 1);  // mpirun -np 2 on 2 cores: one thread per rank
  CHECK(p.source == "affinity, shared by 2 MPI ranks on the node");
  p = bd::choose_threads(2, std::nullopt, 4, std::nullopt, "OMP_NUM_THREADS");
  CHECK(p.threads == 1);
  p = bd::choose_threads(2, 1.0, 2, 6, "OMP_NUM_THREADS");
  CHECK(p.threads == 6);
  CHECK(p.source == "OMP_NUM_THREADS");
}

TEST_CASE("set_host_threads sets the process's budget, 0 gives the automatic one back, negative throws",
          "[threads]") {
  const int automatic = backend::host_parallelism_info().threads;
  CHECK(automatic >= 1);
  CHECK(backend::host_parallelism_info().grain == backend::serial_threshold);
  backend::set_host_threads(5);
  CHECK(backend::host_threads() == 5);
  CHECK(backend::host_parallelism_info().threads == 5);
  CHECK(backend::host_parallelism_info().source == "set_host_threads");
  {
    const backend::scoped_host_threads two(2);  // a thread's own limit comes first
    CHECK(backend::host_threads() == 2);
  }
  CHECK(backend::host_threads() == 5);
  try {
    backend::set_host_threads(-1);
    FAIL("no exception");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()).find("set_host_threads(-1)") != std::string::npos);
  }
  CHECK(backend::host_threads() == 5);  // unchanged by the refused call
  backend::set_host_threads(100000);
  CHECK(backend::host_threads() == backend::max_host_threads);
  backend::set_host_threads(0);
  CHECK(backend::host_threads() == automatic);
}

TEST_CASE("parallel_chunks runs every chunk once, on several threads", "[threads]") {
  const backend::scoped_host_threads four(4);
  for (std::size_t chunks : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{1000}}) {
    std::vector<std::atomic<int>> runs(chunks);
    backend::parallel_chunks(chunks, [&](std::size_t c) { runs[c].fetch_add(1); });
    for (std::size_t c = 0; c < chunks; ++c) CHECK(runs[c].load() == 1);
  }
  // parallel_ranges covers [0, n) with disjoint pieces, whatever n and the grain.
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{16384}, std::size_t{100003}}) {
    std::vector<std::atomic<int>> seen(n);
    std::atomic<int> empty_pieces{0};  // counted here: Catch's assertions are not for other threads
    backend::parallel_ranges(n, [&](std::size_t b, std::size_t e) {
      if (b >= e) empty_pieces.fetch_add(1);
      for (std::size_t i = b; i < e; ++i) seen[i].fetch_add(1);
    }, 64);
    CHECK(empty_pieces.load() == 0);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(seen[i].load() == 1);
  }
}

TEST_CASE("a chunk that throws: the exception reaches the caller, and the pool goes on", "[threads]") {
  const backend::scoped_host_threads four(4);
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(backend::parallel_chunks(64,
                                             [&](std::size_t c) {
                                               ran.fetch_add(1);
                                               if (c == 5) throw std::runtime_error("chunk 5 failed");
                                             }),
                    "chunk 5 failed");
  CHECK(ran.load() >= 1);
  std::atomic<int> after{0};
  backend::parallel_chunks(64, [&](std::size_t) { after.fetch_add(1); });
  CHECK(after.load() == 64);
}

TEST_CASE("a kernel never waits for a worker that has not come", "[threads]") {
  // The pool's workers are all held inside another thread's kernel; a kernel started now must
  // still finish: its caller runs every chunk itself. A fork-join team (an OpenMP region) would
  // wait for the held threads.
  backend::set_host_threads(3);  // two workers
  std::atomic<bool> release{false};
  std::atomic<int> entered{0};
  std::thread holder([&] {
    backend::parallel_chunks(3, [&](std::size_t) {
      entered.fetch_add(1);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    });
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (entered.load() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(entered.load() == 3);  // the holder's caller and both workers are inside
  std::vector<int> out(256, 0);
  backend::parallel_chunks(out.size(), [&](std::size_t c) { out[c] = int(c) + 1; });
  release = true;
  holder.join();
  backend::set_host_threads(0);
  for (std::size_t c = 0; c < out.size(); ++c) REQUIRE(out[c] == int(c) + 1);
}

TEST_CASE("kernels from several threads at once, and kernels inside kernels", "[threads]") {
  const int n = 1 << 18;
  tensor<float, cpu> a(shape{std::size_t(n)}, 1.f);
  std::vector<std::thread> threads;
  std::vector<double> sums(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const backend::scoped_host_threads three(3);
      tensor<float, cpu> b(shape{std::size_t(n)}, float(t));
      for (int r = 0; r < 20; ++r) {
        tensor<float, cpu> c = a + b * 2.f;
        sums[std::size_t(t)] = double(on<cpu>(sum(c)).item());
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(sums[std::size_t(t)] == double(n) * (1 + 2 * t));
  // A chunk that starts a kernel of its own.
  const backend::scoped_host_threads four(4);
  std::atomic<long> total{0};
  backend::parallel_chunks(8, [&](std::size_t) {
    std::atomic<long> inner{0};
    backend::parallel_chunks(100, [&](std::size_t c) { inner.fetch_add(long(c)); });
    total.fetch_add(inner.load());
  });
  CHECK(total.load() == 8 * 4950);
}

TEST_CASE("a sum depends on the thread count only, never on timing", "[threads]") {
  const std::size_t n = (std::size_t{1} << 20) + 77;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(float(i)) * 1e3f;
  tensor<float, cpu> a(shape{n});
  std::copy(v.begin(), v.end(), a.data());
  for (int threads : {1, 2, 3}) {
    const backend::scoped_host_threads limit(threads);
    const float first = on<cpu>(sum(a)).item();
    for (int r = 0; r < 20; ++r) REQUIRE(on<cpu>(sum(a)).item() == first);
    // The partition: one part per thread, folded in order (the documented order).
    double expected = 0;
    const std::size_t chunk = (n + std::size_t(threads) - 1) / std::size_t(threads);
    for (int t = 0; t < threads; ++t) {
      double part = 0;
      for (std::size_t i = std::size_t(t) * chunk; i < std::min(n, std::size_t(t + 1) * chunk); ++i) part += v[i];
      expected += part;
    }
    CHECK(std::abs(double(first) - expected) <= 1e-3 * std::abs(expected) + 1);
  }
}

TEST_CASE("a product cut into pieces: the same bits for the same thread count, close to one call", "[threads]") {
  // 520 x 256 x 130: eight pieces of rows, each a BLAS call (or the portable loop). A BLAS's
  // result depends on how a product is cut (OpenBLAS's own threads give other bits than one
  // thread), so the pieces depend on the thread count alone, never on timing.
  const std::size_t m = 520, k = 256, n = 130;
  tensor<float, cpu, 2> a(shape{m, k}), b(shape{k, n});
  for (std::size_t i = 0; i < m * k; ++i) a.data()[i] = std::cos(float(i));
  for (std::size_t i = 0; i < k * n; ++i) b.data()[i] = std::sin(float(i) * 0.5f);
  tensor<float, cpu, 2> one(shape{m, n}), four(shape{m, n}), again(shape{m, n}), wide(shape{n, m});
  {
    const backend::scoped_host_threads single(1);
    one = on<cpu>(matmul(a, b));
  }
  {
    const backend::scoped_host_threads several(4);
    four = on<cpu>(matmul(a, b));
    for (int r = 0; r < 10; ++r) {
      again = on<cpu>(matmul(a, b));
      for (std::size_t i = 0; i < m * n; ++i) REQUIRE(again.data()[i] == four.data()[i]);
    }
    wide = on<cpu>(matmul(transpose(b), transpose(a)));  // wider than tall: pieces of columns
  }
  for (std::size_t i = 0; i < m * n; ++i) REQUIRE(std::abs(four.data()[i] - one.data()[i]) <= 1e-3f);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t c = 0; c < n; ++c) REQUIRE(std::abs(wide.data()[c * m + r] - one.data()[r * n + c]) <= 1e-3f);
}

TEST_CASE("pieces of a range near SIZE_MAX cover it exactly", "[threads]") {
  const backend::scoped_host_threads two(2);
  for (std::size_t n : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX / 2 + 3}) {
    std::mutex m;
    std::vector<std::pair<std::size_t, std::size_t>> pieces;
    backend::parallel_ranges(n, [&](std::size_t b, std::size_t e) {
      std::lock_guard lock(m);
      pieces.emplace_back(b, e);
    });
    std::sort(pieces.begin(), pieces.end());
    REQUIRE(pieces.size() > 1);
    CHECK(pieces.front().first == 0);
    CHECK(pieces.back().second == n);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      CHECK(pieces[i].first < pieces[i].second);
      if (i > 0) CHECK(pieces[i].first == pieces[i - 1].second);
    }
  }
}

TEST_CASE("a kernel inside a piece keeps the caller's thread limit, on every thread", "[threads]") {
  backend::set_host_threads(4);
  {
    const backend::scoped_host_threads two(2);
    std::vector<int> seen(64, 0);
    backend::parallel_chunks(seen.size(), [&](std::size_t c) {
      seen[c] = backend::host_threads();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
    for (int v : seen) CHECK(v == 2);
  }
  backend::set_host_threads(0);
}

// ThreadSanitizer refuses threads started after a multi-threaded fork: not under it.
#if defined(__SANITIZE_THREAD__)
#  define LOCUS_TEST_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define LOCUS_TEST_TSAN 1
#  endif
#endif
#if defined(__unix__) && !defined(LOCUS_TEST_TSAN)
TEST_CASE("a forked child runs kernels (no mutex copied locked, no workers it lacks)", "[threads]") {
  const backend::scoped_host_threads three(3);
  // The pool is busy on another thread while the process forks, many times over.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    const backend::scoped_host_threads also(3);
    std::atomic<long> x{0};
    while (!stop.load()) backend::parallel_chunks(16, [&](std::size_t c) { x.fetch_add(long(c)); });
  });
  for (int i = 0; i < 20; ++i) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::atomic<long> total{0};
      backend::parallel_chunks(100, [&](std::size_t c) { total.fetch_add(long(c)); });
      _exit(total.load() == 4950 ? 0 : 1);
    }
    int status = 0;
    pid_t done = 0;
    for (int waited = 0; waited < 20000 && (done = waitpid(child, &status, WNOHANG)) == 0; ++waited)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (done == 0) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
    REQUIRE(done == child);  // not hung
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  stop = true;
  busy.join();
}
#endif
