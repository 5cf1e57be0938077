#pragma once
// Checkpoints: a trainer's state in a small versioned binary file.
//
//   offset  field (little-endian)
//   0       "LOCUSCKP"                                  8 bytes
//   8       u32 version (4)                             12  u32 element type (1: float32)
//   16      u64 steps done                              24  u64 data-order seed
//   32      u64 tensor count T, then for each tensor: u32 rank R, R x u64 extents
//   ...     u64 parameter count N, then N floats        the parameters, in the model's order
//   ...     u32 name length L (1 to 32), L bytes        the optimiser's name ([a-z0-9_]: "adamw")
//   ...     u64 state buffers per parameter S (at most 16)
//   ...     u64 replica count R, then for each replica: u64 its optimiser steps, S x N floats
//   ...     u64 stream count M, then M x u64: each replica's random-stream position (the
//           loss_and_grad calls it made: dropout's masks continue where they stopped)
//   ...     u64 the loss scale's bits (a double: float16's dynamic scale, a power of two from 2^-24
//           to 2^64, train/loss_scale.hpp; 0: none), u64 the finite steps since it last changed
//   end-8   u64 FNV-1a 64 checksum of every byte before it
//
// Version 3 (read) ends after the stream positions: no loss scale (it starts at 2^16).
// Version 2 (read) ends after the replicas' states: no stream positions (they start at 0).
//
// Version 1 (read, never written) was sgd's: after the parameters, u64 velocity buffer count V,
// then V x N floats (one momentum buffer per replica, zeros without momentum), no step counts. It
// parses as optimiser "sgd" with S = 1 (0 when V = 0) and step counts 0, format = 1.
//
// save() writes a temporary beside `path` (unpredictable name, created exclusively, mode 0600),
// flushes it to the disk (fsync) and renames it over `path`: a crash mid-write leaves the previous
// checkpoint whole, and a link planted beside it is never written through. The temporary's name
// carries the writer's process id (path.locus-<pid>.XXXXXX): a save killed mid-write leaves it, and
// the next save to the same path removes those of processes that no longer run. parse() checks
// everything (magic, version, type, sizes against the file's length before any allocation,
// checksum) and throws checkpoint_error naming the file, the byte offset and what is wrong; what
// parse() refuses, serialize() refuses first (an optimiser named "SignSGD", a tensor of rank 9),
// so a checkpoint that was written can be read. load() reads the magic number before the rest.
#include <locus/config.hpp>
#include <locus/detail/files.hpp>
#include <locus/errors.hpp>
#include <locus/train/loss_scale.hpp>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>
#include <new>
#if __has_include(<unistd.h>)
#  include <dirent.h>
#  include <signal.h>  // kill(pid, 0): is a temporary's writer still running
#  include <stdlib.h>  // mkstemp
#  include <unistd.h>
#endif

namespace locus::train {

/// A checkpoint that cannot be read, or does not fit the trainer it is loaded into.
class checkpoint_error : public error {
public:
  using error::error;
};

struct checkpoint {
  static constexpr char magic[8] = {'L', 'O', 'C', 'U', 'S', 'C', 'K', 'P'};
  static constexpr std::uint32_t version = 4;
  /// The oldest version parse() reads.
  static constexpr std::uint32_t oldest_version = 1;
  /// Limits on the optimiser's name and state (guards against a damaged header).
  static constexpr std::uint32_t max_name = 32;
  static constexpr std::uint64_t max_state_buffers = 16;
  static constexpr std::uint32_t float32 = 1;
  /// The largest checkpoint parse() accepts (a guard against absurd sizes in a damaged header).
  static constexpr std::uint64_t max_elements = std::uint64_t{1} << 34;

  std::uint64_t steps = 0;
  std::uint64_t seed = 0;
  std::vector<std::vector<std::uint64_t>> shapes;  ///< each parameter tensor's extents
  std::vector<float> parameters;
  std::string optimizer = "sgd";                   ///< the optimiser's name (O::name)
  std::uint64_t state_buffers = 0;                 ///< its state floats per parameter
  std::vector<std::uint64_t> optimizer_steps;      ///< each replica's optimiser steps
  /// Each replica's optimiser state: state_buffers x parameters.size() floats, buffer after buffer
  /// (empty: none saved; the state starts at zero).
  std::vector<std::vector<float>> optimizer_state;
  /// Each replica's random-stream position: the loss_and_grad calls it has made (empty: none
  /// saved, every stream starts at 0).
  std::vector<std::uint64_t> streams;
  /// float16's dynamic loss scale (train::mixed<half>; 0: none) and the finite steps since it last
  /// changed.
  double loss_scale = 0;
  std::uint64_t loss_scale_steps = 0;
  /// The version it was read from (serialize() writes the current one).
  std::uint32_t format = version;

