// Private: the parts of an HTTP connection that do not depend on its stream (http_session.cpp's
// Session template is instantiated for plain and TLS streams; these are compiled once): the
// connection's share of the server-wide counters, the status of a serving outcome, the
// target's path segments, the server metadata body and the repository index request's body.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <utility>  // before Boost.Asio 1.74 (awaitable.hpp uses std::exchange)
#include <boost/beast/http/status.hpp>

#include "serve_error.h"
#include "server_impl.h"

namespace furiosa::server {

/// One HTTP connection's share of the server-wide figures (InferenceServer::Impl): the open
/// connections gauge, the request counted in active_requests, the receiving gauge, the body
/// bytes reserved in buffered_bytes and the TLS close counted in closing_connections; whatever
/// is still held is given back by the destructor. Thread-compatible: used on the connection's
/// strand. The server must outlive it.
class ConnectionAccounting {
 public:
  /// Counts an open connection of `server`.
  explicit ConnectionAccounting(InferenceServer::Impl* server);
  /// Gives back whatever the connection still holds, and its open-connection count.
  ~ConnectionAccounting();
  ConnectionAccounting(const ConnectionAccounting&) = delete;
  ConnectionAccounting& operator=(const ConnectionAccounting&) = delete;

 protected:
  /// Counts the connection's request in active_requests (once).
  void count_request();
  /// Releases the request's body bytes and its active_requests count.
  void uncount_request();
  /// Takes `n` more bytes of the server-wide budget of request bytes held (max_buffered_bytes)
  /// for this request's body, until it has been routed; false (nothing taken) when that would
  /// pass the budget.
  bool reserve_body_bytes(std::uint64_t n);
  /// Gives back the bytes reserve_body_bytes() took.
  void release_body_bytes();
  /// Counts the request in the receiving gauge (`on`) or not.
  void set_receiving(bool on);
  /// Counts the connection in closing_connections (once).
  void count_closing();
  /// Its closing_connections count, given back.
  void uncount_closing();

  InferenceServer::Impl* server_;  ///< borrowed; outlives the connection

 private:
  bool counted_ = false;        ///< counted in active_requests
  bool receiving_ = false;      ///< counted in http_metrics.receiving
  bool close_counted_ = false;  ///< counted in closing_connections
  std::uint64_t reserved_ = 0;  ///< bytes of this request in server_->buffered_bytes
};

/// The HTTP status of a serving outcome (serve_error.h's table).
boost::beast::http::status http_status(ServeStatus status);

/// Splits a request target's path into its segments ("/v2/models/m/infer?x" -> v2, models, m,
/// infer); empty segments and the query are dropped.
std::vector<std::string> path_segments(std::string_view target);

/// Whether a request may go on: no `token` configured, a health probe (open, for load balancers
/// and Kubernetes probes), or the `authorization` header "Bearer TOKEN" (auth.h).
bool request_authorized(const std::string& token, std::string_view target,
                        std::string_view authorization);

/// The Inference-Header-Content-Length header's byte count (binary tensor data extension).
/// Throws Error(InvalidInput) when it is not one.
std::size_t inference_header_length(std::string_view value);

/// GET /v2: the server metadata (name, version, extensions).
std::string server_metadata_json();

/// The repository index request's {"ready": true} (an empty body or {} lists every model).
/// Throws Error(InvalidInput) for another body.
bool index_ready_only(const std::string& body);

}  // namespace furiosa::server
