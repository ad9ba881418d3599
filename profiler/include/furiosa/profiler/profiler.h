// The profiler: collects spans while recording and exports them as a Chrome trace or as the
// record table. The C++ counterpart of FuriosaAI's `furiosa.runtime.profiler`:
//
//   furiosa::profiler::Profiler profiler({.output_path = "trace.json"});   // format ChromeTrace
//   {
//     auto warm_up = profiler.record("warm up");   // spans started inside nest under "warm up"
//     for (int i = 0; i < 10; ++i) runner->run(inputs);
//   }
//   profiler.pause();                              // nothing is recorded ...
//   for (int i = 0; i < 10; ++i) runner->run(inputs);
//   profiler.resume();                             // ... until resumed
//   // the destructor writes trace.json (or a CSV record table with ProfilerFormat::Table)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "furiosa/profiler/record_table.h"
#include "furiosa/profiler/span.h"

namespace furiosa::profiler {

namespace detail {
struct ThreadBuffer;
}  // namespace detail

class RecordScope;

/// What a Profiler writes to ProfilerOptions::output_path (the SDK's `format`).
enum class ProfilerFormat : std::uint8_t {
  ChromeTrace,  ///< Chrome Trace Event JSON (chrome://tracing, Perfetto UI)
  Table,        ///< the record table as CSV (see RecordTable)
};

/// Default bound on buffered spans (ProfilerOptions::max_events): ~140 MB of spans at most.
inline constexpr std::size_t kDefaultMaxEvents = 1'000'000;

/// Options of a Profiler.
struct ProfilerOptions {
  /// File written when the Profiler is destroyed (or by flush()); empty = keep in memory.
  std::filesystem::path output_path;
  /// What is written to output_path.
  ProfilerFormat format = ProfilerFormat::ChromeTrace;
  /// At most this many spans are kept; later spans are counted as dropped (dropped_events(),
  /// written into the trace as otherData.dropped_events) so long runs stay bounded.
  std::size_t max_events = kDefaultMaxEvents;
  /// Which spans are kept (the guide's selection of what to trace); the others are dropped when
  /// they end, before they cost a buffer slot. Inference spans are kept whatever the selection:
  /// they are the roots every report and trace id hangs on.
  SpanKinds kinds = SpanKinds::All;
};

/// Collects spans. Thread-safe: spans may be recorded from any thread.
///
/// Cost: while paused, is_recording() is one relaxed atomic load and record()/ScopedSpan do
/// nothing else. While recording, each thread appends to its own buffer (found through a
/// thread_local cache, registered once per (profiler, thread) under a lock): no lock and no
/// shared write per span; span ids are handed out to each thread in blocks.
///
/// Owned by whoever creates it (furiosa-run, a test, or process_profiler()); runtime sessions
/// share it through std::shared_ptr. It must outlive every ScopedSpan/RecordScope using it.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  /// Writes options.output_path in options.format when set; errors are logged, not thrown.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// True while recording (the hot-path check).
  bool is_recording() const noexcept { return recording_.load(std::memory_order_relaxed); }
  /// Stops recording; idempotent. The clock keeps running: spans recorded after resume() have
  /// their real times, and a span open across the pause is dropped at its end.
  void pause() noexcept { recording_.store(false, std::memory_order_relaxed); }
  /// Resumes recording; idempotent.
  void resume() noexcept { recording_.store(true, std::memory_order_relaxed); }
  /// Keeps only the spans of `kinds` from now on (initially options.kinds); thread-safe.
  void select(SpanKinds kinds) noexcept { kinds_.store(kinds, std::memory_order_relaxed); }
  /// The current selection.
  SpanKinds kinds() const noexcept { return kinds_.load(std::memory_order_relaxed); }