  /// Throws checkpoint_error (naming `name`) when parse() would refuse what serialize() writes: an
  /// optimiser name outside [a-z0-9_]{1,32}, a tensor of rank above max_rank, more than
  /// max_elements parameters, more than max_state_buffers state buffers, shapes that do not add
  /// up to the parameters, or a replica's state that is not state_buffers x parameters floats.
  void validate(const std::string& name) const;
  /// The checks of validate() that depend on the model and the optimiser alone (fit runs them
  /// before its first step when it will write checkpoints).
  static void check_layout(const std::string& name, const std::string& optimizer,
                           const std::vector<std::vector<std::uint64_t>>& shapes, std::uint64_t state_buffers);
  static constexpr std::uint32_t max_rank = 8;
  /// 0 (none), or a power of two from 2^-24 to 2^64 (what train/loss_scale.hpp's scaler holds).
  static bool valid_loss_scale(double s) {
    if (s == 0) return !std::signbit(s);
    int e = 0;
    return std::isfinite(s) && s >= detail::loss_scaler::smallest_scale && s <= detail::loss_scaler::largest_scale &&
           std::frexp(s, &e) == 0.5;
  }
  /// Below the growth interval (the scale doubles and the count restarts there); 0 without a scale.
  static bool valid_loss_scale_steps(double scale, std::uint64_t steps) {
    return scale == 0 ? steps == 0 : steps < detail::loss_scaler::growth_interval;
  }
  [[nodiscard]] std::vector<std::uint8_t> serialize() const;
  /// Throws checkpoint_error (naming `name`) on anything malformed; the result is fully checked.
  static checkpoint parse(const std::uint8_t* data, std::size_t size, const std::string& name);

  void save(const std::string& path) const;
  static checkpoint load(const std::string& path);
  /// Throws the checkpoint_error save(path) would, for what can be known before writing: path is a
  /// directory or another file that is not a regular one (a FIFO, a device), or no file can be
  /// created beside it (a missing or read-only folder). Creates and removes one temporary file;
  /// fit() calls it before the first step.
  static void check_writable(const std::string& path);
};

namespace detail {
/// "[[784, 256], [256]]": tensors' extents, for the messages.
LOCUS_RUNTIME_INLINE std::string describe_shapes(const std::vector<std::vector<std::uint64_t>>& shapes);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE std::string describe_shapes(const std::vector<std::vector<std::uint64_t>>& shapes) {
  std::string out = "[";
  for (std::size_t t = 0; t < shapes.size(); ++t) {
    out += t ? ", [" : "[";
    for (std::size_t d = 0; d < shapes[t].size(); ++d) out += (d ? ", " : "") + std::to_string(shapes[t][d]);
    out += "]";
  }
  return out + "]";
}
#endif

inline std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

class byte_writer {
public:
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void floats(const std::vector<float>& v) {
    for (float f : v) {
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      u32(bits);
    }
  }
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  std::vector<std::uint8_t> out;

private:
  void put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
};

class byte_reader {
public:
  byte_reader(const std::uint8_t* p, std::size_t n, const std::string& name) : p_(p), n_(n), name_(name) {}
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(get(4, what)); }
  std::uint64_t u64(const char* what) { return get(8, what); }
  /// n floats; the caller has checked that they fit in the file.
  std::vector<float> floats(std::uint64_t n, const char* what) {
    need(n * 4, what);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& f : v) {
      const std::uint32_t bits = u32(what);
      std::memcpy(&f, &bits, 4);
    }
    return v;
  }
  void need(std::uint64_t bytes, const char* what) const {
    if (bytes > n_ - at_) fail(std::string("truncated: ") + what + " needs " + std::to_string(bytes) + " bytes, " +
                               std::to_string(n_ - at_) + " remain");
  }
  [[noreturn]] void fail(const std::string& why) const { fail_at(at_, why); }
  [[noreturn]] void fail_at(std::size_t offset, const std::string& why) const {
    throw checkpoint_error("locus: checkpoint " + name_ + ": " + why + " (at byte offset " + std::to_string(offset) +
                           ")");
  }
  [[nodiscard]] std::size_t offset() const noexcept { return at_; }
  /// Moves past n bytes the caller has checked with need().
  void skip(std::size_t n) noexcept { at_ += n; }
  [[nodiscard]] std::size_t remaining() const noexcept { return n_ - at_; }

private:
  std::uint64_t get(int bytes, const char* what) {
    need(std::uint64_t(bytes), what);
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t{p_[at_ + std::size_t(i)]} << (8 * i);
    at_ += std::size_t(bytes);
    return v;
  }
  const std::uint8_t* p_;
  std::size_t n_, at_ = 0;
  const std::string& name_;
};
}  // namespace detail

