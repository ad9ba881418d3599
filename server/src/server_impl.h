// Private: the state of an InferenceServer (server.h) shared by server.cpp (start, shutdown,
// drain) and http_session.cpp (one HTTP connection).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <functional>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp uses std::exchange unincluded
#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "furiosa/server/server.h"
#include "grpc_frontend.h"
#include "model_control.h"
#include "model_service.h"
#include "tls.h"

namespace furiosa::server {

/// The HTTP front end's own series (per connection, not per model).
struct HttpMetrics {
  /// Registers the families. Throws what prometheus-cpp throws for a duplicate name.
  explicit HttpMetrics(prometheus::Registry& registry);
  prometheus::Gauge& connections;  ///< open HTTP connections
  prometheus::Gauge& receiving;    ///< requests whose first bytes arrived, not yet read in full
  prometheus::Gauge& buffered;     ///< bytes of request bodies held (set when scraped)
  /// Requests refused before routing, by reason: malformed (400), timeout (connection closed),
  /// body_too_large (413), header_too_large (431), buffered_bytes (503), unauthorized (401,
  /// --auth-token-file), tls_handshake (a failed TLS handshake: connection closed).
  prometheus::Family<prometheus::Counter>& refused;
};

struct InferenceServer::Impl {
  ServerOptions options;
  std::ostream& log;
  std::atomic<bool> stopping{false};
  /// Requests whose first bytes were received and that are not yet answered (their response
  /// written, or the connection dropped by the client): what a graceful shutdown waits for.
  std::atomic<std::size_t> active_requests{0};
  /// HTTPS connections doing their TLS shutdown (close_notify, kTlsCloseTimeout at most): the
  /// drain waits for them too.
  std::atomic<std::size_t> closing_connections{0};
  /// Idle HTTPS connections by session, each with the function that has it close with
  /// close_notify (posted to its strand). Guarded by idle_mutex; a session is listed from
  /// before its request stops counting in active_requests until its next state (a request, a
  /// TLS shutdown) counts it, so the drain, which waits for this to be empty too, never misses
  /// one in between.
  std::map<const void*, std::function<void()>> idle_tls;
  std::mutex idle_mutex;  ///< guards idle_tls
  /// Bytes of request bodies held across all HTTP connections (options.max_buffered_bytes).
  std::atomic<std::size_t> buffered_bytes{0};
  std::once_flag teardown_once;
  /// --tls-cert/--tls-key as read at construction (nullopt: plain HTTP and gRPC).
  std::optional<TlsFiles> tls_files;
  /// The HTTPS sessions' OpenSSL context (null: plain HTTP). Outlives every session: sessions
  /// are destroyed with the io_context, declared below.
  std::unique_ptr<boost::asio::ssl::context> tls;
  /// The bearer token of --auth-token-file ("": no authentication). Never logged.
  std::string auth_token;

  prometheus::Registry registry;
  ServiceMetrics metrics{registry};
  HttpMetrics http_metrics{registry};
  /// The models and their control (set by the constructor; destroyed after the front ends).
  std::unique_ptr<ModelRegistry> models;
  std::unique_ptr<GrpcFrontend> grpc;
  std::uint16_t grpc_port = 0;

  // Declared last: destroyed first, with any handler still queued, while the above still exist.
  boost::asio::io_context ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  Impl(ServerOptions o, std::ostream& l) : options(std::move(o)), log(l) {}

  void accept();
  /// On the io_context at shutdown: takes the connections the kernel already accepted (the
  /// listen backlog), serves those whose request bytes already arrived, closes the acceptor.
  void stop_accepting();
  /// At shutdown: has every idle HTTPS connection close with close_notify.
  void close_idle_tls();
  /// Stops the io_context once no request is active and no HTTPS connection is closing, or
  /// when the shutdown grace has passed.
  void drain_then_stop(std::chrono::steady_clock::time_point give_up);
  void teardown();
  std::string collect_metrics();
};

/// Serves HTTP/1.1 on `socket` until the connection closes (http_session.cpp). With
/// `request_pending` the connection is counted in active_requests at once, before this returns
/// (bytes of a request are known to have arrived: shutdown must wait for it).
void start_http_session(boost::asio::ip::tcp::socket socket, InferenceServer::Impl* server,
                        bool request_pending);

}  // namespace furiosa::server
