// parse_bounded_json (bounded_json.h): nlohmann::json's parser callback sees every array and
// object as it opens, with its depth, and stops the parse at the first one past the limit.
#include "bounded_json.h"

namespace furiosa::server {

namespace {
struct TooDeepSignal {};
struct TooManyValuesSignal {};
}  // namespace

JsonParse parse_bounded_json(std::string_view text, nlohmann::json& out, std::size_t max_values) {
  using json = nlohmann::json;
  std::size_t values = 0;
  // `depth` is the number of arrays and objects already open around the event (0 for the
  // outermost value), so the value opening at depth d is at level d + 1.
  const json::parser_callback_t limit = [&values, max_values](int depth, json::parse_event_t event,
                                                              json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw TooDeepSignal{};
    }
    if ((event == json::parse_event_t::value || event == json::parse_event_t::key) &&
        ++values > max_values) {
      throw TooManyValuesSignal{};
    }
    return true;
  };
  try {
    out = json::parse(text, limit, /*allow_exceptions=*/false);
  } catch (const TooDeepSignal&) {
    out = json();
    return JsonParse::TooDeep;
  } catch (const TooManyValuesSignal&) {
    out = json();
    return JsonParse::TooManyValues;
  }
  return out.is_discarded() ? JsonParse::Malformed : JsonParse::Ok;
}

}  // namespace furiosa::server