// The reader, writer and files: part of the run-time (config.hpp, LOCUS_SEPARATE_RUNTIME).
#if LOCUS_RUNTIME_DEFINITIONS
namespace detail {
/// The checkpoint_error of writing `path`: "locus: checkpoint <path>: <what>[: <the OS's reason>]".
[[noreturn]] inline void throw_write_error(const std::string& path, const std::string& what, int err) {
  throw checkpoint_error("locus: checkpoint " + path + ": " + what + (err ? std::string(": ") + std::strerror(err) : ""));
}

/// A new file beside a checkpoint's path, open for writing: save()'s temporary, check_writable()'s probe.
struct temporary_file {
  std::string name;
#if __has_include(<unistd.h>)
  int fd = -1;
#else
  std::FILE* f = nullptr;
#endif
};
/// With mkstemp an unpredictable name, created exclusively (O_CREAT | O_EXCL, mode 0600): a link
/// planted at a guessable name cannot redirect the write, and two trainers saving to one path each
/// write their own file. Without it, path.tmp, created exclusively ("wbx": refuses an existing file
/// or link).
/// The prefix of the temporaries this process makes beside `path`: path.locus-<pid>.
inline std::string temporary_prefix(const std::string& path, long pid) {
  return path + ".locus-" + std::to_string(pid) + ".";
}

/// Removes the temporaries beside `path` left by saves of processes that no longer run (killed
/// mid-write): path.locus-<pid>.XXXXXX whose pid does not exist. Others' live saves are untouched.
inline void remove_stale_temporaries(const std::string& path) {
#if __has_include(<unistd.h>)
  const auto slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string stem = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".locus-";
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(folder.c_str()), &::closedir);
  if (!dir) return;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string name = e->d_name;
    if (name.compare(0, stem.size(), stem) != 0) continue;
    const std::string rest = name.substr(stem.size());  // <pid>.XXXXXX
    const auto dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 6) continue;
    if (rest.find_first_not_of("0123456789") != dot) continue;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      ::unlink((folder + "/" + name).c_str());
  }
#else
  (void)path;
#endif
}

/// Refuses a path that save() would not replace with a checkpoint file: a directory (or a link to
/// one: rename would replace the link), or a file that is not a regular one (a FIFO, a device).
inline void check_target(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw_write_error(path, "it is a directory; a checkpoint is a file", 0);
    // A FIFO's open would wait for a writer forever (fit looks for a checkpoint to resume from).
    if (!S_ISREG(st.st_mode)) throw_write_error(path, "it is not a regular file", 0);
  }
}

inline temporary_file create_beside(const std::string& path) {
  temporary_file t;
#if __has_include(<unistd.h>)
  t.name = temporary_prefix(path, long(::getpid())) + "XXXXXX";
  t.fd = ::mkstemp(t.name.data());
  if (t.fd < 0) throw_write_error(path, "cannot create a temporary file beside it", errno);
#else
  t.name = path + ".tmp";
  t.f = std::fopen(t.name.c_str(), "wbx");
  if (t.f == nullptr) throw_write_error(path, "cannot create " + t.name, errno);
#endif
  return t;
}
}  // namespace detail

