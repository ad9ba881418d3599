// Private: JSON from untrusted bytes (request bodies, config.json) parsed with a nesting limit.
// nlohmann::json's parser is iterative, but a document nested 100,000 levels deep still costs a
// stack frame per level in every recursive walk over the result (and a node per level in memory),
// so nesting past kMaxJsonDepth is refused while parsing, before such a tree exists.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string_view>

namespace furiosa::server {

/// Deepest nesting of arrays and objects accepted in a request body or config.json: the
/// outermost value is level 1. An inference request needs 3 levels around its tensor data
/// ({"inputs": [{"data": ...}]}) plus one per dimension of nested "data"; 64 leaves room for
/// any tensor rank the runtime has. Documented in docs/serving.md ("Limits").
inline constexpr int kMaxJsonDepth = 64;

/// Scalars and keys an inference request's JSON may hold beyond its tensors' elements (ids,
/// names, datatypes, shapes, parameters, requested outputs). Documented in docs/serving.md
/// ("Limits").
inline constexpr std::size_t kMaxJsonRequestOverhead = 65536;

/// The outcome of parse_bounded_json.
enum class JsonParse {
  Ok,             ///< `out` holds the document
  Malformed,      ///< not JSON (syntax error, truncated)
  TooDeep,        ///< nested deeper than kMaxJsonDepth; nothing deeper was built
  TooManyValues,  ///< more than the caller's max_values scalars and keys; no more were built
};

/// Parses `text` into `out`, refusing (TooDeep) arrays or objects nested more than
/// kMaxJsonDepth levels deep as soon as the parser opens the first one too many, and
/// (TooManyValues) a document of more than `max_values` scalars and object keys as soon as the
/// parser reads one too many: each costs a tree node of 16 bytes or more, about 8x the 2 bytes of
/// "0," it may take in the text, so a 250 MiB body of numbers would need gigabytes (4.4 GB was
/// measured before this bound). Never throws for bad input (allocation failure aside).
/// Thread-safe (no shared state).
JsonParse parse_bounded_json(std::string_view text, nlohmann::json& out,
                             std::size_t max_values = static_cast<std::size_t>(-1));

}  // namespace furiosa::server
