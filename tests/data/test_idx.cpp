#include "../common/test_support.hpp"

#include <locus/data/idx.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <zlib.h>

using namespace locus;
using data::data_error;

namespace {

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> dims, std::size_t data_bytes, std::uint8_t type = 0x08) {
  std::vector<std::uint8_t> b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  for (std::size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<std::uint8_t>(i * 7));
  return b;
}

std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes, bool gzip) {
  const auto dir = std::filesystem::temp_directory_path() / "locus_idx_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

}  // namespace

TEST_CASE("IDX files are read gzip-compressed or raw", "[data][idx]") {
  for (bool gz : {true, false}) {
    const auto path = write(gz ? "ok.gz" : "ok.raw", idx_bytes({2, 3, 4}, 24), gz);
    const auto a = data::read_idx(path);
    CHECK(a.dims == std::vector<std::uint32_t>{2, 3, 4});
    REQUIRE(a.bytes.size() == 24);
    CHECK(a.bytes[5] == 35);
  }
}

TEST_CASE("bad IDX files throw data_error naming the file and the offset", "[data][idx][errors]") {
  const auto missing = (std::filesystem::temp_directory_path() / "locus_idx_test" / "nope.gz").string();
  CHECK_THROWS_WITH(data::read_idx(missing), "locus: " + missing + ": cannot open the file: No such file or directory");
  CHECK_THROWS_WITH(data::read_idx(std::filesystem::temp_directory_path().string()),
                    Catch::Contains("cannot read the file: it is a directory"));
  auto bad_magic = idx_bytes({4}, 4);
  bad_magic[1] = 7;
  auto p = write("magic.gz", bad_magic, true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": bad magic number at offset 0 (the first two bytes must be zero)");
  p = write("type.gz", idx_bytes({4}, 16, 0x0D), true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": unsupported element type 0x0d at offset 2 (only unsigned bytes, 0x08)");
  p = write("dims.gz", idx_bytes({1, 1, 1, 1, 1}, 1), true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": 5 dimensions at offset 3 (1 to 4 allowed)");
  auto trunc = idx_bytes({10, 10}, 100);
  trunc.resize(trunc.size() - 30);
  p = write("trunc.gz", trunc, true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": truncated: the dimensions need 100 data bytes from offset 12, the file has 70");
  auto header_cut = idx_bytes({10, 10}, 0);
  header_cut.resize(9);
  p = write("header.gz", header_cut, true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": truncated inside the dimensions: 9 bytes, the header needs 12");
  p = write("extra.raw", idx_bytes({3}, 5), false);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": 2 bytes past the end of the data at offset 11");
  p = write("zero.gz", idx_bytes({0}, 0), true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": dimension 0 at offset 4 is 0, not a usable extent (at most " +
                                           std::to_string(data::max_idx_bytes) + " data bytes in all)");
  p = write("huge.gz", idx_bytes({65536, 65536, 2}, 0), true);
  CHECK_THROWS_WITH(data::read_idx(p), Catch::Contains("dimension 1 at offset 8 is 65536, not a usable extent"));
}

TEST_CASE("a gzip file cut short is refused, even when only its checksum trailer is missing", "[data][idx][errors]") {
  // Small and large: past ~32 KB zlib's gzread inflated straight into the caller's buffer and took a
  // missing trailer for the end of the file.
  for (std::uint32_t size : {24u, 100000u}) {
    const auto whole = write("whole.gz", idx_bytes({size}, size), true);
    std::vector<std::uint8_t> bytes(std::filesystem::file_size(whole));
    std::FILE* in = std::fopen(whole.c_str(), "rb");
    REQUIRE(std::fread(bytes.data(), 1, bytes.size(), in) == bytes.size());
    std::fclose(in);
    REQUIRE(data::read_idx(whole).bytes.size() == size);
    // 8 trailer bytes (CRC-32, length): every data byte is there with 1 to 8 of them cut, none
    // checked; cut into the deflate data, the data ends early.
    for (std::size_t cut : {1, 4, 6, 8, 20}) {
      const auto path = write("cut.gz", {bytes.begin(), bytes.end() - std::ptrdiff_t(cut)}, false);  // as it is
      CAPTURE(size, cut);
      CHECK_THROWS_AS(data::read_idx(path), data_error);
      CHECK_THROWS_WITH(data::read_idx(path), Catch::StartsWith("locus: " + path + ": truncated"));
    }
  }
}

TEST_CASE("gzip members: several concatenated read as one stream, anything else after the last is refused",
          "[data][idx][errors]") {
  const auto bytes = idx_bytes({3, 2, 2}, 12);
  const auto dir = std::filesystem::temp_directory_path() / "locus_idx_test";
  std::filesystem::create_directories(dir);
  const std::string two = (dir / "two_members.gz").string();
  for (const char* mode : {"wb", "ab"}) {  // the header and half the data, then the rest
    gzFile f = gzopen(two.c_str(), mode);
    const std::size_t from = mode[0] == 'w' ? 0 : 10, to = mode[0] == 'w' ? 10 : bytes.size();
    gzwrite(f, bytes.data() + from, static_cast<unsigned>(to - from));
    gzclose(f);
  }
  const auto a = data::read_idx(two);
  CHECK(a.dims == std::vector<std::uint32_t>{3, 2, 2});
  CHECK(a.bytes == std::vector<std::uint8_t>(bytes.begin() + 16, bytes.end()));
  // Junk after the last member (gzread skipped it): refused, as extra bytes of a raw file are.
  const auto junk = write("junk.gz", bytes, true);
  std::FILE* f = std::fopen(junk.c_str(), "ab");
  std::fputs("xyz", f);
  std::fclose(f);
  CHECK_THROWS_WITH(data::read_idx(junk), "locus: " + junk + ": bytes after the end of the gzip stream (after byte 28 of "
                                          "the decompressed stream), not another gzip member");
}

