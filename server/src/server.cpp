// InferenceServer (server.h): Boost.Beast HTTP connections on an io_context and the gRPC front end
// (grpc_frontend.h) over one ModelService per model (model_service.h: runner, admission, deadlines,
// batching, metrics), whose completions are handed back to the connection's strand; Prometheus
// text on /metrics and graceful shutdown.
#include "furiosa/server/server.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <charconv>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "furiosa/runtime/runner.h"
#include "furiosa/server/v2_protocol.h"
#include "grpc_frontend.h"
#include "model_service.h"

namespace furiosa::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Response = http::response<http::string_body>;

/// The HTTP status of a serving outcome (serve_error.h's table).
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

}  // namespace

struct InferenceServer::Impl {
  ServerOptions options;
  std::ostream& log;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> active_requests{0};  ///< parsed and not yet answered
  std::once_flag teardown_once;

  prometheus::Registry registry;
  ServiceMetrics metrics{registry};
  std::map<std::string, std::unique_ptr<ModelService>> models;
  std::unique_ptr<GrpcFrontend> grpc;
  std::uint16_t grpc_port = 0;

  // Declared last: destroyed first, with any handler still queued, while the above still exist.
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  Impl(ServerOptions o, std::ostream& l) : options(std::move(o)), log(l) {}

  void accept();
  void drain_then_stop();
  void teardown();
  ModelService* find(const std::string& name);
  std::string collect_metrics();
};

namespace {

/// One HTTP connection: read a request, answer it (possibly later, from an inference
/// completion), repeat while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, InferenceServer::Impl* server) : stream_(std::move(socket)), server_(server) {}

