#pragma once
// The exceptions locus throws. Every message starts with "locus:" and names what was wrong.
#include <locus/config.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace locus {

/// Base of every locus exception.
class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A device that does not exist in this process, a pointer from another device's arena,
/// logical devices reconfigured while in use.
class device_error : public error {
public:
  using error::error;
};

/// Operands or destinations whose extents do not agree. Thrown before any kernel runs.
class shape_error : public error {
public:
  using error::error;
};

/// An option or setting out of its range (a learning rate of 0, a batch larger than the data).
class config_error : public error {
public:
  using error::error;
};

/// A device allocation that failed or whose byte count overflows; names the device and the bytes.
class allocation_error : public device_error {
public:
  allocation_error(const std::string& device, std::size_t bytes, const std::string& why);
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

private:
  std::size_t bytes_;
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE allocation_error::allocation_error(const std::string& device, std::size_t bytes,
                                                        const std::string& why)
    : device_error("locus: cannot allocate " + std::to_string(bytes) + " bytes on " + device + ": " + why),
      bytes_(bytes) {}
#endif

/// A failed CUDA runtime call; the message names the call, the device and CUDA's own words.
class cuda_error : public device_error {
public:
  cuda_error(const std::string& call, const std::string& device, int code, const std::string& what)
      : device_error("locus: " + call + " failed on " + device + ": " + what + " (cudaError " +
                     std::to_string(code) + ")"),
        code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

private:
  int code_;
};

}  // namespace locus
