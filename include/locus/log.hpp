#pragma once
// TensorFlow's log_device_placement, and the ledger of bytes moved between devices.
//
// Off by default. On through log_device_placement(true), a scoped_placement_log, or the
// environment variable LOCUS_LOG_DEVICE_PLACEMENT=1 (read once, on first use). Each evaluation
// writes one line per node, e.g.
//     add: (Add): /job:localhost/replica:0/task:0/device:GPU:1
// and each transfer one line naming source, destination and bytes. Lines about emulated GPUs end
// in " (emulated)". The sink is pluggable (tests capture it); the default writes to stderr.
// A training loop evaluates thousands of expressions per epoch: placement_log_options{.first = N}
// logs the first N evaluations, each whole, and turns the log off again.
// Off costs a thread-local read and two relaxed atomic loads per evaluation: no line is built.
#include <locus/config.hpp>
#include <locus/device/device.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace locus {

using placement_sink = std::function<void(std::string_view line)>;

/// How much of the program the placement log covers once it is on. An evaluation is everything
/// one `on<D>(e)`, assignment, reduction, matrix product or transfer logs: its nodes, a soft-placement
/// notice, the copies implicit_transfers makes for it. Each is logged whole or not at all.
struct placement_log_options {
  static constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  /// The evaluations logged before the log turns itself off (0: none; unlimited: all).
  std::size_t first = unlimited;
};

/// Bytes and copies moved from one device to another.
struct transfer_totals {
  std::size_t bytes = 0;
  std::size_t copies = 0;
};
using transfer_summary = std::map<std::pair<device_id, device_id>, transfer_totals>;

namespace detail {
/// A sink and the calls of it in progress (a scope's end waits for them).
struct sink_slot {
  placement_sink call;
  int in_flight = 0;  // guarded by the state's lock
};

/// The sinks this thread is inside of right now (a sink may end its own scope, or log again).
inline std::vector<const sink_slot*>& sinks_on_this_thread() {
  thread_local std::vector<const sink_slot*> stack;
  return stack;
}

/// The log's state. One lock guards the sinks and the ledger; it is never held while a sink runs,
/// so a sink may log, read transfer_stats(), or wait for another thread that logs. Sinks can be
/// called from several threads at once.
class placement_log_state {
public:
  static placement_log_state& instance() {
    static placement_log_state* s = new placement_log_state();  // leaked: usable during exit
    return *s;
  }
  std::atomic<bool> enabled{false};     ///< log_device_placement or the environment, evaluations left
  std::atomic<int> active_scopes{0};    ///< scoped_placement_log objects alive with evaluations left

  /// The process-wide switch: on for `first` evaluations (off for 0).
  void switch_on(std::size_t first);

  /// Whether the evaluation about to log may: takes one of the evaluations left to the switch, else
  /// to the newest scope that has some. What runs out turns itself off.
  bool claim();

  void write(std::string_view line);

  placement_sink exchange_sink(placement_sink s);

  /// A scope's sink (or none: it only turns the log on) joins the list; the newest scope that has a
  /// sink receives the lines, whichever thread evaluates. The scope keeps the log on for `first`
  /// evaluations.
  std::uint64_t push_scope(placement_sink s, std::size_t first);
  /// Removes a scope wherever it is in the list (scopes of two threads may end in any order), then
  /// waits until the calls of its sink in progress on other threads return: after this, none runs.
  void pop_scope(std::uint64_t id);

