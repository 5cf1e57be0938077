#pragma once
// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or raw, with errors that name the
// file and the byte offset, and the Fashion-MNIST data set as Debian's dataset-fashion-mnist
// installs it (/usr/share/datasets/fashion-mnist; LOCUS_FASHION_MNIST_DIR or an argument
// overrides the place).
#include <locus/config.hpp>
#include <locus/detail/files.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

/// The most data bytes an IDX array may announce (1 GiB; as images, 4 GiB of floats): a header
/// that asks for more is a data_error before anything is read or allocated.
inline constexpr std::size_t max_idx_bytes = std::size_t{1} << 30;

namespace detail {
/// Where IDX bytes come from: read(dst, n) returns how many of n it could give (0 at the end) and
/// throws data_error when the source itself is broken. `offset` is the position in the
/// (decompressed) stream, for the messages.
struct idx_source {
  virtual ~idx_source() = default;
  virtual std::size_t read(std::uint8_t* dst, std::size_t n) = 0;
  std::size_t offset = 0;
};

struct memory_source final : idx_source {
  const std::vector<std::uint8_t>& raw;
  explicit memory_source(const std::vector<std::uint8_t>& r) : raw(r) {}
  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    const std::size_t k = std::min(n, raw.size() - offset);
    if (k != 0) std::memcpy(dst, raw.data() + offset, k);
    offset += k;
    return k;
  }
};

/// Why an open of a regular file failed, from the OS (missing, not permitted).
inline std::string open_failure(const std::string& path, int err) {
  return "locus: " + path + ": cannot open the file: " + std::strerror(err != 0 ? err : ENOENT);
}

/// Only regular files are opened: a directory, a FIFO or a device is refused by name before
/// anything is read.
inline void require_regular_file(const std::string& path) {
  if (const auto why = locus::detail::unreadable_reason(path); !why.empty())
    throw data_error("locus: " + path + ": " + why);
}

/// Grows `v` to n elements, or a data_error naming the file when memory runs out.
template <class V>
void grow(V& v, std::size_t n, const std::string& path) {
  try {
    v.resize(n);
  } catch (const std::bad_alloc&) {
    throw data_error("locus: " + path + ": not enough memory for " + std::to_string(n) + " elements");
  }
}

#if defined(LOCUS_HAS_ZLIB) && LOCUS_HAS_ZLIB
/// A gzip-compressed file (one member, or several concatenated, as gzip reads them) or a raw one,
/// inflated as it is read. Driven through inflate() rather than gzread(): every member must end
/// with its checksum and length (Z_STREAM_END), and nothing but another member may follow the last
/// (gzread lets a large file cut inside its trailer, and any bytes after the last member, pass).
struct file_source final : idx_source {
  const std::string& path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f{nullptr, &std::fclose};
  std::vector<std::uint8_t> in = std::vector<std::uint8_t>(std::size_t{1} << 16);
  z_stream z{};
  bool gzip = false;
  bool ended = false;  // the last member's end was read and nothing follows it

