// Private: Triton's model repository and statistics extensions over gRPC (RepositoryIndex,
// ModelStatistics, RepositoryModelLoad's parameters): protobuf from the same rows the REST
// endpoints render (ModelRegistry::index(), statistics_rows() in introspection.h).
#pragma once

#include <string>
#include <vector>

#include "grpc_predict_v2.pb.h"
#include "introspection.h"
#include "load_parameters.h"
#include "model_control.h"

namespace furiosa::server {

/// RepositoryIndexResponse of `rows` (ModelRegistry::index()), one ModelIndex per row.
void fill_repository_index(const std::vector<IndexRow>& rows,
                           inference::RepositoryIndexResponse& response);

/// ModelStatisticsResponse of `rows` (statistics_rows()), one ModelStatistics per row, with
/// inference_stats and batch_stats as GET .../stats has them.
void fill_model_statistics(const std::vector<StatisticsRow>& rows,
                           inference::ModelStatisticsResponse& response);

/// The models a ModelStatisticsRequest asks for: every served version when `name` is "", else
/// ModelRegistry::versions_of(name, version) (which throws ServeError(NotFound) for an unknown
/// model or version, ServeError(Unavailable) for one not loaded).
std::vector<const ModelService*> statistics_models(const ModelRegistry& models,
                                                   const inference::ModelStatisticsRequest& request);

/// The load parameters of a RepositoryModelLoadRequest: a string_param as its text, any other
/// kind as "not a string" (config_of_load_parameters() refuses it by name).
LoadParameters load_parameters_of(const inference::RepositoryModelLoadRequest& request);

/// The unload parameters of a RepositoryModelUnloadRequest: a bool_param as its value, any other
/// kind as "not a bool" (check_unload_parameters() refuses it by name).
UnloadParameters unload_parameters_of(const inference::RepositoryModelUnloadRequest& request);

/// The model a load or unload request names: Triton's model_name (our triton_model_name,
/// field 2) when set, else KServe's model_name (field 1).
template <class Request>
const std::string& requested_model(const Request& request) {
  return request.triton_model_name().empty() ? request.model_name() : request.triton_model_name();
}

}  // namespace furiosa::server
