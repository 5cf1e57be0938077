// libFuzzer target: the checkpoint parser on arbitrary bytes. Either a clean checkpoint_error, or
// a checkpoint that serialises back to the same bytes (the current format), or (an older format,
// written back in the current one) to bytes that parse and serialise again to themselves. Built
// with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, the parser skips the checksum (else nearly every
// input stops there), so the round trip compares everything but the checksum.
#include <locus/train/checkpoint.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto c = locus::train::checkpoint::parse(data, size, "fuzz-input");
    const auto back = c.serialize();
    if (c.format == locus::train::checkpoint::version) {
      if (back.size() != size || std::memcmp(back.data(), data, size - 8) != 0) std::abort();
    } else {
      const auto again = locus::train::checkpoint::parse(back.data(), back.size(), "fuzz-reserialised").serialize();
      if (again != back) std::abort();
    }
  } catch (const locus::train::checkpoint_error&) {
  }
  return 0;
}
