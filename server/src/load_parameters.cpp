// Load request parameters (load_parameters.h).
#include "load_parameters.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bounded_json.h"
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "serve_error.h"

namespace furiosa::server {

namespace {

/// The "parameters" object of a load or unload request body (`what`: "load" or "unload");
/// null when the body is blank, {} or has no "parameters".
nlohmann::json parameters_of_body(std::string_view body, const char* what) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return nullptr;
  nlohmann::json j;
  const JsonParse parsed = parse_bounded_json(body, j);
  if (parsed == JsonParse::TooDeep) {
    throw ServeError(
        ServeStatus::InvalidArgument,
        fmt::format("the {} request is nested deeper than {} levels", what, kMaxJsonDepth));
  }
  if (parsed != JsonParse::Ok || !j.is_object()) {
    throw ServeError(ServeStatus::InvalidArgument,
                     fmt::format("the {} request must be a JSON object", what));
  }
  nlohmann::json parameters;
  for (const auto& [key, value] : j.items()) {
    if (key != "parameters") {
      throw ServeError(ServeStatus::InvalidArgument,
                       fmt::format("unknown key \"{}\" in the {} request (known: parameters)",
                                   escape_text(key), what));
    }
    if (!value.is_object())
      throw ServeError(ServeStatus::InvalidArgument, "\"parameters\" must be a JSON object");
    parameters = value;
  }
  return parameters;
}

}  // namespace

LoadParameters load_parameters_of_json(std::string_view body) {
  LoadParameters out;
  const nlohmann::json parameters = parameters_of_body(body, "load");
  if (parameters.is_null()) return out;
  for (const auto& [name, v] : parameters.items()) {
    out[name] = v.is_string() ? std::optional<std::string>(v.get<std::string>()) : std::nullopt;
  }
  return out;
}

UnloadParameters unload_parameters_of_json(std::string_view body) {
  UnloadParameters out;
  const nlohmann::json parameters = parameters_of_body(body, "unload");
  if (parameters.is_null()) return out;
  for (const auto& [name, v] : parameters.items()) {
    out[name] = v.is_boolean() ? std::optional<bool>(v.get<bool>()) : std::nullopt;
  }
  return out;
}

void check_unload_parameters(const UnloadParameters& parameters) {
  for (const auto& [name, value] : parameters) {
    if (name != "unload_dependents") {
      throw ServeError(ServeStatus::InvalidArgument,
                       fmt::format("unknown unload parameter '{}' (known: unload_dependents)",
                                   escape_text(name)));
    }
    if (!value) {
      throw ServeError(ServeStatus::InvalidArgument,
                       "unload parameter 'unload_dependents' must be true or false");
    }
  }
}

std::optional<ModelConfig> config_of_load_parameters(const LoadParameters& parameters) {
  std::optional<ModelConfig> config;
  for (const auto& [name, value] : parameters) {
    if (name.rfind("file:", 0) == 0) {
      throw ServeError(
          ServeStatus::InvalidArgument,
          fmt::format("load parameter '{}': model files sent with the load request (Triton's "
                      "\"file:\" parameters) are not supported; put the model in the repository",
                      escape_text(name)));
    }
    if (name != "config") {
      throw ServeError(ServeStatus::InvalidArgument,
                       fmt::format("unknown load parameter '{}' (known: config)", escape_text(name)));
    }
    if (!value) {
      throw ServeError(ServeStatus::InvalidArgument,
                       "load parameter 'config' must be a string holding a JSON model configuration");
    }
    if (value->size() > kMaxConfigParameterBytes) {
      throw ServeError(ServeStatus::InvalidArgument,
                       fmt::format("load parameter 'config' is longer than {} bytes",
                                   kMaxConfigParameterBytes));
    }
    try {
      config = parse_model_config(*value, "load parameter 'config'");
    } catch (const Error& e) {
      throw ServeError(ServeStatus::InvalidArgument, one_line(e.message()));
    }
  }
  return config;
}

}  // namespace furiosa::server
