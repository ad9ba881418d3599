// Profiler (per-thread span buffers, the max_events bound, record scopes), process_profiler()
// and ScopedSpan.
#include "furiosa/profiler/profiler.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

#include "chrome_trace.h"
#include "span_order.h"

namespace furiosa::profiler {
namespace detail {

/// A fixed-capacity block of spans. Only the owning thread writes; readers copy the first
/// `size` slots (acquire), so a slot is never read before it is fully written and never written
/// after it is published. Chunks are never moved or freed before the profiler.
struct Chunk {
  /// Raw storage: a slot is constructed when its span is written, so each slot is touched once.
  explicit Chunk(std::size_t cap)
      : slots(static_cast<SpanRecord*>(::operator new(cap * sizeof(SpanRecord)))), capacity(cap) {}
  ~Chunk() {
    const std::size_t n = size.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i) slots[i].~SpanRecord();
    ::operator delete(slots);
  }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  SpanRecord* const slots;
  const std::size_t capacity;
  std::atomic<std::size_t> size{0};
  std::atomic<Chunk*> next{nullptr};
};

/// The spans of one (profiler, thread): an append-only list of chunks written by that thread
/// only, plus the thread's block of span ids and its count of dropped spans.
struct ThreadBuffer {
  /// First chunk size; chunks double up to kMaxChunk, so a thread recording a few spans costs
  /// little memory and a busy thread allocates rarely.
  static constexpr std::size_t kFirstChunk = 64;
  static constexpr std::size_t kMaxChunk = 4096;
  /// Span ids handed to a thread at a time.
  static constexpr std::uint64_t kIdBlock = 1024;

  explicit ThreadBuffer(Profiler& p) : profiler(p) {}
  ~ThreadBuffer() {
    Chunk* c = head.load(std::memory_order_acquire);
    while (c != nullptr) {
      Chunk* next = c->next.load(std::memory_order_acquire);
      delete c;
      c = next;
    }
  }
  ThreadBuffer(const ThreadBuffer&) = delete;
  ThreadBuffer& operator=(const ThreadBuffer&) = delete;

