// Private: the Chrome Trace Event Format exporter behind Profiler::write_chrome_trace().
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "furiosa/profiler/span.h"

namespace furiosa::profiler::detail {

/// Value of otherData.schema; bump when the layout of events or args changes incompatibly.
inline constexpr const char* kTraceSchema = "furiosa-trace/1";

/// pid of the host process track (all Runtime spans).
inline constexpr int kHostPid = 1;
/// pid of card N's track is kNpuPidBase + N (NPU spans).
inline constexpr int kNpuPidBase = 100;
/// A span that would overlap without nesting on its track goes to an overflow lane: tid + k *
/// kLaneTidStride for lane k >= 1.
inline constexpr std::int64_t kLaneTidStride = 100'000;
/// The simulator's host lateness (SimOverrun spans) of PE p is drawn on its own track of the
/// card's process, tid kLatenessTidBase + p + 1 ("PE <p> host lateness"), not on the PE's track:
/// a lateness interval may overlap the next execution that the modelled device already started.
inline constexpr std::int64_t kLatenessTidBase = 1'000;
/// The DMA of PE p is drawn on two tracks of its own: its Load spans on tid kLoadTidBase + p + 1
/// ("PE <p> Load"), its Store spans on kStoreTidBase + p + 1 ("PE <p> Store"), so that the PE's
/// track holds only Executions and their kernels, which never overlap: a device's DMA engines run
/// beside its PE, and a queued execution's Load overlaps the kernels before it (docs/timing.md).
inline constexpr std::int64_t kLoadTidBase = 2'000;
inline constexpr std::int64_t kStoreTidBase = 3'000;

/// What the document says about the recording besides the spans (otherData).
struct TraceInfo {
  std::uint64_t dropped_events = 0;
  std::int64_t epoch_offset_ns = 0;  ///< Profiler::epoch_offset_ns()
};

/// Builds the Chrome Trace Event JSON document of `spans` (any order; they are sorted with
/// sort_spans first). See chrome_trace.cpp for the layout of processes, threads, args and flows.
nlohmann::json chrome_trace_document(std::vector<SpanRecord> spans, const TraceInfo& info = {});

/// Writes chrome_trace_document(spans, info) to `path` (created or truncated). Throws
/// Error(IoError) naming the path when the file cannot be opened or written.
void write_chrome_trace_file(const std::filesystem::path& path, std::vector<SpanRecord> spans,
                             const TraceInfo& info = {});

}  // namespace furiosa::profiler::detail
