// The profiler: collects spans while enabled and exports them as a Chrome trace.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

/// Options of a Profiler.
struct ProfilerOptions {
  /// Chrome trace written when the Profiler is destroyed (or by flush()); empty = keep in memory.
  std::filesystem::path output_path;
};

/// Collects spans. Thread-safe: spans may be recorded from any thread. When disabled (paused),
/// is_recording() is one relaxed atomic load and record() drops the span.
/// Owned by whoever creates it (furiosa-run, a test, or process_profiler()); runtime sessions
/// share it through std::shared_ptr.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  /// Writes the trace to options.output_path when set; errors are logged, not thrown.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// True while recording (the hot-path check).
  bool is_recording() const noexcept { return recording_.load(std::memory_order_relaxed); }
  /// Stops recording; idempotent. The clock keeps running.
  void pause() noexcept { recording_.store(false, std::memory_order_relaxed); }
  /// Resumes recording; idempotent.
  void resume() noexcept { recording_.store(true, std::memory_order_relaxed); }

  /// A fresh trace (new random 128-bit trace_id, no parent).
  SpanContext new_trace() noexcept;
  /// A fresh non-zero span id, unique within this profiler.
  std::uint64_t next_span_id() noexcept { return next_span_id_.fetch_add(1) + 1; }
  /// A fresh non-zero flow id (correlation id from host submit to device work).
  std::uint64_t next_flow_id() noexcept { return next_flow_id_.fetch_add(1) + 1; }

  /// Stores a finished span (dropped while paused).
  void record(SpanRecord span);

  /// All spans recorded so far, sorted by start time.
  std::vector<SpanRecord> records() const;

  /// Writes the Chrome Trace Event JSON of records() to `path`. Throws std::runtime_error naming
  /// the path on failure (the profiler sits below the runtime's Error type).
  void write_chrome_trace(const std::filesystem::path& path) const;
  /// Writes to options.output_path now (no-op when unset). Throws like write_chrome_trace.
  void flush() const;

  const ProfilerOptions& options() const noexcept { return options_; }

 private:
  ProfilerOptions options_;
  std::atomic<bool> recording_{true};
  std::atomic<std::uint64_t> next_span_id_{0};
  std::atomic<std::uint64_t> next_flow_id_{0};
  std::uint64_t trace_seed_;
  std::atomic<std::uint64_t> trace_counter_{0};
  mutable std::mutex mu_;
  std::vector<SpanRecord> spans_;
};

/// The profiler for FURIOSA_PROFILER_OUTPUT_PATH: when that variable is set, the first call
/// creates (std::call_once) a process-wide Profiler writing there at process exit, and every
/// call returns it; otherwise null. Runtime sessions use it when no profiler is given, so any
/// program traces without a code change.
std::shared_ptr<Profiler> process_profiler();

/// RAII span: starts at construction, recorded at destruction (also on exceptions). Does nothing
/// when `profiler` is null or not recording. Thread-compatible; use from one thread.
class ScopedSpan {
 public:
  ScopedSpan(Profiler* profiler, std::string_view name, const SpanContext& parent,
             Category cat = Category::Runtime);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

  /// Context for children of this span (the parent's context when inactive).
  SpanContext context() const noexcept { return context_; }
  /// Mutable record to set attributes (operator_index, flow_id, ...) before the span ends.
  SpanRecord& record() noexcept { return record_; }
  bool active() const noexcept { return profiler_ != nullptr; }
  /// Ends the span now instead of at destruction.
  void end();

 private:
  Profiler* profiler_;
  SpanContext context_;
  SpanRecord record_;
  bool ended_ = false;  ///< set by end(); the span is recorded at most once
};

}  // namespace furiosa::profiler
