#pragma once
// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or raw, with errors that name the
// file and the byte offset, and the Fashion-MNIST data set as Debian's dataset-fashion-mnist
// installs it (/usr/share/datasets/fashion-mnist; LOCUS_FASHION_MNIST_DIR or an argument
// overrides the place).
#include <locus/config.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#if defined(LOCUS_HAS_ZLIB) && LOCUS_HAS_ZLIB
#  include <zlib.h>
#endif

namespace locus::data {

/// A file that is missing, truncated or not what it claims to be.
class data_error : public error {
public:
  using error::error;
};

/// An IDX array of unsigned bytes: its dimensions and its data.
struct idx_array {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> bytes;
};

namespace detail {
/// The whole file, decompressed when it is gzip (zlib reads raw files unchanged).
inline std::vector<std::uint8_t> read_all(const std::string& path) {
  std::vector<std::uint8_t> out;
#if defined(LOCUS_HAS_ZLIB) && LOCUS_HAS_ZLIB
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw data_error("locus: " + path + ": cannot open the file");
  std::uint8_t buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      throw data_error("locus: " + path + ": corrupt compressed data after byte " + std::to_string(out.size()) +
                       " of the decompressed stream (" + why + ")");
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  gzclose(f);
#else
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw data_error("locus: " + path + ": cannot open the file");
  std::uint8_t buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.insert(out.end(), buf, buf + n);
  if (out.size() >= 2 && out[0] == 0x1f && out[1] == 0x8b)
    throw data_error("locus: " + path + ": the file is gzip-compressed and this build has no zlib");
#endif
  return out;
}
}  // namespace detail

/// Parses the bytes of an IDX file of unsigned bytes (type 0x08), 1 to 4 dimensions; `path` names
/// it in the errors. (read_idx reads and decompresses the file; the fuzzer calls this directly.)
inline idx_array parse_idx(const std::vector<std::uint8_t>& raw, const std::string& path) {
  if (raw.size() < 4)
    throw data_error("locus: " + path + ": truncated: " + std::to_string(raw.size()) +
                     " bytes, the IDX header needs 4 at offset 0");
  if (raw[0] != 0 || raw[1] != 0)
    throw data_error("locus: " + path + ": bad magic number at offset 0 (the first two bytes must be zero)");
  if (raw[2] != 0x08) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", raw[2]);
    throw data_error("locus: " + path + ": unsupported element type " + hex +
                     " at offset 2 (only unsigned bytes, 0x08)");
  }
  const std::size_t ndims = raw[3];
  if (ndims < 1 || ndims > 4)
    throw data_error("locus: " + path + ": " + std::to_string(ndims) + " dimensions at offset 3 (1 to 4 allowed)");
  const std::size_t header = 4 + 4 * ndims;
  if (raw.size() < header)
    throw data_error("locus: " + path + ": truncated inside the dimensions: " + std::to_string(raw.size()) +
                     " bytes, the header needs " + std::to_string(header));
  idx_array a;
  std::size_t count = 1;
  for (std::size_t d = 0; d < ndims; ++d) {
    const std::size_t o = 4 + 4 * d;
    const std::uint32_t e = (std::uint32_t{raw[o]} << 24) | (std::uint32_t{raw[o + 1]} << 16) |
                            (std::uint32_t{raw[o + 2]} << 8) | std::uint32_t{raw[o + 3]};
    if (e == 0 || count > (std::size_t{1} << 40) / e)
      throw data_error("locus: " + path + ": dimension " + std::to_string(d) + " at offset " + std::to_string(o) +
                       " is " + std::to_string(e) + ", not a usable extent");
    a.dims.push_back(e);
    count *= e;
  }
  if (raw.size() - header < count)
    throw data_error("locus: " + path + ": truncated: the dimensions need " + std::to_string(count) +
                     " data bytes from offset " + std::to_string(header) + ", the file has " +
                     std::to_string(raw.size() - header));
  if (raw.size() - header > count)
    throw data_error("locus: " + path + ": " + std::to_string(raw.size() - header - count) +
                     " bytes past the end of the data at offset " + std::to_string(header + count));
  a.bytes.assign(raw.begin() + static_cast<std::ptrdiff_t>(header), raw.end());
  return a;
}

/// Reads an IDX file of unsigned bytes (type 0x08), 1 to 4 dimensions, gzip-compressed or not.
inline idx_array read_idx(const std::string& path) { return parse_idx(detail::read_all(path), path); }

/// Images scaled to [0, 1] as rows, and their labels.
struct labelled_images {
  tensor<float, cpu, 2> images;        ///< [n, rows * cols]
  tensor<std::int32_t, cpu> labels;    ///< [n]
  [[nodiscard]] std::size_t size() const { return labels.size(); }
};

/// An images file and a labels file that must agree on the count.
inline labelled_images read_labelled(const std::string& images_path, const std::string& labels_path) {
  const auto im = read_idx(images_path);
  const auto lb = read_idx(labels_path);
  if (im.dims.size() != 3)
    throw data_error("locus: " + images_path + ": an images file has 3 dimensions, this one " +
                     std::to_string(im.dims.size()));
  if (lb.dims.size() != 1)
    throw data_error("locus: " + labels_path + ": a labels file has 1 dimension, this one " +
                     std::to_string(lb.dims.size()));
  if (im.dims[0] != lb.dims[0])
    throw data_error("locus: " + images_path + " holds " + std::to_string(im.dims[0]) + " images but " + labels_path +
                     " " + std::to_string(lb.dims[0]) + " labels");
  const std::size_t n = im.dims[0], pixels = std::size_t{im.dims[1]} * im.dims[2];
  std::vector<float> pix(im.bytes.size());
  for (std::size_t i = 0; i < pix.size(); ++i) pix[i] = static_cast<float>(im.bytes[i]) / 255.f;
  std::vector<std::int32_t> lab(lb.bytes.begin(), lb.bytes.end());
  return {tensor<float, cpu, 2>(shape{n, pixels}, pix), tensor<std::int32_t, cpu>(lab)};
}

namespace fashion_mnist {
/// The directory: the argument, else LOCUS_FASHION_MNIST_DIR, else Debian's place.
inline std::string directory(const std::string& dir = "") {
  if (!dir.empty()) return dir;
  if (const char* env = std::getenv("LOCUS_FASHION_MNIST_DIR"); env != nullptr && *env != '\0') return env;
  return "/usr/share/datasets/fashion-mnist";
}
/// The 60000 training images (apt-get install dataset-fashion-mnist).
inline labelled_images load_train(const std::string& dir = "") {
  const auto d = directory(dir);
  return read_labelled(d + "/train-images-idx3-ubyte.gz", d + "/train-labels-idx1-ubyte.gz");
}
/// The 10000 test images.
inline labelled_images load_test(const std::string& dir = "") {
  const auto d = directory(dir);
  return read_labelled(d + "/t10k-images-idx3-ubyte.gz", d + "/t10k-labels-idx1-ubyte.gz");
}
}  // namespace fashion_mnist

}  // namespace locus::data
