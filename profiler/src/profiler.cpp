// Profiler, process_profiler() and ScopedSpan.
#include "furiosa/profiler/profiler.h"

#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <utility>

#include <spdlog/spdlog.h>

#include "chrome_trace.h"
#include "span_order.h"

namespace furiosa::profiler {
namespace {

/// Environment variable that turns tracing on for a whole process (see process_profiler()).
constexpr const char* kOutputPathEnv = "FURIOSA_PROFILER_OUTPUT_PATH";

/// The splitmix64 finalizer: a bijection on 64-bit values with good avalanche, so distinct
/// inputs give distinct, well-spread outputs.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// 64 random bits for a profiler's trace-id seed. Falls back to the clock and an address when
/// std::random_device is unavailable (it may throw on systems without an entropy source).
std::uint64_t random_seed(const void* salt) noexcept {
  try {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
  } catch (...) {
    return mix64(static_cast<std::uint64_t>(now_ns())) ^
           mix64(reinterpret_cast<std::uintptr_t>(salt));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Profiler

Profiler::Profiler(ProfilerOptions options)
    : options_(std::move(options)), trace_seed_(random_seed(this)) {}

Profiler::~Profiler() {
  if (options_.output_path.empty()) return;
  try {
    flush();
  } catch (const std::exception& e) {
    spdlog::error("profiler: could not write the trace: {}", e.what());
  } catch (...) {
    spdlog::error("profiler: could not write the trace to '{}'", options_.output_path.string());
  }
}

SpanContext Profiler::new_trace() noexcept {
  // lo is a bijection of the per-profiler counter, hence unique within this profiler for 2^64
  // traces; hi is another stream of the same counter, so ids also look random across profilers.
  const std::uint64_t n = trace_counter_.fetch_add(1, std::memory_order_relaxed) + 1;
  TraceId id;
  id.lo = mix64(trace_seed_ + n);
  id.hi = mix64(mix64(trace_seed_ ^ 0x9e3779b97f4a7c15ULL) + n);
  if (!id.valid()) id.hi = 1;  // lo alone is unique, so changing hi keeps ids unique
  return SpanContext{id, 0};
}

void Profiler::record(SpanRecord span) {
  if (!is_recording()) return;
  std::lock_guard lock(mu_);
  spans_.push_back(std::move(span));
}

std::vector<SpanRecord> Profiler::records() const {
  std::vector<SpanRecord> copy;
  {
    std::lock_guard lock(mu_);
    copy = spans_;
  }
  detail::sort_spans(copy);
  return copy;
}

void Profiler::write_chrome_trace(const std::filesystem::path& path) const {
  detail::write_chrome_trace_file(path, records());
}

void Profiler::flush() const {
  if (options_.output_path.empty()) return;
  write_chrome_trace(options_.output_path);
}

// ---------------------------------------------------------------------------------------------
// process_profiler()

namespace {

/// The process-wide profiler slot. spdlog's registry (a function-local static of its own) is
/// touched first so that it is constructed before, and therefore destroyed after, the slot: the
/// Profiler destructor, which runs when the slot is destroyed at exit, may log.
std::shared_ptr<Profiler>& process_profiler_slot() {
  static spdlog::logger* const logger_kept_alive = spdlog::default_logger_raw();
  static std::shared_ptr<Profiler> slot;
  (void)logger_kept_alive;
  return slot;
}

}  // namespace

std::shared_ptr<Profiler> process_profiler() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv(kOutputPathEnv);
    if (path == nullptr || *path == '\0') return;
    ProfilerOptions options;
    options.output_path = path;
    process_profiler_slot() = std::make_shared<Profiler>(std::move(options));
    spdlog::debug("profiler: {} set, the trace will be written to '{}' at exit", kOutputPathEnv,
                  path);
  });
  return process_profiler_slot();
}

// ---------------------------------------------------------------------------------------------
// ScopedSpan

ScopedSpan::ScopedSpan(Profiler* profiler, std::string_view name, const SpanContext& parent,
                       Category cat)
    : profiler_(profiler != nullptr && profiler->is_recording() ? profiler : nullptr),
      context_(parent) {
  if (profiler_ == nullptr) return;
  const SpanContext under = parent.valid() ? parent : profiler_->new_trace();
  record_.trace_id = under.trace_id;
  record_.parent_span_id = under.span_id;
  record_.span_id = profiler_->next_span_id();
  record_.name.assign(name);
  record_.cat = cat;
  record_.thread_id = current_thread_id();
  context_ = SpanContext{record_.trace_id, record_.span_id};
  record_.start_ns = now_ns();  // last, so the setup above is not charged to the span
}

ScopedSpan::~ScopedSpan() {
  try {
    end();
  } catch (...) {
    // Only allocation failure can get here; losing one span beats terminating the process.
  }
}

void ScopedSpan::end() {
  if (profiler_ == nullptr || ended_) return;
  ended_ = true;
  record_.end_ns = now_ns();
  // A copy, not a move: record() stays readable after end() (names are short, mostly SSO).
  profiler_->record(record_);
}

}  // namespace furiosa::profiler