  /// The raw (unconstructed) slot to construct the next span in, or null when the max_events
  /// budget is spent (the span is then counted as dropped). Owner thread only.
  SpanRecord* slot() noexcept {
    if (tail != nullptr && tail->size.load(std::memory_order_relaxed) < tail->capacity) {
      return &tail->slots[tail->size.load(std::memory_order_relaxed)];
    }
    if (exhausted || !grow()) {
      dropped.store(dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return nullptr;
    }
    return &tail->slots[0];
  }

  /// Publishes the slot returned by slot() (after a span has been constructed in it).
  void publish() noexcept {
    tail->size.store(tail->size.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  /// Appends a new chunk sized by the granted part of the budget; false when none is left.
  bool grow() noexcept {
    // A chunk reserves its slots of the budget up front; capping chunks at 1/64 of the bound
    // keeps the slots reserved but unused by other threads small when the bound is small.
    const std::size_t cap = std::max<std::size_t>(1, profiler.options_.max_events / 64);
    const std::size_t granted = profiler.reserve_slots(std::min(next_capacity, cap));
    if (granted == 0) {
      exhausted = true;  // the budget never comes back
      return false;
    }
    Chunk* chunk = nullptr;
    try {
      chunk = new Chunk(granted);
    } catch (...) {
      return false;  // out of memory: this span is dropped, a later one may fit
    }
    if (tail == nullptr) {
      head.store(chunk, std::memory_order_release);
    } else {
      tail->next.store(chunk, std::memory_order_release);
    }
    tail = chunk;
    next_capacity = std::min(next_capacity * 2, kMaxChunk);
    return true;
  }

  /// Appends copies of the published spans to `out` (any thread).
  void copy_to(std::vector<SpanRecord>& out) const {
    for (const Chunk* c = head.load(std::memory_order_acquire); c != nullptr;
         c = c->next.load(std::memory_order_acquire)) {
      const std::size_t n = c->size.load(std::memory_order_acquire);
      out.insert(out.end(), c->slots, c->slots + n);
    }
  }

  Profiler& profiler;
  std::atomic<Chunk*> head{nullptr};
  std::atomic<std::uint64_t> dropped{0};  ///< written by the owner only, read by anyone
  // Owner thread only:
  Chunk* tail = nullptr;
  std::size_t next_capacity = kFirstChunk;
  bool exhausted = false;
  std::uint64_t next_id = 0, id_end = 0;  ///< the thread's current block of span ids
};

}  // namespace detail

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

/// system_clock minus steady_clock, in ns. The system clock is read between two steady reads
/// and compared with their midpoint; the tightest of a few tries is kept, so the offset is
/// exact to about the cost of one clock read.
std::int64_t measure_epoch_offset() noexcept {
  std::int64_t best_width = std::numeric_limits<std::int64_t>::max();
  std::int64_t offset = 0;
  for (int i = 0; i < 5; ++i) {
    const std::int64_t before = now_ns();
    const std::int64_t system = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    const std::int64_t after = now_ns();
    if (after - before < best_width) {
      best_width = after - before;
      offset = system - (before + (after - before) / 2);
    }
  }
  return offset;
}

/// Process-unique profiler ids (0 is never used, it marks an empty cache entry).
std::atomic<std::uint64_t> next_profiler_uid{0};

/// The per-thread cache from profiler uid to that thread's buffer. Zero-initialised and
/// trivially destructible, so reading it costs no thread_local guard. A few entries so a thread
/// alternating between profilers stays on the fast path; uids are never reused, so an entry of
/// a destroyed profiler can never match.
struct BufferCache {
  static constexpr unsigned kEntries = 4;
  std::uint64_t uid[kEntries];
  detail::ThreadBuffer* buffer[kEntries];
  unsigned next_victim;
};
thread_local BufferCache buffer_cache;

/// The innermost open RecordScope of the calling thread (of any profiler).
thread_local RecordScope* top_scope = nullptr;

/// The innermost open active ScopedSpan of the calling thread (of any profiler).
thread_local ScopedSpan* top_span = nullptr;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Profiler

Profiler::Profiler(ProfilerOptions options)
    : options_(std::move(options)),
      uid_(next_profiler_uid.fetch_add(1, std::memory_order_relaxed) + 1),
      kinds_(options_.kinds),
      epoch_offset_ns_(measure_epoch_offset()),
      trace_seed_(random_seed(this)) {}

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

detail::ThreadBuffer* Profiler::local_buffer() noexcept {
  BufferCache& cache = buffer_cache;
  for (unsigned i = 0; i < BufferCache::kEntries; ++i) {
    if (cache.uid[i] == uid_) return cache.buffer[i];
  }
  detail::ThreadBuffer* buffer = register_thread();
  if (buffer != nullptr) {
    const unsigned victim = cache.next_victim++ % BufferCache::kEntries;
    cache.uid[victim] = uid_;
    cache.buffer[victim] = buffer;
  }
  return buffer;
}

detail::ThreadBuffer* Profiler::register_thread() noexcept {
  const std::uint64_t thread = current_thread_id();
  try {
    std::lock_guard lock(registry_mu_);
    if (const auto it = by_thread_.find(thread); it != by_thread_.end()) return it->second;
    buffers_.push_back(std::make_unique<detail::ThreadBuffer>(*this));
    detail::ThreadBuffer* buffer = buffers_.back().get();
    try {
      by_thread_.emplace(thread, buffer);
    } catch (...) {
      buffers_.pop_back();
      throw;
    }
    return buffer;
  } catch (...) {
    return nullptr;  // out of memory: the caller drops the span
  }
}

std::size_t Profiler::reserve_slots(std::size_t wanted) noexcept {
  std::size_t reserved = reserved_.load(std::memory_order_relaxed);
  for (;;) {
    if (reserved >= options_.max_events) return 0;
    const std::size_t granted = std::min(wanted, options_.max_events - reserved);
    if (reserved_.compare_exchange_weak(reserved, reserved + granted,
                                        std::memory_order_relaxed)) {
      return granted;
    }
  }
}

std::uint64_t Profiler::next_span_id() noexcept {
  detail::ThreadBuffer* buffer = local_buffer();
  if (buffer == nullptr) {  // no buffer (out of memory): one id from the shared counter
    return next_span_block_.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  if (buffer->next_id == buffer->id_end) {
    const std::uint64_t first = next_span_block_.fetch_add(detail::ThreadBuffer::kIdBlock,
                                                           std::memory_order_relaxed);
    buffer->next_id = first + 1;  // ids start at 1
    buffer->id_end = first + 1 + detail::ThreadBuffer::kIdBlock;
  }
  return buffer->next_id++;
}

bool Profiler::selected(const SpanRecord& span) const noexcept {
  const SpanKinds k = kinds();
  return k == SpanKinds::All || includes(k, span_kind(span.cat, span.name)) || span.name == "Inference";
}

void Profiler::append(const SpanRecord& span) {
  if (!selected(span)) return;
  detail::ThreadBuffer* buffer = local_buffer();
  if (buffer == nullptr) return;
  SpanRecord* slot = buffer->slot();
  if (slot == nullptr) return;
  ::new (static_cast<void*>(slot)) SpanRecord(span);
  buffer->publish();
}

void Profiler::append(SpanRecord&& span) {
  if (!selected(span)) return;
  detail::ThreadBuffer* buffer = local_buffer();
  if (buffer == nullptr) return;
  SpanRecord* slot = buffer->slot();
  if (slot == nullptr) return;
  ::new (static_cast<void*>(slot)) SpanRecord(std::move(span));
  buffer->publish();
}

void Profiler::record(SpanRecord span) {
  if (!is_recording()) return;
  append(std::move(span));
}

RecordScope Profiler::record(std::string_view label) { return RecordScope(this, label); }

SpanContext Profiler::current_context() const noexcept {
  for (const RecordScope* scope = top_scope; scope != nullptr; scope = scope->below_) {
    if (scope->owner_ == this) return scope->context();
  }
  return SpanContext{};
}

std::vector<SpanRecord> Profiler::records() const {
  std::vector<SpanRecord> copy;
  {
    std::lock_guard lock(registry_mu_);
    for (const auto& buffer : buffers_) buffer->copy_to(copy);
  }
  detail::sort_spans(copy);
  return copy;
}

std::uint64_t Profiler::dropped_events() const {
  std::lock_guard lock(registry_mu_);
  std::uint64_t dropped = 0;
  for (const auto& buffer : buffers_) dropped += buffer->dropped.load(std::memory_order_relaxed);
  return dropped;
}

RecordTable Profiler::record_table() const {
  return RecordTable::from_records(records(), epoch_offset_ns_);
}

void Profiler::write_chrome_trace(const std::filesystem::path& path) const {
  detail::TraceInfo info;
  info.dropped_events = dropped_events();
  info.epoch_offset_ns = epoch_offset_ns_;
  detail::write_chrome_trace_file(path, records(), info);
}

void Profiler::write_table(const std::filesystem::path& path) const {
  record_table().write_csv(path);
}

void Profiler::flush() const {
  if (options_.output_path.empty()) return;
  switch (options_.format) {
    case ProfilerFormat::Table:
      write_table(options_.output_path);
      return;
    case ProfilerFormat::ChromeTrace:
      break;
  }
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
    std::string extension = options.output_path.extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (extension == ".csv") options.format = ProfilerFormat::Table;
    process_profiler_slot() = std::make_shared<Profiler>(std::move(options));
    spdlog::debug("profiler: {} set, the trace will be written to '{}' at exit", kOutputPathEnv,
                  path);
  });
  return process_profiler_slot();
}

// ---------------------------------------------------------------------------------------------
// ProfileScope

namespace {

/// The open profiling scopes, oldest first. Guarded by mutex(); count() mirrors the size so
/// active_profiler() need not lock when no scope is open (the common, untraced case).
struct ScopeStack {
  std::mutex mu;
  std::vector<std::pair<const ProfileScope*, std::shared_ptr<Profiler>>> scopes;
  std::atomic<std::size_t> count{0};
};

ScopeStack& scope_stack() {
  static ScopeStack* stack = new ScopeStack();  // never destroyed: usable during static teardown
  return *stack;
}

}  // namespace

ProfileScope::ProfileScope(std::shared_ptr<Profiler> profiler) : profiler_(std::move(profiler)) {
  if (!profiler_) throw std::invalid_argument("ProfileScope: null profiler");
  ScopeStack& stack = scope_stack();
  std::lock_guard lock(stack.mu);
  stack.scopes.emplace_back(this, profiler_);
  stack.count.store(stack.scopes.size(), std::memory_order_relaxed);
}

ProfileScope::~ProfileScope() {
  ScopeStack& stack = scope_stack();
  std::lock_guard lock(stack.mu);
  const auto it = std::find_if(stack.scopes.begin(), stack.scopes.end(),
                               [this](const auto& entry) { return entry.first == this; });
  if (it != stack.scopes.end()) stack.scopes.erase(it);
  stack.count.store(stack.scopes.size(), std::memory_order_relaxed);
}

std::shared_ptr<Profiler> active_profiler() {
  ScopeStack& stack = scope_stack();
  if (stack.count.load(std::memory_order_relaxed) != 0) {
    std::lock_guard lock(stack.mu);
    if (!stack.scopes.empty()) return stack.scopes.back().second;
  }
  return process_profiler();
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
  below_ = top_span;
  top_span = this;
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
  // Unlink; normally this span is the top (spans end in reverse order), but one ended early with
  // end() may sit below younger spans.
  for (ScopedSpan** link = &top_span; *link != nullptr; link = &(*link)->below_) {
    if (*link == this) {
      *link = below_;
      break;
    }
  }
  // A copy, not a move: record() stays readable after end() (names are short, mostly SSO).
  if (profiler_->is_recording()) profiler_->append(record_);
}

OpenSpan innermost_open_span() noexcept {
  const ScopedSpan* span = top_span;
  return span != nullptr ? OpenSpan{span->profiler_, span->context_} : OpenSpan{};
}

// ---------------------------------------------------------------------------------------------
// RecordScope

RecordScope::RecordScope(Profiler* profiler, std::string_view label)
    : span_(profiler, label, profiler != nullptr ? profiler->current_context() : SpanContext{},
            Category::Runtime) {
  if (!span_.active()) return;
  owner_ = profiler;
  below_ = top_scope;
  top_scope = this;
}

RecordScope::~RecordScope() {
  if (owner_ != nullptr) {
    // Unlink; normally this scope is the top (scopes end in reverse order), but an out-of-order
    // end (e.g. scopes held in unique_ptrs) must not leave a dangling entry.
    for (RecordScope** link = &top_scope; *link != nullptr; link = &(*link)->below_) {
      if (*link == this) {
        *link = below_;
        break;
      }
    }
  }
  // span_ is recorded by its own destructor, after the unlinking above.
}

}  // namespace furiosa::profiler
