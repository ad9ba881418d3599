// GrpcFrontend (grpc_frontend.h): the KServe v2 gRPC service and its protobuf <-> tensor codec.
#include "grpc_frontend.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <limits>
#include <functional>
#include <mutex>
#include <optional>
#include <set>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/server/grpc_codec.h"
#include "furiosa/server/v2_protocol.h"
#include "auth.h"
#include "grpc_repository.h"
#include "grpc_predict_v2.grpc.pb.h"

namespace furiosa::server {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

/// The gRPC code of a serving outcome (serve_error.h's table).
grpc::StatusCode grpc_code(ServeStatus status) {
  switch (status) {
    case ServeStatus::Ok: return grpc::StatusCode::OK;
    case ServeStatus::InvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ServeStatus::NotFound: return grpc::StatusCode::NOT_FOUND;
    case ServeStatus::ResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ServeStatus::Unavailable: return grpc::StatusCode::UNAVAILABLE;
    case ServeStatus::DeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ServeStatus::Internal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status status_for(const std::exception& e) { return {grpc_code(status_of(e)), e.what()}; }

/// The client's deadline on the serving clock; nullopt when it has none (or one years away).
Deadline deadline_of(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  const auto now = std::chrono::system_clock::now();
  if (deadline >= now + std::chrono::hours(24 * 365)) return std::nullopt;
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(deadline - now);
}

class Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  Service(ModelRegistry& models, const std::atomic<bool>& stopping, const std::string& token)
      : models_(models), stopping_(stopping), token_(token) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context, const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    response->set_ready(!stopping_.load());
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context, const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    if (!authorized(context)) return done(context, unauthenticated());
    try {
      const ModelLease model = models_.find(request->name(), request->version());
      response->set_ready(!stopping_.load());
    } catch (const std::exception& e) {
      if (status_of(e) != ServeStatus::Unavailable) return done(context, status_for(e));
      response->set_ready(false);  // known, not loaded
    }
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    if (!authorized(context)) return done(context, unauthenticated());
    response->set_name("furiosa-serve");
    response->set_version("0.1.0");
    for (const char* e :
         {"binary_tensor_data", "model_repository", "statistics", "model_configuration"})
      response->add_extensions(e);
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    if (!authorized(context)) return done(context, unauthenticated());
    std::optional<ModelLease> model;
    try {
      model.emplace(models_.find(request->name(), request->version()));
    } catch (const std::exception& e) {
      return done(context, status_for(e));
    }
    const auto& entry = (*model)->entry();
    response->set_name(entry.name);
    for (const auto& v : entry.versions) response->add_versions(v);
    response->set_platform(entry.platform);
    auto add = [](const std::vector<runtime::TensorDesc>& descs, auto* field) {
      for (const auto& d : descs) {
        auto* t = field->Add();
        t->set_name(d.name);
        t->set_datatype(std::string(v2_datatype(d.dtype)));
        for (auto x : d.shape) t->add_shape(x);
      }
    };
    add((*model)->model().inputs, response->mutable_inputs());
    add((*model)->model().outputs, response->mutable_outputs());
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context, const ModelInferRequest* request,
                                       ModelInferResponse* response) override {
    if (!authorized(context)) return done(context, unauthenticated());
    auto* reactor = context->DefaultReactor();
    if (stopping_.load()) {
      reactor->Finish(shutting_down());
      return reactor;
    }
    std::optional<ModelLease> lease;  // held until infer() returns
    try {
      lease.emplace(models_.find(request->model_name(), request->model_version()));
    } catch (const std::exception& e) {
      reactor->Finish(status_for(e));
      return reactor;
    }
    ModelService* model = &**lease;
    std::vector<Tensor> inputs;
    std::vector<std::size_t> chosen;
    try {
      inputs = decode_grpc_inputs(*request, model->model().inputs);
      chosen = chosen_grpc_outputs(*request, model->model().outputs);
    } catch (const std::exception& e) {
      model->count_failure(status_of(e));
      reactor->Finish(status_for(e));
      return reactor;
    }
    const bool raw = request->raw_input_contents_size() > 0;
    response->set_model_name(model->entry().name);
    response->set_model_version(model->entry().version);
    response->set_id(request->id());
    try {
      model->infer(std::move(inputs), deadline_of(*context),
                   [reactor, response, model, chosen = std::move(chosen), raw](std::vector<Tensor> outputs,
                                                                               std::exception_ptr error) {
                     try {
                       if (error) std::rethrow_exception(error);
                       encode_grpc_outputs(model->model().outputs, chosen, raw, outputs, *response);
                       reactor->Finish(grpc::Status::OK);
                     } catch (const std::exception& e) {
                       reactor->Finish(status_for(e));
                     }
                   });
    } catch (const std::exception& e) {
      reactor->Finish(status_for(e));
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse* response) override {
    const std::string& name = requested_model(*request);
    response->set_model_name(name);
    return control(context, name, true, [response](bool ok) { response->set_isloaded(ok); },
                   request);
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse* response) override {
    const std::string& name = requested_model(*request);
    response->set_model_name(name);
    return control(
        context, name, false, [response](bool ok) { response->set_isunloaded(ok); }, nullptr,
        request);
  }

  /// Triton's; the rows of POST /v2/repository/index. repository_name is not looked at (the
  /// server has one repository).
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override {
    if (!authorized(context)) return done(context, unauthenticated());
    if (stopping_.load()) return done(context, shutting_down());
    fill_repository_index(models_.index(request->ready()), *response);
    return done(context, grpc::Status::OK);
  }

  /// Triton's; the figures of GET /v2/models[/NAME[/versions/V]]/stats.
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    if (!authorized(context)) return done(context, unauthenticated());
    if (stopping_.load()) return done(context, shutting_down());
    try {
      fill_model_statistics(statistics_rows(statistics_models(models_, *request)), *response);
    } catch (const std::exception& e) {
      return done(context, status_for(e));
    }
    return done(context, grpc::Status::OK);
  }

 private:
  /// A load or unload: queued on the registry's control thread and finished when done. A
  /// load's `request` or an unload's `unload_request` brings its parameters
  /// (load_parameters.h), checked before queueing.
  grpc::ServerUnaryReactor* control(
      grpc::CallbackServerContext* context, const std::string& name, bool load,
      std::function<void(bool)> set_done,
      const inference::RepositoryModelLoadRequest* request = nullptr,
      const inference::RepositoryModelUnloadRequest* unload_request = nullptr) {
    if (!authorized(context)) return done(context, unauthenticated());
    auto* reactor = context->DefaultReactor();
    if (stopping_.load()) {
      reactor->Finish(shutting_down());
      return reactor;
    }
    auto finish = [reactor, set_done](std::exception_ptr error) {
      try {
        if (error) std::rethrow_exception(error);
        set_done(true);
        reactor->Finish(grpc::Status::OK);
      } catch (const std::exception& e) {
        reactor->Finish(status_for(e));
      }
    };
    try {
      if (load) {
        models_.load(name, finish,
                     request ? config_of_load_parameters(load_parameters_of(*request)) : std::nullopt);
      } else {
        if (unload_request) check_unload_parameters(unload_parameters_of(*unload_request));
        models_.unload(name, finish);
      }
    } catch (const std::exception& e) {
      reactor->Finish(status_for(e));
    }
    return reactor;
  }

  /// No token configured, or the call's "authorization" metadata is "Bearer TOKEN".
  bool authorized(const grpc::CallbackServerContext* context) const {
    if (token_.empty()) return true;
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    if (it == metadata.end()) return false;
    return bearer_matches(std::string_view(it->second.data(), it->second.size()), token_);
  }

  static grpc::Status shutting_down() {
    return {grpc::StatusCode::UNAVAILABLE, "the server is shutting down"};
  }

  static grpc::Status unauthenticated() {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "missing or wrong bearer token (metadata authorization: Bearer TOKEN)"};
  }