  void record_transfer(device_id from, device_id to, std::size_t bytes);
  transfer_summary transfers() const;
  void reset_transfers();

private:
  placement_log_state();
  std::shared_ptr<sink_slot> current_sink_locked() const;
  /// Waits until `slot` runs nowhere but in this thread's own calls of it (a sink that ends its
  /// own scope waits for nothing of its own).
  void wait_idle(std::unique_lock<std::mutex>& lock, const sink_slot* slot);
  struct scope_entry {
    std::uint64_t id;
    std::shared_ptr<sink_slot> sink;
    std::size_t left;  // evaluations this scope still turns the log on for
  };
  mutable std::mutex state_;
  std::condition_variable idle_;
  std::shared_ptr<sink_slot> global_sink_;
  std::vector<scope_entry> scopes_;
  std::uint64_t next_scope_ = 0;
  std::size_t global_left_ = placement_log_options::unlimited;  // evaluations the switch has left
  transfer_summary transfers_;
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void placement_log_state::switch_on(std::size_t first) {
  std::lock_guard lock(state_);
  global_left_ = first;
  enabled.store(first != 0, std::memory_order_relaxed);
}

LOCUS_RUNTIME_INLINE bool placement_log_state::claim() {
  std::lock_guard lock(state_);
  if (enabled.load(std::memory_order_relaxed)) {
    if (global_left_ != placement_log_options::unlimited && --global_left_ == 0)
      enabled.store(false, std::memory_order_relaxed);
    return true;
  }
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (it->left != 0) {
      if (it->left != placement_log_options::unlimited && --it->left == 0)
        active_scopes.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
  return false;
}

LOCUS_RUNTIME_INLINE void placement_log_state::write(std::string_view line) {
  std::shared_ptr<sink_slot> sink;
  {
    std::lock_guard lock(state_);
    sink = current_sink_locked();
    if (sink) ++sink->in_flight;
  }
  if (!sink) {
    std::string text(line);
    text += '\n';
    std::fwrite(text.data(), 1, text.size(), stderr);  // one write: lines of two threads do not mix
    return;
  }
  auto& mine = sinks_on_this_thread();
  mine.push_back(sink.get());
  struct leave {
    placement_log_state& s;
    sink_slot& slot;
    std::vector<const sink_slot*>& mine;
    ~leave() {
      mine.pop_back();
      std::lock_guard lock(s.state_);
      if (--slot.in_flight == 0) s.idle_.notify_all();
    }
  } done{*this, *sink, mine};
  sink->call(line);
}

LOCUS_RUNTIME_INLINE placement_sink placement_log_state::exchange_sink(placement_sink s) {
  auto next = s ? std::make_shared<sink_slot>(sink_slot{std::move(s)}) : nullptr;
  std::unique_lock lock(state_);
  auto previous = std::exchange(global_sink_, std::move(next));
  wait_idle(lock, previous.get());
  return previous ? previous->call : placement_sink{};
}

LOCUS_RUNTIME_INLINE std::uint64_t placement_log_state::push_scope(placement_sink s, std::size_t first) {
  auto sink = s ? std::make_shared<sink_slot>(sink_slot{std::move(s)}) : nullptr;
  std::lock_guard lock(state_);
  scopes_.push_back({++next_scope_, std::move(sink), first});
  if (first != 0) active_scopes.fetch_add(1, std::memory_order_relaxed);
  return next_scope_;
}

LOCUS_RUNTIME_INLINE void placement_log_state::pop_scope(std::uint64_t id) {
  std::unique_lock lock(state_);
  std::shared_ptr<sink_slot> removed;
  for (auto it = scopes_.begin(); it != scopes_.end(); ++it)
    if (it->id == id) {
      removed = std::move(it->sink);
      if (it->left != 0) active_scopes.fetch_sub(1, std::memory_order_relaxed);
      scopes_.erase(it);
      break;
    }
  wait_idle(lock, removed.get());
}

LOCUS_RUNTIME_INLINE void placement_log_state::record_transfer(device_id from, device_id to, std::size_t bytes) {
  std::lock_guard lock(state_);
  auto& t = transfers_[{from, to}];
  t.bytes += bytes;
  ++t.copies;
}

LOCUS_RUNTIME_INLINE transfer_summary placement_log_state::transfers() const {
  std::lock_guard lock(state_);
  return transfers_;
}

LOCUS_RUNTIME_INLINE void placement_log_state::reset_transfers() {
  std::lock_guard lock(state_);
  transfers_.clear();
}

LOCUS_RUNTIME_INLINE placement_log_state::placement_log_state() {
  const char* v = std::getenv("LOCUS_LOG_DEVICE_PLACEMENT");
  enabled.store(v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0);
}

LOCUS_RUNTIME_INLINE std::shared_ptr<sink_slot> placement_log_state::current_sink_locked() const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (it->sink) return it->sink;
  return global_sink_;
}

LOCUS_RUNTIME_INLINE void placement_log_state::wait_idle(std::unique_lock<std::mutex>& lock, const sink_slot* slot) {
  if (slot == nullptr) return;
  const auto& mine = sinks_on_this_thread();
  const auto own = static_cast<int>(std::count(mine.begin(), mine.end(), slot));
  idle_.wait(lock, [&] { return slot->in_flight <= own; });
}
#endif  // LOCUS_RUNTIME_DEFINITIONS

inline bool placement_log_enabled() noexcept {
  const auto& s = placement_log_state::instance();
  return s.enabled.load(std::memory_order_relaxed) || s.active_scopes.load(std::memory_order_relaxed) > 0;
}

/// "<device full name>" plus " (emulated)" for emulated GPUs.
LOCUS_RUNTIME_INLINE std::string log_device(device_id d);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE std::string log_device(device_id d) {
  std::string s = d.full_name();
  if (d.is_gpu() && LOCUS_EMULATE_GPUS) s += " (emulated)";
  return s;
}
#endif

LOCUS_RUNTIME_INLINE void log_line(std::string_view line);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void log_line(std::string_view line) { placement_log_state::instance().write(line); }
#endif

/// One evaluation's share of the log, held while it logs: the outermost entry on a thread claims
/// one of the evaluations the log has left, and the entries opened inside it (the copies
/// implicit_transfers makes, a loss's own reduction, a sink that evaluates) belong to it, so an
/// evaluation is logged whole or not at all.
class log_entry {
public:
  log_entry();
  log_entry(const log_entry&) = delete;
  log_entry& operator=(const log_entry&) = delete;
  ~log_entry() {
    if (registered_) current() = nullptr;
  }
  /// Whether this evaluation writes its lines.
  explicit operator bool() const noexcept { return logged_; }

private:
  static log_entry*& current() noexcept {
    thread_local log_entry* entry = nullptr;
    return entry;
  }
  bool logged_ = false;
  bool registered_ = false;
};

#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE log_entry::log_entry() {
  log_entry*& outer = current();
  if (outer != nullptr) {
    logged_ = true;  // only an entry that logs is registered
    return;
  }
  if (!placement_log_enabled() || !placement_log_state::instance().claim()) return;
  logged_ = true;
  outer = this;
  registered_ = true;
}
#endif

LOCUS_RUNTIME_INLINE void log_transfer(device_id from, device_id to, std::size_t bytes);
#if LOCUS_RUNTIME_DEFINITIONS
LOCUS_RUNTIME_INLINE void log_transfer(device_id from, device_id to, std::size_t bytes) {
  placement_log_state::instance().record_transfer(from, to, bytes);
  const log_entry entry;
  if (!entry) return;
  log_line("transfer: (Copy): " + from.full_name() + " -> " + to.full_name() + ", " + std::to_string(bytes) +
           " bytes" + ((from.is_gpu() || to.is_gpu()) && LOCUS_EMULATE_GPUS ? " (emulated)" : ""));
}
#endif
}  // namespace detail

