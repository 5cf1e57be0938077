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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace locus {

using placement_sink = std::function<void(std::string_view line)>;

/// Bytes and copies moved from one device to another.
struct transfer_totals {
  std::size_t bytes = 0;
  std::size_t copies = 0;
};
using transfer_summary = std::map<std::pair<device_id, device_id>, transfer_totals>;

namespace detail {
class placement_log_state {
public:
  static placement_log_state& instance() {
    static placement_log_state* s = new placement_log_state();  // leaked: usable during exit
    return *s;
  }
  std::atomic<bool> enabled{false};

  void write(std::string_view line) {
    std::lock_guard lock(mutex_);
    if (sink_) {
      sink_(line);
    } else {
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fputc('\n', stderr);
    }
  }
  placement_sink exchange_sink(placement_sink s) {
    std::lock_guard lock(mutex_);
    return std::exchange(sink_, std::move(s));
  }
  void record_transfer(device_id from, device_id to, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    auto& t = transfers_[{from, to}];
    t.bytes += bytes;
    ++t.copies;
  }
  transfer_summary transfers() const {
    std::lock_guard lock(mutex_);
    return transfers_;
  }
  void reset_transfers() {
    std::lock_guard lock(mutex_);
    transfers_.clear();
  }

private:
  placement_log_state() {
    const char* v = std::getenv("LOCUS_LOG_DEVICE_PLACEMENT");
    enabled.store(v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0);
  }
  mutable std::mutex mutex_;
  placement_sink sink_;
  transfer_summary transfers_;
};

inline bool placement_log_enabled() noexcept {
  return placement_log_state::instance().enabled.load(std::memory_order_relaxed);
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

/// Turns the placement log on or off for the whole process.
inline void log_device_placement(bool on) {
  detail::placement_log_state::instance().enabled.store(on, std::memory_order_relaxed);
}
[[nodiscard]] inline bool log_device_placement() { return detail::placement_log_enabled(); }

/// Replaces the sink (nullptr: back to stderr); returns the previous one.
inline placement_sink set_placement_sink(placement_sink sink) {
  return detail::placement_log_state::instance().exchange_sink(std::move(sink));
}

/// Turns the log on for a scope, optionally into a sink of its own, and restores both after.
class scoped_placement_log {
public:
  scoped_placement_log() : was_on_(log_device_placement()), sink_(), replaced_(false) { log_device_placement(true); }
  explicit scoped_placement_log(placement_sink sink)
      : was_on_(log_device_placement()), sink_(set_placement_sink(std::move(sink))), replaced_(true) {
    log_device_placement(true);
  }
  scoped_placement_log(const scoped_placement_log&) = delete;
  scoped_placement_log& operator=(const scoped_placement_log&) = delete;
  ~scoped_placement_log() {
    log_device_placement(was_on_);
    if (replaced_) set_placement_sink(std::move(sink_));
  }

private:
  bool was_on_;
  placement_sink sink_;
  bool replaced_;
};

/// Bytes moved between each pair of devices since the start (or the last reset).
[[nodiscard]] inline transfer_summary transfer_stats() { return detail::placement_log_state::instance().transfers(); }
inline void reset_transfer_stats() { detail::placement_log_state::instance().reset_transfers(); }

}  // namespace locus
