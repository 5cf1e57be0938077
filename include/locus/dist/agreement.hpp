#pragma once
// Agreement across the ranks of a job, over any communicator (communicator.hpp): every rank leaves
// a collective phase the same way. A rank that fails where the others cannot see it (a checkpoint
// folder missing on rank 0, a label refused on rank 1 only, an exception of any type) must not
// leave the others waiting in the next collective: the failure is exchanged first, and every rank
// throws it.
//
//   dist::agree(g, f)              runs f; then every rank throws the first failing rank's error
//   dist::broadcast_values(g, v)   rank 0's integers to every rank (v has the same size everywhere)
//   dist::broadcast_bytes(g, b)    rank 0's bytes to every rank (any size)
//
// Integers and bytes travel as floats of 16 bits each (broadcast_host is the concept's only
// broadcast of host data): every value below 2^24 is exact in a float, whatever the transport does.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace locus::dist {

/// The message of the exception in flight: what() for a std::exception, a description otherwise
/// (a replica that throws an int or a type of its own is still reported, by its rank).
inline std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception of a type not derived from std::exception";
  }
}

/// "<device's full name>: <the exception's message>": a replica's failure, as it travels to the
/// other ranks.
inline std::string failure_on(device_id d, const std::exception_ptr& e) { return d.full_name() + ": " + describe(e); }

/// Rank 0's n integers to every rank (collective; n the same on every rank).
template <class G>
void broadcast_values(G& g, std::vector<std::uint64_t>& v) {
  if constexpr (G::spans_processes) {
    std::vector<float> wire(v.size() * 4);
    for (std::size_t i = 0; i < v.size(); ++i)
      for (std::size_t k = 0; k < 4; ++k) wire[4 * i + k] = float((v[i] >> (16 * k)) & 0xFFFFu);
    g.broadcast_host(wire.data(), wire.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint64_t x = 0;
      for (std::size_t k = 0; k < 4; ++k) x |= std::uint64_t(wire[4 * i + k]) << (16 * k);
      v[i] = x;
    }
  } else {
    (void)g;
  }
}

/// Rank 0's bytes to every rank (collective; the size travels first).
template <class G>
void broadcast_bytes(G& g, std::vector<std::uint8_t>& b) {
  if constexpr (G::spans_processes) {
    std::vector<std::uint64_t> size{b.size()};
    broadcast_values(g, size);
    if (g.rank() != 0) b.assign(std::size_t(size[0]), 0);
    std::vector<float> wire((b.size() + 1) / 2);
    for (std::size_t i = 0; i < b.size(); ++i) wire[i / 2] += float(unsigned(b[i]) << (8 * (i % 2)));
    g.broadcast_host(wire.data(), wire.size());
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t((unsigned(wire[i / 2]) >> (8 * (i % 2))) & 0xFFu);
  } else {
    (void)g;
  }
}

/// "name a here, b on rank 0, ..." for every field whose value differs from rank 0's (empty when
/// none does).
inline std::string differences(const std::vector<std::pair<std::string, std::uint64_t>>& mine,
                               const std::vector<std::uint64_t>& rank0) {
  std::string out;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (rank0[i] != mine[i].second)
      out += (out.empty() ? "" : ", ") + mine[i].first + " " + std::to_string(mine[i].second) + " here, " +
             std::to_string(rank0[i]) + " on rank 0";
  return out;
}

/// Runs f on every rank, then exchanges whether it failed (collective): when any rank's f threw,
/// every rank throws. A rank whose f threw rethrows its own exception (its type and message); the
/// others throw locus::error "locus: rank R of N failed: <its message>" for the first failing
/// rank R. In one process, f's exception passes through unchanged.
template <class G, class F>
void agree(G& g, F&& f) {
  if constexpr (!G::spans_processes) {
    (void)g;
    f();
  } else {
    std::exception_ptr failure;
    std::string mine;
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
      mine = describe(failure);
      if (mine.empty()) mine = "(an empty message)";
    }
    const std::string first = g.first_failure(mine);
    if (failure) std::rethrow_exception(failure);
    if (!first.empty()) throw error(first);
  }
}

}  // namespace locus::dist

namespace locus::dist {
/// Every rank's named values must equal rank 0's (collective; the same names, in the same order,
/// on every rank): otherwise every rank throws config_error "<what> (<the differences>)<advice>".
template <class G>
void agree_on_values(G& g, const std::vector<std::pair<std::string, std::uint64_t>>& fields, const std::string& what,
                     const std::string& advice) {
  std::vector<std::uint64_t> values;
  values.reserve(fields.size());
  for (const auto& f : fields) values.push_back(f.second);
  broadcast_values(g, values);
  agree(g, [&] {
    if (const auto d = differences(fields, values); !d.empty()) throw config_error(what + " (" + d + ")" + advice);
  });
}
}  // namespace locus::dist