  /// A fresh trace (new random 128-bit trace_id, no parent).
  SpanContext new_trace() noexcept;
  /// A fresh non-zero span id, unique within this profiler (increasing within a thread).
  std::uint64_t next_span_id() noexcept;
  /// A fresh non-zero flow id (correlation id from host submit to device work).
  std::uint64_t next_flow_id() noexcept { return next_flow_id_.fetch_add(1) + 1; }

  /// Stores a finished span (dropped while paused; counted as dropped beyond max_events).
  void record(SpanRecord span);

  /// Opens a record scope labelled `label` on the calling thread: a span (name = label, cat
  /// Runtime) that is the parent of the spans the runtime starts inside it on this thread (see
  /// current_context()). Scopes nest; each must end on the thread that opened it.
  [[nodiscard]] RecordScope record(std::string_view label);

  /// The innermost open record scope of this profiler on the calling thread as a parent
  /// context; an empty SpanContext when there is none. The runtime makes it the parent
  /// (parent_span_id) of its Inference span, which still gets a trace_id of its own.
  SpanContext current_context() const noexcept;

  /// All spans recorded so far, sorted by start time (times on the steady clock, see now_ns()).
  std::vector<SpanRecord> records() const;
  /// Spans not kept because max_events was reached.
  std::uint64_t dropped_events() const;

  /// system_clock ns since the Unix epoch minus steady_clock ns (now_ns()), measured once at
  /// construction: a steady-clock time t is the epoch time t + epoch_offset_ns().
  std::int64_t epoch_offset_ns() const noexcept { return epoch_offset_ns_; }

  /// The record table of records(): one row per span, times in ns since the Unix epoch.
  RecordTable record_table() const;

  /// Writes the Chrome Trace Event JSON of records() to `path`. Throws Error(IoError) naming
  /// the path on failure (the profiler sits below the runtime's Error type).
  void write_chrome_trace(const std::filesystem::path& path) const;
  /// Writes record_table() as CSV to `path`. Throws like write_chrome_trace.
  void write_table(const std::filesystem::path& path) const;
  /// Writes options.format to options.output_path now (no-op when unset). Throws like
  /// write_chrome_trace.
  void flush() const;

  const ProfilerOptions& options() const noexcept { return options_; }

 private:
  friend class ScopedSpan;
  friend struct detail::ThreadBuffer;

  /// The calling thread's buffer for this profiler (registered on first use); null only when
  /// registration failed for lack of memory.
  detail::ThreadBuffer* local_buffer() noexcept;
  detail::ThreadBuffer* register_thread() noexcept;
  /// Reserves up to `wanted` slots of the max_events budget; returns how many were granted.
  std::size_t reserve_slots(std::size_t wanted) noexcept;
  /// True when kinds() keeps `span` (always for Inference spans).
  bool selected(const SpanRecord& span) const noexcept;
  /// Stores a copy of `span` if selected (recording is checked by the caller).
  void append(const SpanRecord& span);
  void append(SpanRecord&& span);

  ProfilerOptions options_;
  std::uint64_t uid_;  ///< process-unique id keying the thread_local buffer cache
  std::atomic<SpanKinds> kinds_;  ///< spans kept (select())
  std::int64_t epoch_offset_ns_;
  std::atomic<bool> recording_{true};
  std::atomic<std::uint64_t> next_span_block_{0};
  std::atomic<std::uint64_t> next_flow_id_{0};
  std::uint64_t trace_seed_;
  std::atomic<std::uint64_t> trace_counter_{0};
  std::atomic<std::size_t> reserved_{0};  ///< slots of max_events handed to thread buffers

  mutable std::mutex registry_mu_;  ///< guards the two containers below (not the spans)
  std::vector<std::unique_ptr<detail::ThreadBuffer>> buffers_;
  std::unordered_map<std::uint64_t, detail::ThreadBuffer*> by_thread_;
};

