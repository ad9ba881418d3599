// Triton's introspection extensions as JSON (introspection.h).
#include "introspection.h"

#include <nlohmann/json.hpp>

#include "furiosa/server/v2_protocol.h"

namespace furiosa::server {

using nlohmann::json;

std::string repository_index_json(const std::vector<IndexRow>& rows) {
  json out = json::array();
  for (const IndexRow& r : rows) {
    out.push_back(
        {{"name", r.name}, {"version", r.version}, {"state", r.state}, {"reason", r.reason}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string model_stats_json(const std::vector<const ModelService*>& models) {
  json list = json::array();
  for (const ModelService* m : models) {
    const ModelStats s = m->stats();
    auto stat = [](std::uint64_t count, std::uint64_t ns) {
      return json{{"count", count}, {"ns", ns}};
    };
    list.push_back({{"name", m->entry().name},
                    {"version", m->entry().version},
                    {"last_inference", s.last_inference_ms},
                    {"inference_count", s.inference_count},
                    {"execution_count", s.execution_count},
                    {"inference_stats",
                     {{"success", stat(s.success_count, s.success_ns)},
                      {"fail", stat(s.fail_count, s.fail_ns)},
                      {"queue", stat(s.queue_count, s.queue_ns)},
                      {"compute_input", stat(0, 0)},
                      {"compute_infer", stat(s.execution_count, s.compute_ns)},
                      {"compute_output", stat(0, 0)}}}});
  }
  return json{{"model_stats", std::move(list)}}.dump(-1, ' ', false,
                                                     json::error_handler_t::replace);
}

std::string model_config_json(const ModelService& model) {
  const ModelEntry& e = model.entry();
  const ModelConfig& c = e.config;
  auto tensors = [](const std::vector<runtime::TensorDesc>& descs) {
    json out = json::array();
    for (const auto& d : descs)
      out.push_back({{"name", d.name}, {"datatype", v2_datatype(d.dtype)}, {"dims", d.shape}});
    return out;
  };
  json out = {{"name", e.name},
              {"platform", e.platform},
              {"versions", e.versions},
              {"device", c.device.empty() ? "default" : c.device},
              {"worker_num", c.worker_num},
              {"batch_size", c.batch_size},
              {"max_inflight", c.max_inflight},
              {"max_batch_size", c.dynamic_batching ? c.dynamic_batching->max_batch_size : 0},
              {"input", tensors(model.model().inputs)},
              {"output", tensors(model.model().outputs)}};
  if (c.dynamic_batching) {
    out["dynamic_batching"] = {{"max_queue_delay_us", c.dynamic_batching->max_queue_delay.count()},
                               {"preferred_batch_size", batch_ladder(*c.dynamic_batching)}};
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace furiosa::server
