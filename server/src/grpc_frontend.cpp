// GrpcFrontend (grpc_frontend.h): the KServe v2 gRPC service and its protobuf <-> tensor codec.
#include "grpc_frontend.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/server/grpc_codec.h"
#include "furiosa/server/v2_protocol.h"
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
  Service(const std::map<std::string, std::unique_ptr<ModelService>>& models, const std::atomic<bool>& stopping)
      : models_(models), stopping_(stopping) {}

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
    ModelService* model = nullptr;
    if (auto status = find(request->name(), request->version(), model); !status.ok()) return done(context, status);
    response->set_ready(!stopping_.load());
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    response->set_name("furiosa-serve");
    response->set_version("0.1.0");
    response->add_extensions("binary_tensor_data");
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    ModelService* model = nullptr;
    if (auto status = find(request->name(), request->version(), model); !status.ok()) return done(context, status);
    const auto& entry = model->entry();
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
    add(model->model().inputs, response->mutable_inputs());
    add(model->model().outputs, response->mutable_outputs());
    return done(context, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context, const ModelInferRequest* request,
                                       ModelInferResponse* response) override {
    auto* reactor = context->DefaultReactor();
    if (stopping_.load()) {
      reactor->Finish({grpc::StatusCode::UNAVAILABLE, "the server is shutting down"});
      return reactor;
    }
    ModelService* model = nullptr;
    if (auto status = find(request->model_name(), request->model_version(), model); !status.ok()) {
      reactor->Finish(status);
      return reactor;
    }
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

 private:
  static grpc::ServerUnaryReactor* done(grpc::CallbackServerContext* context, const grpc::Status& status) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  grpc::Status find(const std::string& name, const std::string& version, ModelService*& model) const {
    auto it = models_.find(name);
    if (it == models_.end()) return {grpc::StatusCode::NOT_FOUND, fmt::format("unknown model '{}'", escape_text(name))};
    model = it->second.get();
    if (!version.empty() && version != model->entry().version) {
      return {grpc::StatusCode::NOT_FOUND, fmt::format("model '{}' has no served version '{}' (serving {})", name,
                                                       escape_text(version), model->entry().version)};
    }
    return grpc::Status::OK;
  }

  const std::map<std::string, std::unique_ptr<ModelService>>& models_;
  const std::atomic<bool>& stopping_;
};

}  // namespace

struct GrpcFrontend::Impl {
  Service service;
  std::unique_ptr<grpc::Server> server;
  std::once_flag shutdown_once;
  Impl(const std::map<std::string, std::unique_ptr<ModelService>>& models, const std::atomic<bool>& stopping)
      : service(models, stopping) {}
};

GrpcFrontend::GrpcFrontend(const std::map<std::string, std::unique_ptr<ModelService>>& models,
                           const std::atomic<bool>& stopping)
    : impl_(std::make_unique<Impl>(models, stopping)) {}

GrpcFrontend::~GrpcFrontend() { shutdown(Clock::now()); }

std::uint16_t GrpcFrontend::start(const std::string& host, std::uint16_t port) {
  grpc::ServerBuilder builder;
  int bound = 0;
  const std::string address = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                                   : fmt::format("{}:{}", host, port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
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
