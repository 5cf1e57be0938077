#pragma once
// TensorFlow's log_device_placement, and the ledger of bytes moved between devices.
//
// Off by default. On through log_device_placement(true), a scoped_placement_log, or the
// environment variable LOCUS_LOG_DEVICE_PLACEMENT=1 (read once, on first use). Each evaluation
// writes one line per node, e.g.
//     add: (Add): /job:localhost/replica:0/task:0/device:GPU:1
// and each transfer one line naming source, destination and bytes. Lines about emulated GPUs end
// in " (emulated)". The sink is pluggable (tests capture it); the default writes to stderr.
// Off costs one relaxed atomic load per evaluation: no line is built.
#include <locus/config.hpp>
#include <locus/device/device.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace locus {

using placement_sink = std::function<void(std::string_view line)>;

/// Bytes and copies moved from one device to another.
struct transfer_totals {
  std::size_t bytes = 0;
  std::size_t copies = 0;
};
using transfer_summary = std::map<std::pair<device_id, device_id>, transfer_totals>;

namespace detail {
/// The log's state. Two locks: `state_` guards the sinks and the ledger and is never held while user
/// code runs; `calls_` (recursive) makes sink calls one at a time, so a sink needs no lock of its
/// own and may itself log or read transfer_stats().
class placement_log_state {
public:
  static placement_log_state& instance() {
    static placement_log_state* s = new placement_log_state();  // leaked: usable during exit
    return *s;
  }
  std::atomic<bool> enabled{false};     ///< log_device_placement(bool) or the environment
  std::atomic<int> active_scopes{0};    ///< scoped_placement_log objects alive, on any thread

  void write(std::string_view line) {
    std::lock_guard call(calls_);
    std::shared_ptr<const placement_sink> sink;
    {
      std::lock_guard lock(state_);
      sink = current_sink_locked();
    }
    if (sink && *sink) {
      (*sink)(line);
    } else {
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fputc('\n', stderr);
    }
  }
  placement_sink exchange_sink(placement_sink s) {
    auto next = s ? std::make_shared<const placement_sink>(std::move(s)) : nullptr;
    std::shared_ptr<const placement_sink> previous;
    {
      std::lock_guard lock(state_);
      previous = std::exchange(global_sink_, std::move(next));
    }
    std::lock_guard call(calls_);  // a call of the previous sink in progress finishes first
    return previous ? *previous : placement_sink{};
  }

  /// A scope's sink (or none: it only turns the log on) joins the list; the newest scope that has a
  /// sink receives the lines, whichever thread evaluates.
  std::uint64_t push_scope(placement_sink s) {
    auto sink = s ? std::make_shared<const placement_sink>(std::move(s)) : nullptr;
    std::lock_guard lock(state_);
    scopes_.push_back({++next_scope_, std::move(sink)});
    active_scopes.fetch_add(1, std::memory_order_relaxed);
    return next_scope_;
  }
  /// Removes a scope wherever it is in the list (scopes of two threads may end in any order), then
  /// waits for a call of its sink in progress: after this no line reaches it.
  void pop_scope(std::uint64_t id) {
    {
      std::lock_guard lock(state_);
      for (auto it = scopes_.begin(); it != scopes_.end(); ++it)
        if (it->id == id) {
          scopes_.erase(it);
          break;
        }
      active_scopes.fetch_sub(1, std::memory_order_relaxed);
    }
    std::lock_guard call(calls_);
  }

  void record_transfer(device_id from, device_id to, std::size_t bytes) {
    std::lock_guard lock(state_);
    auto& t = transfers_[{from, to}];
    t.bytes += bytes;
    ++t.copies;
  }
  transfer_summary transfers() const {
    std::lock_guard lock(state_);
    return transfers_;
  }
  void reset_transfers() {
    std::lock_guard lock(state_);
    transfers_.clear();
  }

private:
  placement_log_state() {
    const char* v = std::getenv("LOCUS_LOG_DEVICE_PLACEMENT");
    enabled.store(v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0);
  }
  std::shared_ptr<const placement_sink> current_sink_locked() const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (it->sink) return it->sink;
    return global_sink_;
  }
  struct scope_entry {
    std::uint64_t id;
    std::shared_ptr<const placement_sink> sink;
  };
  mutable std::mutex state_;
  std::recursive_mutex calls_;
  std::shared_ptr<const placement_sink> global_sink_;
  std::vector<scope_entry> scopes_;
  std::uint64_t next_scope_ = 0;
  transfer_summary transfers_;
};

inline bool placement_log_enabled() noexcept {
  const auto& s = placement_log_state::instance();
  return s.enabled.load(std::memory_order_relaxed) || s.active_scopes.load(std::memory_order_relaxed) > 0;
}

/// "<device full name>" plus " (emulated)" for emulated GPUs.
inline std::string log_device(device_id d) {
  std::string s = d.full_name();
  if (d.is_gpu() && LOCUS_EMULATE_GPUS) s += " (emulated)";
  return s;
}

inline void log_line(std::string_view line) { placement_log_state::instance().write(line); }

inline void log_transfer(device_id from, device_id to, std::size_t bytes) {
  placement_log_state::instance().record_transfer(from, to, bytes);
  if (!placement_log_enabled()) return;
  log_line("transfer: (Copy): " + from.full_name() + " -> " + to.full_name() + ", " + std::to_string(bytes) +
           " bytes" + ((from.is_gpu() || to.is_gpu()) && LOCUS_EMULATE_GPUS ? " (emulated)" : ""));
}
}  // namespace detail

/// Turns the placement log on or off for the whole process (scoped_placement_log objects keep it
/// on while they live, whatever this says).
inline void log_device_placement(bool on) {
  detail::placement_log_state::instance().enabled.store(on, std::memory_order_relaxed);
}
[[nodiscard]] inline bool log_device_placement() { return detail::placement_log_enabled(); }

/// Replaces the process's sink (nullptr: back to stderr); returns the previous one. Sinks are called
/// one line at a time, never while locus holds a lock of its state: a sink may log or call
/// transfer_stats(). A sink that throws makes the evaluation that logged throw, before it runs.
inline placement_sink set_placement_sink(placement_sink sink) {
  return detail::placement_log_state::instance().exchange_sink(std::move(sink));
}

/// Turns the log on for its lifetime, for every thread, optionally into a sink of its own. Scopes
/// on several threads may overlap and end in any order: while any lives the log is on; the lines go
/// to the newest living scope that has a sink (else the process's sink, else stderr); once a scope
/// is destroyed its sink is never called again.
class scoped_placement_log {
public:
  scoped_placement_log() : id_(detail::placement_log_state::instance().push_scope({})) {}
  explicit scoped_placement_log(placement_sink sink)
      : id_(detail::placement_log_state::instance().push_scope(std::move(sink))) {}
  scoped_placement_log(const scoped_placement_log&) = delete;
  scoped_placement_log& operator=(const scoped_placement_log&) = delete;
  ~scoped_placement_log() { detail::placement_log_state::instance().pop_scope(id_); }

private:
  std::uint64_t id_;
};

/// Bytes moved between each pair of devices since the start (or the last reset).
[[nodiscard]] inline transfer_summary transfer_stats() { return detail::placement_log_state::instance().transfers(); }
inline void reset_transfer_stats() { detail::placement_log_state::instance().reset_transfers(); }

}  // namespace locus
