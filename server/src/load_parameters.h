// Private: the parameters of a load request (Triton's model repository extension: the REST
// load body {"parameters": {...}} and gRPC RepositoryModelLoadRequest.parameters). furiosa-serve
// takes one, "config": a JSON model configuration (config.json's keys) that replaces the model
// folder's config.json for that load. Triton's "file:..." parameters (model files sent with the
// request) are refused, as is any other name. An unload request's parameters (the REST unload
// body, RepositoryModelUnloadRequest.parameters) are checked here too: Triton's
// "unload_dependents" (a bool) is accepted and has no effect, any other is refused.
// docs/serving.md "Model control".
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "furiosa/server/model_repository.h"

namespace furiosa::server {

/// The longest "config" parameter accepted (config.json files are a few hundred bytes).
inline constexpr std::size_t kMaxConfigParameterBytes = 1 << 20;

/// A load request's parameters: name -> its value when it is a string, nullopt when the
/// request gave another type (bool, number, bytes, object...).
using LoadParameters = std::map<std::string, std::optional<std::string>>;

/// The parameters of a REST load body: "" (or only whitespace) and {} have none, else the body
/// must be a JSON object whose only key is "parameters", an object. Parsed with the bounded
/// parser (bounded_json.h). Throws ServeError(InvalidArgument) with one line saying what is
/// wrong.
LoadParameters load_parameters_of_json(std::string_view body);

/// The configuration a load's parameters ask for: nullopt without "config" (the folder's
/// config.json applies), else the parsed "config" (parse_model_config()). Throws
/// ServeError(InvalidArgument), one line, naming the parameter: a "file:" parameter (not
/// supported), another unknown name, a "config" that is not a string, longer than
/// kMaxConfigParameterBytes or not a valid configuration (what is wrong, as for config.json).
/// Thread-safe.
std::optional<ModelConfig> config_of_load_parameters(const LoadParameters& parameters);

/// An unload request's parameters: name -> its value when it is a bool, nullopt when the
/// request gave another type.
using UnloadParameters = std::map<std::string, std::optional<bool>>;

/// The parameters of a REST unload body, read as load_parameters_of_json() reads a load body
/// (its errors say "unload request"). Throws ServeError(InvalidArgument), one line.
UnloadParameters unload_parameters_of_json(std::string_view body);

/// Checks an unload's parameters: Triton's "unload_dependents" (true or false) is accepted and
/// changes nothing (the server has no ensembles, so a model has no dependents); any other name,
/// or "unload_dependents" that is not a bool, throws ServeError(InvalidArgument), one line,
/// naming the parameter (escaped). Thread-safe.
void check_unload_parameters(const UnloadParameters& parameters);

}  // namespace furiosa::server