  static grpc::ServerUnaryReactor* done(grpc::CallbackServerContext* context,
                                        const grpc::Status& status) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  ModelRegistry& models_;
  const std::atomic<bool>& stopping_;
  const std::string& token_;
};

}  // namespace

struct GrpcFrontend::Impl {
  Service service;
  std::unique_ptr<grpc::Server> server;
  std::once_flag shutdown_once;
  Impl(ModelRegistry& models, const std::atomic<bool>& stopping, const std::string& token)
      : service(models, stopping, token) {}
};

GrpcFrontend::GrpcFrontend(ModelRegistry& models, const std::atomic<bool>& stopping,
                           const std::string& auth_token)
    : impl_(std::make_unique<Impl>(models, stopping, auth_token)) {}

GrpcFrontend::~GrpcFrontend() { shutdown(Clock::now()); }

std::uint16_t GrpcFrontend::start(const std::string& host, std::uint16_t port,
                                  const std::optional<TlsFiles>& tls) {
  grpc::ServerBuilder builder;
  int bound = 0;
  const std::string address = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                                   : fmt::format("{}:{}", host, port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
    if (!tls->client_ca_pem.empty()) {
      // Mutual TLS: a call without a certificate signed by --tls-client-ca fails the handshake.
      ssl.pem_root_certs = tls->client_ca_pem;
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(address, credentials, &bound);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || bound == 0) {
    impl_->server.reset();
    throw Error(ErrorCode::InvalidArgument, fmt::format("cannot listen for gRPC on {}", address));
  }
  return static_cast<std::uint16_t>(bound);
}

void GrpcFrontend::shutdown(Clock::time_point deadline) {
  if (!impl_->server) return;
  std::call_once(impl_->shutdown_once, [&] {
    const auto left = deadline - Clock::now();
    impl_->server->Shutdown(std::chrono::system_clock::now() +
                            std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
    impl_->server->Wait();
  });
}

}  // namespace furiosa::server