  void start() { asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); }); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(std::chrono::seconds(300));
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      server_->active_requests.fetch_add(1);
      keep_alive_ = false;
      return reply(http::status::payload_too_large, error_json(fmt::format("request body larger than {} bytes",
                                                                            server_->options.max_body_bytes)));
    }
    if (ec) return close();
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    server_->active_requests.fetch_add(1);
    try {
      route();
    } catch (const std::exception& e) {
      reply(http_status(status_of(e)), error_json(e.what()));
    }
  }

  /// Splits the target path into its segments ("/v2/models/m/infer" -> v2, models, m, infer).
  static std::vector<std::string> segments(std::string_view target) {
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

  void route() {
    const auto target = request_.target();
    const auto path = segments(std::string_view(target.data(), target.size()));
    const auto method = request_.method();
    const bool get = method == http::verb::get;
    if (server_->stopping.load() && !(path.size() == 3 && path[1] == "health" && path[2] == "live")) {
      keep_alive_ = false;
      return reply(http::status::service_unavailable, error_json("the server is shutting down"));
    }
    if (path.size() == 1 && path[0] == "metrics" && get) return reply_metrics();
    if (path.empty() || path[0] != "v2") return reply(http::status::not_found, error_json("no such endpoint"));
    if (path.size() == 1 && get) {
      return reply(http::status::ok, nlohmann_server_metadata());
    }
    if (path.size() == 3 && path[1] == "health" && get) {
      if (path[2] == "live") return reply(http::status::ok, "");
      if (path[2] == "ready") return reply(http::status::ok, "");
    }
    if (path.size() >= 3 && path[1] == "models") {
      ModelService* model = server_->find(path[2]);
      if (model == nullptr) {
        return reply(http::status::not_found, error_json(fmt::format("unknown model '{}'", escape_text(path[2]))));
      }
      std::size_t rest = 3;
      if (path.size() >= 5 && path[3] == "versions") {
        if (path[4] != model->entry().version) {
          return reply(http::status::not_found,
                       error_json(fmt::format("model '{}' has no served version '{}' (serving {})", path[2], escape_text(path[4]),
                                              model->entry().version)));
        }
        rest = 5;
      }
      if (path.size() == rest && get) {
        return reply(http::status::ok, model_metadata_json(model->entry().name, model->entry().versions,
                                                           model->entry().platform, model->model()));
      }
      if (path.size() == rest + 1 && path[rest] == "ready" && get) return reply(http::status::ok, "");
      if (path.size() == rest + 1 && path[rest] == "infer" && method == http::verb::post) return infer(*model);
    }
    reply(http::status::not_found, error_json("no such endpoint"));
  }

  static std::string nlohmann_server_metadata() {
    return R"({"name":"furiosa-serve","version":"0.1.0","extensions":["binary_tensor_data"]})";
  }

  void infer(ModelService& model) {
    const auto received = Clock::now();
    std::optional<std::size_t> header_length;
    std::shared_ptr<InferRequest> request;
    try {
      if (auto h = request_.find("Inference-Header-Content-Length"); h != request_.end()) {
        std::size_t n = 0;
        const auto value = h->value();
        auto [p, err] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (err != std::errc() || p != value.data() + value.size()) {
          throw Error(ErrorCode::InvalidInput, "Inference-Header-Content-Length is not a byte count");
        }
        header_length = n;
      }
      request = std::make_shared<InferRequest>(decode_infer_request(request_.body(), header_length, model.model().inputs));
    } catch (const std::exception& e) {
      model.count_failure(status_of(e));
      throw;
    }
    Deadline deadline;
    // A timeout a year or more away means no deadline, as for gRPC deadlines (grpc_frontend.cpp):
    // adding any int64 count of microseconds to the clock could overflow into the past.
    constexpr std::int64_t kYearUs = std::int64_t{365} * 24 * 3600 * 1'000'000;
    if (request->timeout_us && *request->timeout_us < kYearUs) {
      deadline = received + std::chrono::microseconds(*request->timeout_us);
    }
    std::vector<Tensor> inputs = std::move(request->inputs);
    // Throws (answered by on_read) when not admitted; else the completion runs exactly once.
    model.infer(std::move(inputs), deadline,
                [self = shared_from_this(), &model, request](std::vector<Tensor> outputs, std::exception_ptr error) {
                  asio::post(self->stream_.get_executor(),
                             [self, &model, request, outputs = std::move(outputs), error] {
                               self->complete(model, *request, outputs, error);
                             });
                });
  }

  void complete(ModelService& model, const InferRequest& request, const std::vector<Tensor>& outputs,
                std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
      auto encoded =
          encode_infer_response(model.entry().name, model.entry().version, request, model.model().outputs, outputs);
      Response res{http::status::ok, request_.version()};
      if (encoded.header_length) {
        res.set(http::field::content_type, "application/octet-stream");
        res.set("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
      } else {
        res.set(http::field::content_type, "application/json");
      }
      res.body() = std::move(encoded.body);
      write(std::move(res));
    } catch (const std::exception& e) {
      reply(http_status(status_of(e)), error_json(e.what()));
    }
  }

  void reply_metrics() {
    Response res{http::status::ok, request_.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.body() = server_->collect_metrics();
    write(std::move(res));
  }

  void reply(http::status status, std::string body) {
    Response res{status, request_.version()};
    if (!body.empty()) res.set(http::field::content_type, "application/json");
    res.body() = std::move(body);
    write(std::move(res));
  }

  void write(Response res) {
    res.set(http::field::server, "furiosa-serve");
    res.keep_alive(keep_alive_ && !server_->stopping.load());
    res.prepare_payload();
    response_ = std::make_shared<Response>(std::move(res));
    http::async_write(stream_, *response_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      const bool again = !ec && self->response_->keep_alive();
      self->response_.reset();
      self->server_->active_requests.fetch_sub(1);
      if (again) self->read();
      else self->close();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  InferenceServer::Impl* server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::shared_ptr<Response> response_;
  bool keep_alive_ = true;
};

}  // namespace

ModelService* InferenceServer::Impl::find(const std::string& name) {
  auto it = models.find(name);
  return it == models.end() ? nullptr : it->second.get();
}

std::string InferenceServer::Impl::collect_metrics() {
  for (auto& [name, model] : models) model->update_device_metrics();
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

void InferenceServer::Impl::accept() {
  // Handlers of the io_context hold the Impl by raw pointer: the Impl owns the io_context, so it
  // outlives every handler (a shared_ptr there would be a cycle).
  acceptor->async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed by shutdown()
    std::make_shared<Session>(std::move(socket), this)->start();
    accept();
  });
}

void InferenceServer::Impl::drain_then_stop() {
  if (active_requests.load() == 0) {
    work.reset();
    ioc.stop();
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(5));
  timer->async_wait([this, timer](beast::error_code) { drain_then_stop(); });
}

void InferenceServer::Impl::teardown() {
  // gRPC first: it stops taking calls and waits for the ones in progress (their models still run).
  if (grpc) {
    grpc->shutdown(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.grpc_shutdown_grace_s)));
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  // Every admitted request was answered before the threads stopped; closing a model refuses
  // anything later and releases its device.
  for (auto& [name, model] : models) model->close();
}

