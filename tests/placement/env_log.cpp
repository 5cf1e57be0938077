// LOCUS_LOG_DEVICE_PLACEMENT=1 turns the placement log on without any call (run by CTest with the
// variable set; its stderr is checked against env_log.expected).
#include <locus/locus.hpp>

int main() {
  using namespace locus;
  auto a = tensor<float, cpu>{1.f, 2.f}.named("a");
  auto c = on<cpu>(relu(a));
  return log_device_placement() && c.size() == 2 ? 0 : 1;
}