/// Turns the placement log on or off for the whole process (scoped_placement_log objects keep it
/// on while they live, whatever this says).
inline void log_device_placement(bool on) {
  detail::placement_log_state::instance().switch_on(on ? placement_log_options::unlimited : 0);
}
/// Turns the placement log on for the process's next `options.first` evaluations, on any thread
/// (log_device_placement({.first = 40}): one training step, not 30,000 lines an epoch), then off.
inline void log_device_placement(placement_log_options options) {
  detail::placement_log_state::instance().switch_on(options.first);
}
[[nodiscard]] inline bool log_device_placement() { return detail::placement_log_enabled(); }

/// Replaces the process's sink (nullptr: back to stderr) once calls of the previous one in progress
/// have returned; returns the previous one. Sinks run while locus holds no lock: a sink may log,
/// call transfer_stats() or wait for another thread that logs; evaluations on several threads call
/// it concurrently, so it must be thread-safe. A sink that throws makes the evaluation that logged
/// throw (on whichever thread that was), before it runs.
inline placement_sink set_placement_sink(placement_sink sink) {
  return detail::placement_log_state::instance().exchange_sink(std::move(sink));
}

/// Turns the log on for its lifetime, for every thread, optionally into a sink of its own, and
/// optionally for its first `options.first` evaluations only. Scopes on several threads may overlap
/// and end in any order: while any lives (with evaluations left) the log is on; an evaluation counts
/// against the newest such scope; the lines go to the newest living scope that has a sink (else the
/// process's sink, else stderr); once a scope is destroyed its sink is never called again.
class scoped_placement_log {
public:
  scoped_placement_log() : scoped_placement_log(placement_log_options{}, placement_sink{}) {}
  explicit scoped_placement_log(placement_sink sink) : scoped_placement_log(placement_log_options{}, std::move(sink)) {}
  explicit scoped_placement_log(placement_log_options options, placement_sink sink = {})
      : id_(detail::placement_log_state::instance().push_scope(std::move(sink), options.first)) {}
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
