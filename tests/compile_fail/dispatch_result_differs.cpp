// dispatch returns one type whatever the device: a tensor<float, D> differs per device.
// expect: locus: dispatch / with_devices: f must return one type for every device
#include <locus/locus.hpp>
int main() {
  const auto f = []<locus::device D>() {
    auto t = locus::to<D>(locus::tensor<float, locus::cpu>{1.f, 2.f});
#ifdef LOCUS_FIXED
    return locus::to<locus::cpu>(t);
#else
    return t;
#endif
  };
  return static_cast<int>(locus::dispatch<2>(locus::device_id{locus::device_kind::gpu, 1}, f).size()) - 2;
}
