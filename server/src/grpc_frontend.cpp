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

[[noreturn]] void bad_tensor(const std::string& tensor, const std::string& message) {
  throw Error(ErrorCode::InvalidInput, fmt::format("input '{}': {}", tensor, message), ErrorSubject::of_tensor(tensor));
}

/// Copies typed contents into `tensor`, range-checked.
template <class T, class Field>
void store(const Field& values, Tensor& tensor, const std::string& name) {
  if (static_cast<std::int64_t>(values.size()) != tensor.elements()) {
    bad_tensor(name, fmt::format("contents hold {} elements, the shape needs {}", values.size(), tensor.elements()));
  }
  auto out = tensor.as<T>();
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(v)) {
      if (v < static_cast<decltype(v)>(std::numeric_limits<T>::lowest()) ||
          v > static_cast<decltype(v)>(std::numeric_limits<T>::max())) {
        bad_tensor(name, fmt::format("element {} = {} is out of range", i, v));
      }
    }
    out[static_cast<std::size_t>(i)] = static_cast<T>(v);
  }
}

/// The model's inputs from a ModelInferRequest, in model order. Throws Error(InvalidInput) naming
/// the tensor or the problem.
std::vector<Tensor> decode_inputs(const ModelInferRequest& request, const std::vector<runtime::TensorDesc>& model_inputs) {
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("inference request: {} raw_input_contents for {} inputs", request.raw_input_contents_size(),
                            request.inputs_size()));
  }
  std::map<std::string, int> given;
  for (int j = 0; j < request.inputs_size(); ++j) {
    const auto& name = request.inputs(j).name();
    bool known = false;
    for (const auto& d : model_inputs) known = known || d.name == name;
    if (!known) bad_tensor(name, "the model has no such input");
    if (!given.emplace(name, j).second) bad_tensor(name, "given twice");
  }
  std::vector<Tensor> out;
  for (const auto& desc : model_inputs) {
    auto it = given.find(desc.name);
    if (it == given.end()) bad_tensor(desc.name, "missing");
    const auto& input = request.inputs(it->second);
    if (input.datatype() != v2_datatype(desc.dtype)) {
      bad_tensor(desc.name, fmt::format("datatype {} given, the model expects {}",
                                        input.datatype().empty() ? "(none)" : input.datatype(), v2_datatype(desc.dtype)));
    }
    Shape shape(input.shape().begin(), input.shape().end());
    if (shape != desc.shape) {
      bad_tensor(desc.name, fmt::format("shape {} given, the model expects {}", shape_to_string(shape),
                                        shape_to_string(desc.shape)));
    }
    Tensor tensor(desc.dtype, shape);
    if (raw) {
      if (input.has_contents()) bad_tensor(desc.name, "contents given beside raw_input_contents");
      const auto& bytes = request.raw_input_contents(it->second);
      if (bytes.size() != tensor.size_bytes()) {
        bad_tensor(desc.name, fmt::format("raw contents of {} bytes, the shape needs {}", bytes.size(), tensor.size_bytes()));
      }
      std::memcpy(tensor.bytes().data(), bytes.data(), bytes.size());
    } else {
      const auto& c = input.contents();
      switch (desc.dtype) {
        case DType::Float32: store<float>(c.fp32_contents(), tensor, desc.name); break;
        case DType::UInt8: store<std::uint8_t>(c.uint_contents(), tensor, desc.name); break;
        case DType::Int8: store<std::int8_t>(c.int_contents(), tensor, desc.name); break;
        case DType::Int32: store<std::int32_t>(c.int_contents(), tensor, desc.name); break;
        case DType::Int64: store<std::int64_t>(c.int64_contents(), tensor, desc.name); break;
      }
    }
    out.push_back(std::move(tensor));
  }
  return out;
}

/// The indexes of the outputs asked for (all when none named). Throws Error(InvalidInput) naming
/// an unknown output.
std::vector<std::size_t> chosen_outputs(const ModelInferRequest& request, const std::vector<runtime::TensorDesc>& outputs) {
  std::vector<std::size_t> chosen;
  if (request.outputs_size() == 0) {
    for (std::size_t i = 0; i < outputs.size(); ++i) chosen.push_back(i);
    return chosen;
  }
  for (const auto& o : request.outputs()) {
    std::size_t i = 0;
    while (i < outputs.size() && outputs[i].name != o.name()) ++i;
    if (i == outputs.size()) {
      throw Error(ErrorCode::InvalidInput, fmt::format("output '{}': the model has no such output", o.name()),
                  ErrorSubject::of_tensor(o.name()));
    }
    chosen.push_back(i);
  }
  return chosen;
}

template <class T, class Field>
void append(const Tensor& t, Field* field) {
  for (T v : t.as<T>()) field->Add(v);
}

void encode_outputs(const std::vector<runtime::TensorDesc>& descs, const std::vector<std::size_t>& chosen, bool raw,
                    const std::vector<Tensor>& outputs, ModelInferResponse& response) {
  for (std::size_t i : chosen) {
    const Tensor& t = outputs.at(i);
    auto* o = response.add_outputs();
    o->set_name(descs[i].name);
    o->set_datatype(std::string(v2_datatype(t.dtype())));
    for (auto d : t.shape()) o->add_shape(d);
    if (raw) {
      response.add_raw_output_contents(reinterpret_cast<const char*>(t.bytes().data()), t.size_bytes());
      continue;
    }
    auto* c = o->mutable_contents();
    switch (t.dtype()) {
      case DType::Float32: append<float>(t, c->mutable_fp32_contents()); break;
      case DType::UInt8: append<std::uint8_t>(t, c->mutable_uint_contents()); break;
      case DType::Int8: append<std::int8_t>(t, c->mutable_int_contents()); break;
      case DType::Int32: append<std::int32_t>(t, c->mutable_int_contents()); break;
      case DType::Int64: append<std::int64_t>(t, c->mutable_int64_contents()); break;
    }
  }
}

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
      inputs = decode_inputs(*request, model->model().inputs);
      chosen = chosen_outputs(*request, model->model().outputs);
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
                       encode_outputs(model->model().outputs, chosen, raw, outputs, *response);
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