InferenceServer::InferenceServer(ServerOptions options, std::ostream& log)
    : impl_(std::make_unique<Impl>(std::move(options), log)) {
  auto& s = *impl_;
  if (s.options.http_threads < 1) throw Error(ErrorCode::InvalidArgument, "http_threads must be >= 1");
  for (auto& entry : scan_model_repository(s.options.model_repository)) {
    auto model = std::make_unique<ModelService>(entry, s.metrics);
    const auto& b = entry.config.dynamic_batching;
    s.log << fmt::format("model {} version {}: {} ({}, {} input(s), {} output(s), device {}{})\n", entry.name,
                         entry.version, entry.path.string(), entry.platform, model->model().inputs.size(),
                         model->model().outputs.size(), entry.config.device.empty() ? "default" : entry.config.device,
                         b ? fmt::format(", dynamic batching {} within {} us", b->max_batch_size,
                                         b->max_queue_delay.count())
                           : "");
    s.models.emplace(entry.name, std::move(model));
  }
  s.log.flush();
}

InferenceServer::~InferenceServer() {
  shutdown();
  wait();
}

void InferenceServer::start() {
  auto& s = *impl_;
  beast::error_code ec;
  auto address = asio::ip::make_address(s.options.host, ec);
  if (ec) throw Error(ErrorCode::InvalidArgument, fmt::format("--host '{}': {}", s.options.host, ec.message()));
  tcp::endpoint endpoint(address, s.options.http_port);
  s.acceptor.emplace(s.ioc);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("cannot listen on {}:{}: {}", s.options.host, s.options.http_port, ec.message()));
  }
  if (s.options.grpc) {
    s.grpc = std::make_unique<GrpcFrontend>(s.models, s.stopping);
    s.grpc_port = s.grpc->start(s.options.host, s.options.grpc_port);
  }
  s.log << fmt::format("HTTP: {}:{}\n", s.options.host, http_port());
  if (s.grpc) s.log << fmt::format("gRPC: {}:{}\n", s.options.host, s.grpc_port);
  s.log.flush();
  s.work.emplace(s.ioc.get_executor());
  s.accept();
  for (int i = 0; i < s.options.http_threads; ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
}

std::uint16_t InferenceServer::http_port() const {
  return impl_->acceptor ? impl_->acceptor->local_endpoint().port() : 0;
}

std::uint16_t InferenceServer::grpc_port() const { return impl_->grpc_port; }

void InferenceServer::shutdown() {
  if (impl_->stopping.exchange(true)) return;
  if (impl_->threads.empty()) return;  // never started
  // Requests held by a dynamic batcher go to the device now rather than after its queue delay
  // (up to 60 s): the drain below and gRPC's shutdown wait for them to be answered.
  for (auto& [name, model] : impl_->models) model->stop_batching();
  asio::post(impl_->ioc, [s = impl_.get()] {
    beast::error_code ec;
    if (s->acceptor) s->acceptor->close(ec);
    s->drain_then_stop();
  });
}

void InferenceServer::wait() {
  // The first caller joins the threads and drains the queues; concurrent callers block in
  // call_once until it is done.
  std::call_once(impl_->teardown_once, [this] { impl_->teardown(); });
}

std::vector<ModelEntry> InferenceServer::models() const {
  std::vector<ModelEntry> out;
  for (const auto& [name, model] : impl_->models) out.push_back(model->entry());
  return out;
}

}  // namespace furiosa::server