  explicit file_source(const std::string& p) : path(p) {
    require_regular_file(path);
    errno = 0;
    f.reset(std::fopen(path.c_str(), "rb"));
    if (!f) throw data_error(open_failure(path, errno));
    refill();
    gzip = z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b;
    if (gzip && inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
      throw data_error("locus: " + path + ": zlib could not start inflating (out of memory)");
  }
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;
  ~file_source() override {
    if (gzip) inflateEnd(&z);
  }

  /// More compressed input when none is left; false at the end of the file.
  bool refill() {
    if (z.avail_in != 0) return true;
    const std::size_t n = std::fread(in.data(), 1, in.size(), f.get());
    if (n == 0 && std::ferror(f.get())) throw data_error("locus: " + path + ": read error: " + std::strerror(errno));
    z.next_in = in.data();
    z.avail_in = static_cast<uInt>(n);
    return n != 0;
  }

  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    std::size_t got = 0;
    if (!gzip) {  // what refill() buffered first, then the file
      got = std::min<std::size_t>(n, z.avail_in);
      if (got != 0) std::memcpy(dst, z.next_in, got);
      z.next_in += got;
      z.avail_in -= static_cast<uInt>(got);
      if (got < n) got += std::fread(dst + got, 1, n - got, f.get());
      offset += got;
      return got;
    }
    while (got < n && !ended) {
      if (!refill())
        throw data_error("locus: " + path + ": truncated compressed data: the gzip stream ends early, after byte " +
                         std::to_string(offset + got) + " of the decompressed stream (its checksum unchecked)");
      const auto room = static_cast<uInt>(std::min<std::size_t>(n - got, std::size_t{1} << 30));
      z.next_out = dst + got;
      z.avail_out = room;
      const int r = inflate(&z, Z_NO_FLUSH);
      got += room - z.avail_out;
      if (r == Z_STREAM_END) {
        // A member ends (its checksum and length checked): another may follow, nothing else.
        if (!refill()) {
          ended = true;
        } else if (z.next_in[0] != 0x1f) {
          throw data_error("locus: " + path + ": bytes after the end of the gzip stream (after byte " +
                           std::to_string(offset + got) + " of the decompressed stream), not another gzip member");
        } else {
          inflateReset(&z);
        }
      } else if (r != Z_OK && r != Z_BUF_ERROR) {  // Z_BUF_ERROR: no input left, refilled above
        throw data_error("locus: " + path + ": corrupt compressed data after byte " + std::to_string(offset + got) +
                         " of the decompressed stream (" + (z.msg != nullptr ? z.msg : "zlib error " + std::to_string(r)) +
                         ")");
      }
    }
    offset += got;
    return got;
  }
};
#else
struct file_source final : idx_source {
  const std::string& path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f{nullptr, &std::fclose};
  explicit file_source(const std::string& p) : path(p) {
    require_regular_file(path);
    errno = 0;
    f.reset(std::fopen(path.c_str(), "rb"));
    if (!f) throw data_error(open_failure(path, errno));
  }
  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    const std::size_t got = std::fread(dst, 1, n, f.get());
    if (offset == 0 && got >= 2 && dst[0] == 0x1f && dst[1] == 0x8b)
      throw data_error("locus: " + path + ": the file is gzip-compressed and this build has no zlib");
    offset += got;
    return got;
  }
};
#endif

/// The header of an IDX array of unsigned bytes: its dimensions (at most max_idx_bytes of data).
inline std::vector<std::uint32_t> read_idx_header(idx_source& src, const std::string& path) {
  std::uint8_t head[4 + 4 * 4];
  const std::size_t got = src.read(head, 4);
  if (got < 4)
    throw data_error("locus: " + path + ": truncated: " + std::to_string(got) +
                     " bytes, the IDX header needs 4 at offset 0");
  if (head[0] != 0 || head[1] != 0)
    throw data_error("locus: " + path + ": bad magic number at offset 0 (the first two bytes must be zero)");
  if (head[2] != 0x08) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", head[2]);
    throw data_error("locus: " + path + ": unsupported element type " + hex +
                     " at offset 2 (only unsigned bytes, 0x08)");
  }
  const std::size_t ndims = head[3];
  if (ndims < 1 || ndims > 4)
    throw data_error("locus: " + path + ": " + std::to_string(ndims) + " dimensions at offset 3 (1 to 4 allowed)");
  const std::size_t header = 4 + 4 * ndims;
  if (const std::size_t dims = src.read(head + 4, 4 * ndims); dims < 4 * ndims)
    throw data_error("locus: " + path + ": truncated inside the dimensions: " + std::to_string(4 + dims) +
                     " bytes, the header needs " + std::to_string(header));
  std::vector<std::uint32_t> dims;
  std::size_t count = 1;
  for (std::size_t d = 0; d < ndims; ++d) {
    const std::size_t o = 4 + 4 * d;
    const std::uint32_t e = (std::uint32_t{head[o]} << 24) | (std::uint32_t{head[o + 1]} << 16) |
                            (std::uint32_t{head[o + 2]} << 8) | std::uint32_t{head[o + 3]};
    if (e == 0 || count > max_idx_bytes / e)
      throw data_error("locus: " + path + ": dimension " + std::to_string(d) + " at offset " + std::to_string(o) +
                       " is " + std::to_string(e) + ", not a usable extent (at most " +
                       std::to_string(max_idx_bytes) + " data bytes in all)");
    dims.push_back(e);
    count *= e;
  }
  return dims;
}

