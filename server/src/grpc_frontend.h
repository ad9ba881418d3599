// furiosa-serve's gRPC front end: inference.GRPCInferenceService (server/proto/grpc_predict_v2.proto,
// the KServe proto with Triton's repository and statistics RPCs) on grpc++'s callback API, in
// front of the same ModelServices as HTTP.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "model_control.h"
#include "model_service.h"
#include "tls.h"

namespace furiosa::server {

/// The gRPC server. ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata and
/// ModelInfer (typed `contents` or `raw_input_contents`; outputs come back raw when the inputs
/// were raw, else typed), RepositoryModelLoad/Unload (ModelRegistry::load/unload: answered when
/// done; a load's parameters as load_parameters.h), and Triton's RepositoryIndex and
/// ModelStatistics (grpc_repository.h: the REST endpoints' figures). No thread is held
/// per request: an inference's answer is sent from the model's completion. With a bearer token
/// every call but ServerLive and ServerReady (probes) must carry the metadata "authorization:
/// Bearer TOKEN", else UNAUTHENTICATED. Thread-safe.
class GrpcFrontend {
 public:
  /// `models`, `stopping` and `auth_token` are borrowed and must outlive the front end; once
  /// `stopping` is true, inference, readiness and control calls are answered UNAVAILABLE.
  /// `auth_token` "": no authentication.
  GrpcFrontend(ModelRegistry& models, const std::atomic<bool>& stopping,
               const std::string& auth_token);
  /// shutdown(now).
  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  /// Listens on host:port (0 = any free port), over TLS with `tls` (grpc::SslServerCredentials;
  /// clients need not present a certificate), and starts serving. Returns the bound port.
  /// Throws Error(InvalidArgument) naming the address when it cannot listen there.
  std::uint16_t start(const std::string& host, std::uint16_t port,
                      const std::optional<TlsFiles>& tls);
  /// Stops accepting calls and waits until every call in progress is answered or `deadline`
  /// passes (then they are cancelled). Blocks; idempotent.
  void shutdown(Clock::time_point deadline);

  /// The grpc++ service and server (grpc_frontend.cpp), kept out of this header.
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace furiosa::server
