// libFuzzer target: the IDX parser on arbitrary bytes. Anything but a clean data_error (or a
// parsed array whose sizes agree) is a bug: ASan reports overflows, and the checks below abort.
#include <locus/data/idx.hpp>

#include <cstdint>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::uint8_t> raw(data, data + size);
  try {
    const auto a = locus::data::parse_idx(raw, "fuzz-input");
    std::size_t count = 1;
    for (auto d : a.dims) count *= d;
    if (a.dims.empty() || a.dims.size() > 4 || count != a.bytes.size() || 4 + 4 * a.dims.size() + count != size)
      std::abort();
  } catch (const locus::data::data_error&) {
  }
  return 0;
}
