// The span model's free functions: category names, trace id rendering, the clock and thread ids.
#include "furiosa/profiler/span.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace furiosa::profiler {

std::string_view category_name(Category cat) noexcept {
  switch (cat) {
    case Category::Runtime:
      return "Runtime";
    case Category::NPU:
      return "NPU";
  }
  return "Unknown";  // only reachable through a cast of an out-of-range value
}

SpanKinds span_kind(Category cat, std::string_view name) noexcept {
  if (cat == Category::Runtime) return SpanKinds::RuntimeSteps;
  return name.starts_with("LowLevel") ? SpanKinds::NpuOperators : SpanKinds::NpuExecutions;
}

SpanKinds parse_span_kinds(std::string_view list) {
  SpanKinds kinds = SpanKinds::None;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = list.substr(start, comma - start);
    if (item == "runtime") kinds = kinds | SpanKinds::RuntimeSteps;
    else if (item == "npu-executions") kinds = kinds | SpanKinds::NpuExecutions;
    else if (item == "npu-operators") kinds = kinds | SpanKinds::NpuOperators;
    else if (item == "all") kinds = kinds | SpanKinds::All;
    else {
      throw std::invalid_argument(fmt::format(
          "unknown span kind '{}' (accepted: runtime, npu-executions, npu-operators, all; comma-separated)", item));
    }
    start = comma + 1;
  }
  return kinds;
}

std::string TraceId::to_hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

std::int64_t now_ns() noexcept {
  // The simulated device stamps its Load/Execution/Store spans on this same clock, so host and
  // device spans can be laid out on one time axis.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::uint64_t current_thread_id() noexcept {
  // Ids are handed out in order of first use; 0 is never given so it can mean "no host thread".
  static std::atomic<std::uint64_t> next_id{0};
  thread_local const std::uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed) + 1;
  return id;
}

namespace {

/// Thread names given with set_current_thread_name(). Leaked on purpose: it may be used while
/// static objects are destroyed at exit (a Profiler writing its trace).
struct ThreadNames {
  std::mutex mu;
  std::map<std::uint64_t, std::string> names;
};

ThreadNames& thread_names() {
  static ThreadNames* const names = new ThreadNames;
  return *names;
}

}  // namespace

void set_current_thread_name(std::string_view name) {
  const std::uint64_t id = current_thread_id();
  ThreadNames& registry = thread_names();
  std::lock_guard lock(registry.mu);
  registry.names[id] = std::string(name);
}

std::string thread_name(std::uint64_t thread_id) {
  ThreadNames& registry = thread_names();
  std::lock_guard lock(registry.mu);
  const auto it = registry.names.find(thread_id);
  return it == registry.names.end() ? std::string() : it->second;
}

}  // namespace furiosa::profiler
