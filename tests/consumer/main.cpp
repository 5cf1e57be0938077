// A user's program: emulated GPUs, a transfer, a fused expression, the placement log.
#include <locus/locus.hpp>

// consumer_separate: the run-time part is in the file locus_separate_runtime added.
#if defined(LOCUS_SEPARATE_RUNTIME) && LOCUS_SEPARATE_RUNTIME
static_assert(LOCUS_RUNTIME_DEFINITIONS == 0, "consumer_separate compiles calls into the run-time part only");
#endif

#include <cstdio>
#include <string>
#include <vector>

int main() {
  using namespace locus;
  tensor<float, cpu> a{1.f, 2.f, 3.f};
  std::vector<std::string> log;
  std::vector<float> got;
#if LOCUS_HAS_GPUS
  tensor<float, gpu<1>> y = to<gpu<1>>(a);
  {
    scoped_placement_log capture([&](std::string_view l) { log.emplace_back(l); });
    got = on<gpu<1>>(y * 2.f + 1.f).to_vector();
  }
  const bool placed = !log.empty() && log.back().find("device:GPU:1") != std::string::npos;
#else
  got = on<cpu>(a * 2.f + 1.f).to_vector();
  const bool placed = true;
#endif
  const bool ok = got == std::vector<float>{3.f, 5.f, 7.f} && placed;
  std::printf("consumer: %s (version %d)\n", ok ? "ok" : "WRONG", LOCUS_VERSION);
  return ok ? 0 : 1;
}
