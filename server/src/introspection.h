// Private: the JSON bodies of Triton's introspection extensions of the v2 protocol, over the
// models a server serves: the repository index, model statistics and model configuration.
// Protocol text: Triton's docs/protocol/extension_model_repository.md and
// extension_statistics.md. The gRPC RPCs (grpc_repository.h) serve the same rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_control.h"
#include "model_service.h"

namespace furiosa::server {

/// POST /v2/repository/index: [{"name", "version", "state", "reason"}] for each row
/// (ModelRegistry::index()).
std::string repository_index_json(const std::vector<IndexRow>& rows);

/// A duration statistic of Triton's: how many, and their total nanoseconds.
struct StatDuration {
  std::uint64_t count = 0;  ///< how many times it happened
  std::uint64_t ns = 0;     ///< their total duration, nanoseconds (steady clock)
};

/// Triton's InferBatchStatistics: the executions of one batch size (requests in the group).
struct BatchStatisticsRow {
  std::uint64_t batch_size = 0;  ///< requests per execution (1 without dynamic batching)
  /// compute_input and compute_output stay 0 as in inference_stats; compute_infer counts the
  /// executions of this size and their time.
  StatDuration compute_input, compute_infer, compute_output;
};

/// One model version's statistics as Triton's statistics extension reports them (REST and
/// gRPC both render these): see model_stats_json() for what each figure counts.
struct StatisticsRow {
  std::string name;                    ///< the model
  std::string version;                 ///< the served version
  std::int64_t last_inference_ms = 0;  ///< ms since the Unix epoch of the last answer; 0 = none
  std::uint64_t inference_count = 0;   ///< requests executed
  std::uint64_t execution_count = 0;   ///< runtime requests (groups when batching)
  /// Triton's inference_stats; compute_input and compute_output stay 0 (model_stats_json()).
  StatDuration success, fail, queue, compute_input, compute_infer, compute_output;
  /// Triton's batch_stats: one row per batch size executed, ascending; their compute_infer
  /// counts sum to execution_count.
  std::vector<BatchStatisticsRow> batch_stats;
};

/// The statistics of `models`, in their order (each ModelService::stats() read once).
std::vector<StatisticsRow> statistics_rows(const std::vector<const ModelService*>& models);

/// GET /v2/models[/NAME[/versions/V]]/stats: {"model_stats": [...]} with, per model, name,
/// version, last_inference (ms since the epoch), inference_count (requests executed),
/// execution_count (runtime requests: groups when batching) and inference_stats {success,
/// fail, queue, compute_input, compute_infer, compute_output} each {"count", "ns"}. The
/// runtime request's whole time (host stages and device) is compute_infer; compute_input and
/// compute_output stay 0 (the host Quantize/Lower and Unlower/Dequantize stages run inside it).
/// batch_stats: [{batch_size, compute_input, compute_infer, compute_output}], one per batch size
/// executed (requests in the group with dynamic batching, else 1), compute_infer as above.
std::string model_stats_json(const std::vector<const ModelService*>& models);

/// GET /v2/models/NAME[/versions/V]/config: the model's serving configuration as the server
/// applies it: name, platform, versions, device, worker_num, batch_size, max_inflight,
/// max_batch_size (0 without dynamic batching, as Triton), dynamic_batching {max_queue_delay_us,
/// preferred_batch_size}, input and output tensors (name, datatype, dims as a request sees them).
std::string model_config_json(const ModelService& model);

}  // namespace furiosa::server
