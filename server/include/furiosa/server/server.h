// furiosa-serve's inference server: the Open Inference Protocol (KServe v2) over HTTP/REST
// (Boost.Beast on Boost.Asio) in front of one runtime Runner per model, with Prometheus metrics.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "furiosa/server/model_repository.h"

namespace furiosa::server {

/// How models are loaded (furiosa-serve --model-control-mode, Triton's modes): None loads every
/// model of the repository at start and refuses load/unload requests; Explicit loads
/// ServerOptions::load_models at start, then loads and unloads models on request (POST
/// /v2/repository/models/NAME/load|unload); Poll loads every model at start, then rescans the
/// repository every ServerOptions::repository_poll_s seconds (new models loaded, removed ones
/// unloaded, changed ones reloaded) and refuses load/unload requests, as Triton does.
enum class ModelControlMode { None, Explicit, Poll };

/// Options of an InferenceServer (furiosa-serve's command line).
struct ServerOptions {
  std::filesystem::path model_repository;  ///< MODEL_NAME/VERSION/model.* (model_repository.h)
  ModelControlMode model_control_mode = ModelControlMode::None;  ///< see ModelControlMode
  /// Explicit mode: the models loaded at start ("*": every model); each must exist.
  std::vector<std::string> load_models;
  /// Poll mode: seconds between two rescans of the repository (> 0; Triton's default 15).
  double repository_poll_s = 15;
  /// Address to listen on: loopback unless told otherwise (deploy/ files pass 0.0.0.0): without
  /// auth_token_file anyone who reaches the port may use the server.
  std::string host = "127.0.0.1";
  /// TLS (HTTPS and gRPC over TLS) with this PEM certificate chain and PEM private key: both
  /// or neither (empty: plain HTTP and gRPC). Read once, by the constructor.
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;  ///< see tls_cert
  /// Mutual TLS (needs tls_cert): PEM CA certificate(s); both transports then require every
  /// client, health probes included, to present a certificate signed by one of them (empty:
  /// no client certificate asked for). Read once, by the constructor.
  std::filesystem::path tls_client_ca;
  /// A file holding the bearer token every request but health must carry (docs/serving.md
  /// "Security"); empty: no authentication. Read once, by the constructor.
  std::filesystem::path auth_token_file;
  std::uint16_t http_port = 8000;          ///< 0 = any free port (see http_port())
  std::uint16_t grpc_port = 8001;          ///< 0 = any free port (see grpc_port())
  bool grpc = true;                        ///< serve gRPC (inference.GRPCInferenceService) too
  /// How long shutdown waits for requests in progress (HTTP requests being received or
  /// answered, gRPC calls) before dropping or cancelling them (seconds).
  double shutdown_grace_s = 60;
  int http_threads = 2;                    ///< threads running the HTTP connections (>= 1)
  /// Limits of one HTTP request (docs/serving.md "Limits"): larger bodies are answered 413 as
  /// soon as their Content-Length or a chunk passes the limit, before the body is read; a
  /// request line plus header fields larger than max_header_bytes are answered 431.
  std::size_t max_body_bytes = 256u << 20;
  std::size_t max_header_bytes = 16u << 10;
  /// Bytes of request bodies held at once across all HTTP connections: a body that would pass
  /// it is answered 503 before it is read (counted when its Content-Length, or each chunk's
  /// size, arrives; released once the request has been decoded).
  std::size_t max_buffered_bytes = std::size_t{1} << 30;
  /// Timeouts of an HTTP connection (seconds): waiting for the next request of a keep-alive
  /// connection (then closed), from a request's first byte to the end of its header section,
  /// and for the rest of the request (body) or the writing of a response. A request that times
  /// out is not answered: its connection is closed (slow-header and slow-body clients).
  double idle_timeout_s = 60;
  double header_timeout_s = 30;
  double body_timeout_s = 300;
};

/// The server: HTTP/REST and gRPC (server/proto/grpc_predict_v2.proto) front ends over one
/// transport-independent core per model (queue, admission, deadlines, dynamic batching, metrics).
/// HTTP routes (required_api.md "HTTP/REST"):
///   GET  /v2/health/live, /v2/health/ready                 200 or 400/503
///   GET  /v2                                               server metadata
///   GET  /v2/models/NAME[/versions/V][/ready]              model metadata / readiness
///   POST /v2/models/NAME[/versions/V]/infer                inference (JSON or binary extension)
///   GET  /metrics                                          Prometheus text format
///   POST /v2/repository/index, /v2/repository/models/NAME/load|unload  model control
///   GET  /v2/models[/NAME[/versions/V]]/stats, /v2/models/NAME[/versions/V]/config
/// Inference answers: 200, 400 (bad request; the message names the tensor), 404 (unknown model
/// or version), 429 (max_inflight requests of that model already admitted: rejected at once),
/// 500 (the request's device or runtime error), 503 (shutting down), 504 (the request's deadline,
/// parameters.timeout_us, passed before it was submitted; or DeviceTimeout). gRPC answers the same
/// cases INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE and
/// DEADLINE_EXCEEDED (the client's deadline). Every request gets exactly one answer. With
/// auth_token_file, a request without the bearer token is answered 401 / UNAUTHENTICATED before
/// any of these (health probes excepted); with tls_cert both transports speak TLS only.
///
/// Thread-safety: start(), wait() and shutdown() may be called from any thread; shutdown() is
/// idempotent. The destructor shuts down and waits.
class InferenceServer {
 public:
  /// Scans the repository and loads every model (compile + device open), or with
  /// ModelControlMode::Explicit those of options.load_models, printing one line per model
  /// version to `log`. Throws the runtime's errors (ModelLoadFailed, DeviceBusy, ...) naming the
  /// model, and InvalidArgument for a bad repository or option (one line naming the flag or
  /// file: tls_cert without tls_key, tls_client_ca without them, an unreadable or invalid
  /// certificate, key, client CA or token file).
  InferenceServer(ServerOptions options, std::ostream& log);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  /// Binds and listens, starts the HTTP threads and the gRPC server and prints "HTTP: ADDR:PORT"
  /// and "gRPC: ADDR:PORT" to the log. Throws Error(InvalidArgument) naming the address when it
  /// cannot listen there.
  void start();
  /// The bound HTTP port (after start()).
  std::uint16_t http_port() const;
  /// The bound gRPC port (after start(); 0 when gRPC is off).
  std::uint16_t grpc_port() const;
  /// Graceful shutdown: stops accepting connections, answers requests already received
  /// (in-flight inferences complete), then stops the threads. Returns at once; wait() blocks
  /// until done. Idempotent; safe from any thread (not from a signal handler: furiosa-serve
  /// waits for SIGTERM with sigwait on its main thread and calls it there).
  void shutdown();
  /// Blocks until the server has shut down (after shutdown(); or at once when never started):
  /// waits for gRPC calls in progress (at most shutdown_grace_s), joins the HTTP threads and
  /// drains every model's queue.
  void wait();

  /// The model versions served now (one entry per version), in name then version order.
  std::vector<ModelEntry> models() const;
  /// ModelControlMode::Poll: rescans the repository now, as the poll thread does every
  /// repository_poll_s seconds, and returns once the loads and unloads it started are done
  /// (for tests: no waiting on the timer). Throws Error(InvalidArgument) in another mode.
  void rescan_repository();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace furiosa::server