/// The data after a header: exactly the bytes it announces, then one more read to find trailing bytes.
inline std::vector<std::uint8_t> read_idx_data(idx_source& src, const std::string& path,
                                               const std::vector<std::uint32_t>& dims) {
  const std::size_t header = 4 + 4 * dims.size();
  std::size_t count = 1;
  for (auto e : dims) count *= e;
  idx_array a;
  // In pieces, so that memory grows with the bytes that really arrive, not with what the header claims.
  std::size_t data = 0;
  while (data < count) {
    const std::size_t piece = std::min(count - data, std::size_t{1} << 24);
    grow(a.bytes, data + piece, path);
    const std::size_t k = src.read(a.bytes.data() + data, piece);
    data += k;
    if (k < piece) break;
  }
  if (data < count)
    throw data_error("locus: " + path + ": truncated: the dimensions need " + std::to_string(count) +
                     " data bytes from offset " + std::to_string(header) + ", the file has " + std::to_string(data));
  std::uint8_t extra[4096];
  std::size_t trailing = 0;
  for (std::size_t k; trailing < (std::size_t{1} << 20) && (k = src.read(extra, sizeof extra)) > 0;) trailing += k;
  if (trailing != 0)
    throw data_error("locus: " + path + ": " + std::to_string(trailing) + (trailing >= (std::size_t{1} << 20) ? " or more" : "") +
                     " bytes past the end of the data at offset " + std::to_string(header + count));
  return std::move(a.bytes);
}

/// Reads one IDX array of unsigned bytes from `src`: the header first, then its data.
inline idx_array read_idx_from(idx_source& src, const std::string& path) {
  idx_array a;
  a.dims = read_idx_header(src, path);
  a.bytes = read_idx_data(src, path, a.dims);
  return a;
}
}  // namespace detail

/// Parses the bytes of an IDX file of unsigned bytes (type 0x08), 1 to 4 dimensions; `path` names
/// it in the errors. (read_idx reads and decompresses the file; the fuzzer calls this directly.)
LOCUS_RUNTIME_INLINE idx_array parse_idx(const std::vector<std::uint8_t>& raw, const std::string& path);

/// Reads an IDX file of unsigned bytes (type 0x08), 1 to 4 dimensions, gzip-compressed or not. The
/// header is read first; the data bytes it announces (at most max_idx_bytes) are then inflated and
/// nothing more, so a small file that announces a huge array costs no memory.
LOCUS_RUNTIME_INLINE idx_array read_idx(const std::string& path);

/// Images scaled to [0, 1] as rows, and their labels.
struct labelled_images {
  tensor<float, cpu, 2> images;        ///< [n, rows * cols]: one example per row
  tensor<std::int32_t, cpu> labels;    ///< [n]: each row's class (empty in a data set of float targets)
  /// [n, k]: each row's float targets, for a model trained on them (regression: a loss such as
  /// losses::mean_squared_error); empty in a data set of labels. data::make_dataset makes either.
  tensor<float, cpu, 2> targets{};
  /// The rows (examples).
  [[nodiscard]] std::size_t size() const { return images.extent(0); }
  /// True when the rows carry float targets rather than labels.
  [[nodiscard]] bool has_targets() const { return targets.size() != 0; }
};

/// An images file and a labels file that must agree on the count.
/// With `classes` > 0, every label must lie in [0, classes) (data_error naming the file and offset).
LOCUS_RUNTIME_INLINE labelled_images read_labelled(const std::string& images_path, const std::string& labels_path,
                                                   std::size_t classes = 0);