TEST_CASE("a small gzip file that inflates far past what its header announces is refused without inflating it all",
          "[data][idx][errors]") {
  // 16 data bytes announced, 256 MiB of zeros behind them (about 250 KB compressed): the reader
  // inflates the 16, then at most 1 MiB more to report the excess.
  const auto path = (std::filesystem::temp_directory_path() / "locus_idx_test" / "bomb.gz").string();
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  gzFile f = gzopen(path.c_str(), "wb9");
  const auto head = idx_bytes({16}, 16);
  gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
  std::vector<std::uint8_t> zeros(std::size_t{1} << 20, 0);
  for (int i = 0; i < 256; ++i) gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size()));
  gzclose(f);
  CHECK_THROWS_WITH(data::read_idx(path), "locus: " + path + ": 1048576 or more bytes past the end of the data at offset 24");
  // A header that announces 1 GiB (the most) over a file of 100 bytes: truncated, reported, memory
  // grown only with what arrived.
  auto liar = idx_bytes({16384, 65536}, 100);
  const auto p = write("liar.gz", liar, true);
  CHECK_THROWS_WITH(data::read_idx(p), "locus: " + p + ": truncated: the dimensions need 1073741824 data bytes from offset 12, "
                                       "the file has 100");
}

TEST_CASE("only regular files are read: a FIFO is refused, not waited on", "[data][idx][errors]") {
  const auto fifo = (std::filesystem::temp_directory_path() / "locus_idx_test" / "fifo").string();
  std::filesystem::create_directories(std::filesystem::path(fifo).parent_path());
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(data::read_idx(fifo), "locus: " + fifo + ": cannot read the file: it is not a regular file");
  std::remove(fifo.c_str());
}

TEST_CASE("read_labelled checks counts and labels before it inflates the images", "[data][idx][errors]") {
  // Images that announce 4096 x 256 x 256 (256 MiB) and are truncated after the header: the count
  // mismatch with 3 labels is reported first, from the header alone.
  const auto images = write("many.gz", idx_bytes({4096, 256, 256}, 0), true);
  const auto labels = write("three.gz", idx_bytes({3}, 3), true);
  CHECK_THROWS_WITH(data::read_labelled(images, labels),
                    "locus: " + images + " holds 4096 images but " + labels + " 3 labels");
}

TEST_CASE("labels outside the classes are refused with the file and the offset", "[data][idx][errors]") {
  const auto images = write("img10.gz", idx_bytes({3, 2, 2}, 12), true);
  auto lab = idx_bytes({3}, 0);
  for (std::uint8_t v : {std::uint8_t(9), std::uint8_t(12), std::uint8_t(0)}) lab.push_back(v);
  const auto labels = write("lab10.gz", lab, true);
  CHECK(data::read_labelled(images, labels).size() == 3);  // no class count: any byte is a label
  CHECK_THROWS_WITH(data::read_labelled(images, labels, 10),
                    "locus: " + labels + ": label 12 at offset 9 (example 1) is outside [0, 10)");
  CHECK_THROWS_AS(data::read_labelled(images, labels, 10), data_error);
}

TEST_CASE("images and labels must agree", "[data][idx]") {
  const auto images = write("img.gz", idx_bytes({3, 2, 2}, 12), true);
  const auto labels = write("lab.gz", idx_bytes({3}, 3), true);
  auto d = data::read_labelled(images, labels);
  CHECK(d.size() == 3);
  CHECK(d.images.shape() == shape{3, 4});
  CHECK(d.images(0, 1) == 7.f / 255.f);
  CHECK(d.labels(2) == 14);
  const auto four = write("lab4.gz", idx_bytes({4}, 4), true);
  CHECK_THROWS_WITH(data::read_labelled(images, four), "locus: " + images + " holds 3 images but " + four + " 4 labels");
}

TEST_CASE("Fashion-MNIST's place: argument, environment, Debian's default", "[data][fashion_mnist]") {
  CHECK(data::fashion_mnist::directory("/x") == "/x");
  CHECK(data::fashion_mnist::directory() == (std::getenv("LOCUS_FASHION_MNIST_DIR") ? std::getenv("LOCUS_FASHION_MNIST_DIR")
                                                                                   : "/usr/share/datasets/fashion-mnist"));
  if (std::filesystem::exists("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")) {
    const auto test = data::fashion_mnist::load_test("/usr/share/datasets/fashion-mnist");
    CHECK(test.size() == 10000);
    CHECK(test.images.shape() == shape{10000, 784});
  }
}
