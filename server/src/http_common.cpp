// The stream-independent parts of an HTTP connection (http_common.h).
#include "http_common.h"

#include <nlohmann/json.hpp>

#include <charconv>

#include "auth.h"
#include "bounded_json.h"
#include "furiosa/core/error.h"

namespace furiosa::server {

namespace http = boost::beast::http;

ConnectionAccounting::ConnectionAccounting(InferenceServer::Impl* server) : server_(server) {
  server_->http_metrics.connections.Increment();
}

ConnectionAccounting::~ConnectionAccounting() {
  uncount_closing();
  set_receiving(false);
  uncount_request();
  server_->http_metrics.connections.Decrement();
}

void ConnectionAccounting::count_request() {
  if (counted_) return;
  counted_ = true;
  server_->active_requests.fetch_add(1);
}

void ConnectionAccounting::uncount_request() {
  release_body_bytes();
  if (!counted_) return;
  counted_ = false;
  server_->active_requests.fetch_sub(1);
}

bool ConnectionAccounting::reserve_body_bytes(std::uint64_t n) {
  const std::size_t cap = server_->options.max_buffered_bytes;
  std::size_t held = server_->buffered_bytes.load();
  do {
    if (n > cap || held > cap - n) return false;
  } while (!server_->buffered_bytes.compare_exchange_weak(held, held + n));
  reserved_ += n;
  return true;
}

void ConnectionAccounting::release_body_bytes() {
  if (reserved_ == 0) return;
  server_->buffered_bytes.fetch_sub(reserved_);
  reserved_ = 0;
}

void ConnectionAccounting::set_receiving(bool on) {
  if (on == receiving_) return;
  receiving_ = on;
  if (on) server_->http_metrics.receiving.Increment();
  else server_->http_metrics.receiving.Decrement();
}

void ConnectionAccounting::count_closing() {
  if (close_counted_) return;
  close_counted_ = true;
  server_->closing_connections.fetch_add(1);
}

void ConnectionAccounting::uncount_closing() {
  if (!close_counted_) return;
  close_counted_ = false;
  server_->closing_connections.fetch_sub(1);
}

http::status http_status(ServeStatus status) {
  switch (status) {
    case ServeStatus::Ok: return http::status::ok;
    case ServeStatus::InvalidArgument: return http::status::bad_request;
    case ServeStatus::NotFound: return http::status::not_found;
    case ServeStatus::ResourceExhausted: return http::status::too_many_requests;
    case ServeStatus::Unavailable: return http::status::service_unavailable;
    case ServeStatus::DeadlineExceeded: return http::status::gateway_timeout;
    case ServeStatus::Internal: return http::status::internal_server_error;
  }
  return http::status::internal_server_error;
}

std::vector<std::string> path_segments(std::string_view target) {
  if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < target.size()) {
    std::size_t j = target.find('/', i);
    if (j == std::string_view::npos) j = target.size();
    if (j > i) out.emplace_back(target.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool request_authorized(const std::string& token, std::string_view target,
                        std::string_view authorization) {
  if (token.empty()) return true;
  const auto path = path_segments(target);
  if (path.size() == 3 && path[0] == "v2" && path[1] == "health" &&
      (path[2] == "live" || path[2] == "ready"))
    return true;
  return bearer_matches(authorization, token);
}

std::size_t inference_header_length(std::string_view value) {
  std::size_t n = 0;
  auto [p, err] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (err != std::errc() || p != value.data() + value.size())
    throw Error(ErrorCode::InvalidInput, "Inference-Header-Content-Length is not a byte count");
  return n;
}

std::string server_metadata_json() {
  return R"({"name":"furiosa-serve","version":"0.1.0","extensions":["binary_tensor_data","model_repository","statistics","model_configuration"]})";
}

bool index_ready_only(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return false;
  nlohmann::json j;
  if (parse_bounded_json(body, j) != JsonParse::Ok || !j.is_object()) {
    throw Error(ErrorCode::InvalidInput, "the repository index request must be a JSON object");
  }
  const auto ready = j.find("ready");
  if (ready == j.end()) return false;
  if (!ready->is_boolean()) throw Error(ErrorCode::InvalidInput, "\"ready\" must be true or false");
  return ready->get<bool>();
}

}  // namespace furiosa::server
