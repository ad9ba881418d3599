// Triton's repository and statistics extensions as protobuf (grpc_repository.h).
#include "grpc_repository.h"

#include <cstdint>

namespace furiosa::server {
namespace {

void set(inference::StatisticDuration* out, const StatDuration& d) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

}  // namespace

void fill_repository_index(const std::vector<IndexRow>& rows,
                           inference::RepositoryIndexResponse& response) {
  for (const IndexRow& r : rows) {
    auto* m = response.add_models();
    m->set_name(r.name);
    m->set_version(r.version);
    m->set_state(r.state);
    m->set_reason(r.reason);
  }
}

void fill_model_statistics(const std::vector<StatisticsRow>& rows,
                           inference::ModelStatisticsResponse& response) {
  for (const StatisticsRow& r : rows) {
    auto* m = response.add_model_stats();
    m->set_name(r.name);
    m->set_version(r.version);
    // (A wall clock before 1970 would be negative: reported as none.)
    m->set_last_inference(r.last_inference_ms > 0 ? static_cast<std::uint64_t>(r.last_inference_ms)
                                                  : 0);
    m->set_inference_count(r.inference_count);
    m->set_execution_count(r.execution_count);
    auto* s = m->mutable_inference_stats();
    set(s->mutable_success(), r.success);
    set(s->mutable_fail(), r.fail);
    set(s->mutable_queue(), r.queue);
    set(s->mutable_compute_input(), r.compute_input);
    set(s->mutable_compute_infer(), r.compute_infer);
    set(s->mutable_compute_output(), r.compute_output);
    for (const BatchStatisticsRow& b : r.batch_stats) {
      auto* batch = m->add_batch_stats();
      batch->set_batch_size(b.batch_size);
      set(batch->mutable_compute_input(), b.compute_input);
      set(batch->mutable_compute_infer(), b.compute_infer);
      set(batch->mutable_compute_output(), b.compute_output);
    }
  }
}

std::vector<const ModelService*> statistics_models(
    const ModelRegistry& models, const inference::ModelStatisticsRequest& request) {
  if (request.name().empty()) return models.served();
  return models.versions_of(request.name(), request.version());
}

LoadParameters load_parameters_of(const inference::RepositoryModelLoadRequest& request) {
  LoadParameters out;
  for (const auto& [name, value] : request.parameters()) {
    out[name] = value.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam
                    ? std::optional<std::string>(value.string_param())
                    : std::nullopt;
  }
  return out;
}

UnloadParameters unload_parameters_of(const inference::RepositoryModelUnloadRequest& request) {
  UnloadParameters out;
  for (const auto& [name, value] : request.parameters()) {
    out[name] = value.parameter_choice_case() == inference::ModelRepositoryParameter::kBoolParam
                    ? std::optional<bool>(value.bool_param())
                    : std::nullopt;
  }
  return out;
}

}  // namespace furiosa::server