/// The profiler for FURIOSA_PROFILER_OUTPUT_PATH: when that variable is set, the first call
/// creates (std::call_once) a process-wide Profiler writing there at process exit (a CSV record
/// table when the path ends in ".csv", else a Chrome trace), and every call returns it;
/// otherwise null. Runtime sessions use it when no profiler is given, so any program traces
/// without a code change.
std::shared_ptr<Profiler> process_profiler();

/// A profiling scope, the C++ form of the SDK's `with profile(...) as profiler:`. While it is
/// alive, every runner and queue that was given no profiler of its own
/// (RunnerOptions::profiler / QueueOptions::profiler null) records the inferences it starts
/// into `profiler` -- also runners created before the scope opened: the profiler is looked up
/// when each inference starts (see active_profiler()). Scopes nest; the innermost alive one wins.
/// Thread-safe: may be opened and closed on any thread (a closed scope is removed wherever it
/// sits in the stack). The scope keeps `profiler` alive; an inference started inside keeps it
/// alive until it completes. Throws std::invalid_argument when `profiler` is null.
class ProfileScope {
 public:
  explicit ProfileScope(std::shared_ptr<Profiler> profiler);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

  /// The scope's profiler (record(), pause(), reports), as the SDK's `as profiler`.
  Profiler& profiler() const noexcept { return *profiler_; }
  /// The same, shared.
  const std::shared_ptr<Profiler>& shared() const noexcept { return profiler_; }

 private:
  std::shared_ptr<Profiler> profiler_;
};

/// The profiler a runtime session records an inference into when it was given none: the
/// innermost alive ProfileScope's, else process_profiler() (FURIOSA_PROFILER_OUTPUT_PATH), else
/// null. Thread-safe. Cost when no scope is open: one relaxed atomic load plus process_profiler()
/// (a call_once check and a shared_ptr copy); with a scope open, a mutex and a shared_ptr copy.
std::shared_ptr<Profiler> active_profiler();

/// An open span: the profiler recording it and the context of its children.
struct OpenSpan {
  Profiler* profiler = nullptr;  ///< null when no span is open
  SpanContext context;
};

/// The calling thread's innermost open active span (a ScopedSpan, or the span of a RecordScope)
/// of any profiler; {nullptr, {}} when there is none. Lets code that is handed no profiler nest
/// its spans under its caller's: the compiler's pass spans become children of the runtime's
/// Compile span this way. Costs one thread_local read; spans that are inactive (no profiler, or
/// paused) are never open, so with no profiler recording it always returns {nullptr, {}}.
OpenSpan innermost_open_span() noexcept;

/// RAII span: starts at construction, recorded at destruction (also on exceptions). Does nothing
/// when `profiler` is null or not recording. While it is open and active it is the calling
/// thread's innermost open span (innermost_open_span()), so it must end on the thread that
/// started it. Thread-compatible; use from one thread.
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
  friend OpenSpan innermost_open_span() noexcept;

  Profiler* profiler_;
  SpanContext context_;
  SpanRecord record_;
  bool ended_ = false;           ///< set by end(); the span is recorded at most once
  ScopedSpan* below_ = nullptr;  ///< the next older open active span on this thread
};

/// A record scope (Profiler::record()): a Runtime span named after its label, and, while open,
/// the parent of the runtime spans started on its thread (Profiler::current_context()). Inactive
/// (no span, not a parent) when the profiler is not recording at construction. Neither copyable
/// nor movable; must be destroyed on the thread that created it.
class RecordScope {
 public:
  RecordScope(Profiler* profiler, std::string_view label);
  ~RecordScope();
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

  /// Context of the scope's span (the enclosing context when inactive).
  SpanContext context() const noexcept { return span_.context(); }
  bool active() const noexcept { return span_.active(); }

 private:
  friend class Profiler;
  ScopedSpan span_;
  const Profiler* owner_ = nullptr;  ///< non-null while linked into the thread's scope stack
  RecordScope* below_ = nullptr;     ///< the next older open scope on this thread
};

}  // namespace furiosa::profiler