LOCUS_RUNTIME_INLINE void checkpoint::check_layout(const std::string& name, const std::string& optimizer,
                                                   const std::vector<std::vector<std::uint64_t>>& shapes,
                                                   std::uint64_t state_buffers) {
  const auto refuse = [&](const std::string& why) {
    throw checkpoint_error("locus: checkpoint " + name + ": cannot be written: " + why);
  };
  if (optimizer.empty() || optimizer.size() > max_name)
    refuse("the optimiser's name \"" + optimizer + "\" has " + std::to_string(optimizer.size()) + " bytes, not 1 to " +
           std::to_string(max_name));
  for (const char ch : optimizer)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'))
      refuse("the optimiser's name \"" + optimizer + "\" holds a character outside [a-z0-9_] (name it like \"sign_sgd\")");
  if (state_buffers > max_state_buffers)
    refuse(std::to_string(state_buffers) + " optimiser state buffers per parameter, at most " +
           std::to_string(max_state_buffers));
  std::uint64_t total = 0;
  for (std::size_t t = 0; t < shapes.size(); ++t) {
    if (shapes[t].size() > max_rank)
      refuse("tensor " + std::to_string(t) + " has rank " + std::to_string(shapes[t].size()) + ", at most " +
             std::to_string(max_rank));
    std::uint64_t elements = 1;
    for (const auto e : shapes[t]) {
      if (e != 0 && elements > max_elements / e) refuse("more than 2^34 parameters");
      elements *= e;
    }
    total += elements;
    if (total > max_elements) refuse("more than 2^34 parameters");
  }
}

LOCUS_RUNTIME_INLINE void checkpoint::validate(const std::string& name) const {
  check_layout(name, optimizer, shapes, state_buffers);
  std::uint64_t total = 0;
  for (const auto& s : shapes) {
    std::uint64_t elements = 1;
    for (const auto e : s) elements *= e;  // bounded by check_layout
    total += elements;
  }
  const auto refuse = [&](const std::string& why) {
    throw checkpoint_error("locus: checkpoint " + name + ": cannot be written: " + why);
  };
  if (total != parameters.size())
    refuse(std::to_string(parameters.size()) + " parameters for shapes of " + std::to_string(total));
  for (const auto& st : optimizer_state)
    if (st.size() != state_buffers * parameters.size())
      refuse("an optimiser state of " + std::to_string(st.size()) + " floats, not " + std::to_string(state_buffers) +
             " x " + std::to_string(parameters.size()));
  if (!valid_loss_scale(loss_scale))
    refuse("a loss scale of " + std::to_string(loss_scale) + " (0, or a power of two from 2^-24 to 2^64)");
  if (!valid_loss_scale_steps(loss_scale, loss_scale_steps))
    refuse(std::to_string(loss_scale_steps) + " finite steps since the loss scale changed (below " +
           std::to_string(detail::loss_scaler::growth_interval) + ", 0 without a scale)");
}

LOCUS_RUNTIME_INLINE std::vector<std::uint8_t> checkpoint::serialize() const {
  validate("(being written)");
  detail::byte_writer w;
  w.raw(magic, sizeof magic);
  w.u32(version);
  w.u32(float32);
  w.u64(steps);
  w.u64(seed);
  w.u64(shapes.size());
  for (const auto& s : shapes) {
    w.u32(static_cast<std::uint32_t>(s.size()));
    for (auto e : s) w.u64(e);
  }
  w.u64(parameters.size());
  w.floats(parameters);
  w.u32(static_cast<std::uint32_t>(optimizer.size()));
  w.raw(optimizer.data(), optimizer.size());
  w.u64(state_buffers);
  w.u64(optimizer_state.size());
  for (std::size_t r = 0; r < optimizer_state.size(); ++r) {
    w.u64(r < optimizer_steps.size() ? optimizer_steps[r] : 0);
    w.floats(optimizer_state[r]);
  }
  w.u64(streams.size());
  for (auto k : streams) w.u64(k);
  w.u64(std::bit_cast<std::uint64_t>(loss_scale));
  w.u64(loss_scale_steps);
  w.u64(detail::fnv1a(w.out.data(), w.out.size()));
  return std::move(w.out);
}

