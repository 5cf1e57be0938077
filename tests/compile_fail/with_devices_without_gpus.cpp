// with_devices lists GPUs: a build with only the host device has none to list.
// variant: host
// expect: locus: with_devices<MaxGpus>(count, f) lists GPUs; this build has none
#include <locus/locus.hpp>
int main() {
#ifdef LOCUS_FIXED
  return locus::dispatch<2>(locus::device_id{}, []<locus::device D>() { return D::index; });
#else
  return locus::with_devices<2>(1, []<locus::device... Ds>() { return static_cast<int>(sizeof...(Ds)); }) - 1;
#endif
}
