#pragma once
// CUDA runtime glue: error checks that name the call and the device, and a device guard.
// Only nvcc builds see any of it; the rest of locus reaches CUDA only through this header
// and backend/memory.hpp, backend/parallel.hpp.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>

#if LOCUS_HAS_CUDA
#  include <cuda_runtime.h>

namespace locus::backend::cuda {

inline void check(cudaError_t status, const char* call, device_id device) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls are not blamed
    throw cuda_error(call, device.full_name(), static_cast<int>(status), cudaGetErrorString(status));
  }
}

/// Makes a physical GPU current for a scope and restores the previous one.
class device_guard {
public:
  device_guard(int physical, device_id logical) {
    check(cudaGetDevice(&previous_), "cudaGetDevice", logical);
    if (previous_ != physical) check(cudaSetDevice(physical), "cudaSetDevice", logical);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }

private:
  int previous_ = 0;
};

/// The number of CUDA devices; 0 where the driver or the GPU is missing (CI compiles CUDA builds
/// on machines without one).
inline int physical_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace locus::backend::cuda

#  define LOCUS_CUDA_CHECK(call, device) ::locus::backend::cuda::check((call), #call, (device))
#endif