LOCUS_RUNTIME_INLINE checkpoint checkpoint::parse(const std::uint8_t* data, std::size_t size, const std::string& name) {
  detail::byte_reader r(data, size, name);
  r.need(sizeof magic, "the magic number");
  if (std::memcmp(data, magic, sizeof magic) != 0) r.fail_at(0, "bad magic number (not a locus checkpoint)");
  r.u64("the magic number");
  // The checksum first: a damaged file is reported as such, whatever field the damage hit.
  if (size < sizeof magic + 8 + 8) r.fail_at(size, "truncated: shorter than the header and the checksum");
  const std::uint32_t v = r.u32("the version");
  if (v < oldest_version || v > version)
    r.fail_at(8, "version " + std::to_string(v) + ", this build reads versions " + std::to_string(oldest_version) +
                     " to " + std::to_string(version));
#if !defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)  // a fuzzer gets past it to the fields
  std::uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= std::uint64_t{data[size - 8 + std::size_t(i)]} << (8 * i);
  if (detail::fnv1a(data, size - 8) != stored)
    r.fail_at(size - 8, "checksum mismatch: the file is damaged or truncated");
#endif
  const std::uint32_t type = r.u32("the element type");
  if (type != float32) r.fail_at(12, "element type " + std::to_string(type) + ", only float32 (1) is supported");
  checkpoint c;
  c.format = v;
  c.steps = r.u64("the step count");
  c.seed = r.u64("the seed");
  const std::size_t at_count = r.offset();
  const std::uint64_t tensors = r.u64("the tensor count");
  if (tensors > r.remaining() / 4) r.fail_at(at_count, "absurd tensor count " + std::to_string(tensors));
  std::uint64_t total = 0;
  for (std::uint64_t t = 0; t < tensors; ++t) {
    const std::size_t at_rank = r.offset();
    const std::uint32_t rank = r.u32("a tensor's rank");
    if (rank > max_rank) r.fail_at(at_rank, "tensor " + std::to_string(t) + " has rank " + std::to_string(rank));
    std::vector<std::uint64_t> extents;
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < rank; ++d) {
      const std::size_t at_extent = r.offset();
      const std::uint64_t e = r.u64("an extent");
      if (e != 0 && elements > max_elements / e)
        r.fail_at(at_extent, "tensor " + std::to_string(t) + ": absurd extent " + std::to_string(e));
      elements *= e;
      extents.push_back(e);
    }
    total += elements;
    if (total > max_elements) r.fail_at(at_rank, "absurd total size: more than 2^34 parameters");
    c.shapes.push_back(std::move(extents));
  }
  const std::size_t at_n = r.offset();
  const std::uint64_t n = r.u64("the parameter count");
  if (n != total)
    r.fail_at(at_n, "the parameter count " + std::to_string(n) + " is not the sum of the shapes, " +
                        std::to_string(total));
  if (n > r.remaining() / 4) r.fail_at(at_n, "truncated: " + std::to_string(n) + " parameters do not fit in the file");
  c.parameters = r.floats(n, "the parameters");
  if (v == 1) {
    const std::size_t at_v = r.offset();
    const std::uint64_t buffers = r.u64("the velocity buffer count");
    if (n != 0 && buffers > r.remaining() / (4 * n)) r.fail_at(at_v, "absurd velocity buffer count " + std::to_string(buffers));
    if (n == 0 && buffers > 1024) r.fail_at(at_v, "absurd velocity buffer count " + std::to_string(buffers));
    c.optimizer = "sgd";
    c.state_buffers = buffers == 0 ? 0 : 1;
    for (std::uint64_t b = 0; b < buffers; ++b) {
      c.optimizer_state.push_back(r.floats(n, "a velocity buffer"));
      c.optimizer_steps.push_back(0);
    }
  } else {
    const std::size_t at_name = r.offset();
    const std::uint32_t length = r.u32("the optimiser's name length");
    if (length == 0 || length > max_name)
      r.fail_at(at_name, "the optimiser's name has " + std::to_string(length) + " bytes, not 1 to " +
                             std::to_string(max_name));
    r.need(length, "the optimiser's name");
    for (std::uint32_t i = 0; i < length; ++i) {
      const char ch = static_cast<char>(data[r.offset() + i]);
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'))
        r.fail_at(r.offset() + i, "the optimiser's name holds a byte outside [a-z0-9_]");
    }
    c.optimizer.assign(reinterpret_cast<const char*>(data + r.offset()), length);
    r.skip(length);
    const std::size_t at_s = r.offset();
    c.state_buffers = r.u64("the state buffer count");
    if (c.state_buffers > max_state_buffers)
      r.fail_at(at_s, "absurd state buffer count " + std::to_string(c.state_buffers) + " per parameter");
    const std::size_t at_r = r.offset();
    const std::uint64_t replicas = r.u64("the replica count");
    // Each replica: its step count and S x N floats (n <= 2^34, S <= 16: no overflow).
    const std::uint64_t per_replica = 8 + 4 * c.state_buffers * n;
    if (replicas > r.remaining() / per_replica) r.fail_at(at_r, "absurd replica count " + std::to_string(replicas));
    for (std::uint64_t k = 0; k < replicas; ++k) {
      c.optimizer_steps.push_back(r.u64("a replica's optimiser steps"));
      c.optimizer_state.push_back(r.floats(c.state_buffers * n, "a replica's optimiser state"));
    }
    if (v >= 3) {
      const std::size_t at_m = r.offset();
      const std::uint64_t streams = r.u64("the stream count");
      if (streams > r.remaining() / 8) r.fail_at(at_m, "absurd stream count " + std::to_string(streams));
      for (std::uint64_t k = 0; k < streams; ++k) c.streams.push_back(r.u64("a replica's stream position"));
    }
    if (v >= 4) {
      const std::size_t at_l = r.offset();
      c.loss_scale = std::bit_cast<double>(r.u64("the loss scale"));
      if (!valid_loss_scale(c.loss_scale))
        r.fail_at(at_l, "a loss scale of " + std::to_string(c.loss_scale) + " (0, or a power of two from 2^-24 to 2^64)");
      const std::size_t at_k = r.offset();
      c.loss_scale_steps = r.u64("the loss scale's finite steps");
      if (!valid_loss_scale_steps(c.loss_scale, c.loss_scale_steps))
        r.fail_at(at_k, std::to_string(c.loss_scale_steps) + " finite steps since the loss scale changed (below " +
                            std::to_string(detail::loss_scaler::growth_interval) + ", 0 without a scale)");
    }
  }
  if (r.remaining() != 8)
    r.fail("the checksum expected here, but " + std::to_string(r.remaining()) + " bytes remain");
  return c;
}