namespace fashion_mnist {
/// Its ten classes: labels outside [0, 10) in its files are a data_error.
inline constexpr std::size_t classes = 10;
/// The directory: the argument, else LOCUS_FASHION_MNIST_DIR, else Debian's place.
LOCUS_RUNTIME_INLINE std::string directory(const std::string& dir = "");
/// The 60000 training images (apt-get install dataset-fashion-mnist).
LOCUS_RUNTIME_INLINE labelled_images load_train(const std::string& dir = "");
/// The 10000 test images.
LOCUS_RUNTIME_INLINE labelled_images load_test(const std::string& dir = "");
}  // namespace fashion_mnist

// The readers: part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE idx_array parse_idx(const std::vector<std::uint8_t>& raw, const std::string& path) {
  detail::memory_source src(raw);
  return detail::read_idx_from(src, path);
}

LOCUS_RUNTIME_INLINE idx_array read_idx(const std::string& path) {
  detail::file_source src(path);
  return detail::read_idx_from(src, path);
}

LOCUS_RUNTIME_INLINE labelled_images read_labelled(const std::string& images_path, const std::string& labels_path,
                                                   std::size_t classes) {
  // The labels (small) and the images' header first: counts, ranks and labels are checked before
  // the images are inflated.
  const auto lb = read_idx(labels_path);
  detail::file_source images(images_path);
  const auto dims = detail::read_idx_header(images, images_path);
  if (dims.size() != 3)
    throw data_error("locus: " + images_path + ": an images file has 3 dimensions, this one " +
                     std::to_string(dims.size()));
  if (lb.dims.size() != 1)
    throw data_error("locus: " + labels_path + ": a labels file has 1 dimension, this one " +
                     std::to_string(lb.dims.size()));
  if (dims[0] != lb.dims[0])
    throw data_error("locus: " + images_path + " holds " + std::to_string(dims[0]) + " images but " + labels_path +
                     " " + std::to_string(lb.dims[0]) + " labels");
  if (classes > 0)
    for (std::size_t i = 0; i < lb.bytes.size(); ++i)
      if (lb.bytes[i] >= classes)
        throw data_error("locus: " + labels_path + ": label " + std::to_string(lb.bytes[i]) + " at offset " +
                         std::to_string(4 + 4 * lb.dims.size() + i) + " (example " + std::to_string(i) +
                         ") is outside [0, " + std::to_string(classes) + ")");
  const auto bytes = detail::read_idx_data(images, images_path, dims);
  const std::size_t n = dims[0], pixels = std::size_t{dims[1]} * dims[2];
  auto pixels_t = tensor<float, cpu, 2>::uninitialized_of(shape{n, pixels});  // written once, no host copy
  float* pix = pixels_t.data();
  for (std::size_t i = 0; i < bytes.size(); ++i) pix[i] = static_cast<float>(bytes[i]) / 255.f;
  std::vector<std::int32_t> lab(lb.bytes.begin(), lb.bytes.end());
  return {std::move(pixels_t), tensor<std::int32_t, cpu>(lab)};
}

namespace fashion_mnist {
LOCUS_RUNTIME_INLINE std::string directory(const std::string& dir) {
  if (!dir.empty()) return dir;
  if (const char* env = std::getenv("LOCUS_FASHION_MNIST_DIR"); env != nullptr && *env != '\0') return env;
  return "/usr/share/datasets/fashion-mnist";
}
LOCUS_RUNTIME_INLINE labelled_images load_train(const std::string& dir) {
  const auto d = directory(dir);
  return read_labelled(d + "/train-images-idx3-ubyte.gz", d + "/train-labels-idx1-ubyte.gz", classes);
}
LOCUS_RUNTIME_INLINE labelled_images load_test(const std::string& dir) {
  const auto d = directory(dir);
  return read_labelled(d + "/t10k-images-idx3-ubyte.gz", d + "/t10k-labels-idx1-ubyte.gz", classes);
}
}  // namespace fashion_mnist
#endif

}  // namespace locus::data
