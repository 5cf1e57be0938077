// libFuzzer target: the IDX file reader on arbitrary files, gzip-compressed or raw: the inflate()
// path (corrupt or truncated members, concatenated ones, bytes after the last). Anything but a
// clean data_error (or a parsed array whose sizes agree) is a bug: ASan reports overflows, and the
// check below aborts. The seeds are small gzip files; the input goes through a temporary file, as
// read_idx reads files.
#include <locus/data/idx.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr ? dir : "/tmp") + "/locus_fuzz_idx_gz_" + std::to_string(::getpid()) + ".gz";
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size != 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const auto a = locus::data::read_idx(path);
    std::size_t count = 1;
    for (auto d : a.dims) count *= d;
    if (a.dims.empty() || a.dims.size() > 4 || count != a.bytes.size()) std::abort();
  } catch (const locus::data::data_error&) {
  }
  return 0;
}
