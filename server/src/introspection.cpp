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

std::vector<StatisticsRow> statistics_rows(const std::vector<const ModelService*>& models) {
  std::vector<StatisticsRow> rows;
  rows.reserve(models.size());
  for (const ModelService* m : models) {
    const ModelStats s = m->stats();
    StatisticsRow r;
    r.name = m->entry().name;
    r.version = m->entry().version;
    r.last_inference_ms = s.last_inference_ms;
    r.inference_count = s.inference_count;
    r.execution_count = s.execution_count;
    r.success = {s.success_count, s.success_ns};
    r.fail = {s.fail_count, s.fail_ns};
    r.queue = {s.queue_count, s.queue_ns};
    // The runtime request's whole time (host stages and device) is compute_infer.
    r.compute_infer = {s.execution_count, s.compute_ns};
    for (const ModelStats::BatchSize& b : s.batch_stats) {
      BatchStatisticsRow row;
      row.batch_size = b.batch_size;
      row.compute_infer = {b.count, b.ns};
      r.batch_stats.push_back(row);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string model_stats_json(const std::vector<const ModelService*>& models) {
  json list = json::array();
  auto stat = [](const StatDuration& d) { return json{{"count", d.count}, {"ns", d.ns}}; };
  for (const StatisticsRow& r : statistics_rows(models)) {
    json batches = json::array();
    for (const BatchStatisticsRow& b : r.batch_stats) {
      batches.push_back({{"batch_size", b.batch_size},
                         {"compute_input", stat(b.compute_input)},
                         {"compute_infer", stat(b.compute_infer)},
                         {"compute_output", stat(b.compute_output)}});
    }
    list.push_back({{"name", r.name},
                    {"version", r.version},
                    {"last_inference", r.last_inference_ms},
                    {"inference_count", r.inference_count},
                    {"execution_count", r.execution_count},
                    {"inference_stats",
                     {{"success", stat(r.success)},
                      {"fail", stat(r.fail)},
                      {"queue", stat(r.queue)},
                      {"compute_input", stat(r.compute_input)},
                      {"compute_infer", stat(r.compute_infer)},
                      {"compute_output", stat(r.compute_output)}}},
                    {"batch_stats", std::move(batches)}});
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