LOCUS_RUNTIME_INLINE void checkpoint::save(const std::string& path) const {
  validate(path);
  const auto bytes = serialize();
  detail::check_target(path);
  detail::remove_stale_temporaries(path);
  // Written whole into a temporary beside `path`, then renamed over it: the last rename wins, whole.
  const auto t = detail::create_beside(path);
  const std::string& tmp = t.name;
#if __has_include(<unistd.h>)
  const int fd = t.fd;
  std::size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += std::size_t(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;  // on the disk before it replaces the previous one
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    detail::throw_write_error(path, "writing " + tmp + " failed", err);
  }
#else
  std::FILE* f = t.f;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    detail::throw_write_error(path, "writing " + tmp + " failed (disk full?)", 0);
  }
#endif
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    detail::throw_write_error(path, "cannot rename " + tmp + " over it", e);
  }
}

LOCUS_RUNTIME_INLINE void checkpoint::check_writable(const std::string& path) {
  detail::check_target(path);
  // save()'s own temporary, created and removed.
  const auto t = detail::create_beside(path);
#if __has_include(<unistd.h>)
  ::close(t.fd);
  ::unlink(t.name.c_str());
#else
  std::fclose(t.f);
  std::remove(t.name.c_str());
#endif
}

LOCUS_RUNTIME_INLINE checkpoint checkpoint::load(const std::string& path) {
  if (const auto why = locus::detail::unreadable_reason(path); !why.empty())
    throw checkpoint_error("locus: checkpoint " + path + ": " + why);
  errno = 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    throw checkpoint_error("locus: checkpoint " + path + ": cannot open the file" +
                           (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  // The magic number first: a large file that is not a checkpoint is refused after 8 bytes, not
  // read whole (a 3 GiB file took 24 s and 4.2 GB before).
  std::uint8_t head[sizeof magic] = {};
  const std::size_t got = std::fread(head, 1, sizeof head, f.get());
  if (got < sizeof head || std::memcmp(head, magic, sizeof magic) != 0) return parse(head, got, path);  // throws
  struct stat st{};
  std::uint64_t expected = 0;
  if (::fstat(::fileno(f.get()), &st) == 0 && st.st_size > 0) expected = std::uint64_t(st.st_size);
  std::vector<std::uint8_t> bytes(head, head + sizeof head);
  try {
    // Reserved once from the file's size; a size no checkpoint can have (2^34 floats, 16 state
    // buffers per replica) is refused by parse's checks, but the memory is asked for first: a
    // refusal here names the file.
    if (expected > 0) bytes.reserve(std::size_t(expected));
    std::uint8_t buf[1 << 16];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.insert(bytes.end(), buf, buf + n);
  } catch (const std::bad_alloc&) {
    throw checkpoint_error("locus: checkpoint " + path + ": cannot read the file: " + std::to_string(expected) +
                           " bytes do not fit in memory");
  }
  if (std::ferror(f.get()))
    throw checkpoint_error("locus: checkpoint " + path + ": a read error: " + std::strerror(errno));
  return parse(bytes.data(), bytes.size(), path);
}
#endif

}  // namespace locus::train
