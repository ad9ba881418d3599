// InferenceServer (server.h): Boost.Beast HTTP connections on an io_context, one runtime queue per
// model (create_queue) with a receiver thread that hands each result back to its connection's
// strand, admission control per model, Prometheus metrics (prometheus-cpp core) and graceful
// shutdown.
#include "furiosa/server/server.h"

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <any>
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
#include "furiosa/runtime/queue.h"
#include "furiosa/server/v2_protocol.h"

namespace furiosa::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Response = http::response<http::string_body>;
/// Completion of one inference, called once on the model's receiver thread.
using Completion = std::function<void(std::vector<Tensor>, std::exception_ptr)>;

/// Latency buckets in seconds: 100 us .. 10 s.
prometheus::Histogram::BucketBoundaries latency_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

/// HTTP status of a runtime error answering an inference.
http::status status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidInput:
    case ErrorCode::InvalidArgument: return http::status::bad_request;
    case ErrorCode::SessionClosed:
    case ErrorCode::SessionTerminated: return http::status::service_unavailable;
    case ErrorCode::DeviceTimeout: return http::status::gateway_timeout;
    default: return http::status::internal_server_error;
  }
}

}  // namespace

/// One served model: its queue, the thread receiving its results, admission and metrics.
struct ServedModel {
  ModelEntry entry;
  runtime::Model model;
  std::optional<runtime::Submitter> submitter;
  std::optional<runtime::Receiver> receiver;
  std::thread receiver_thread;
  std::atomic<std::size_t> inflight{0};
  prometheus::Counter* succeeded = nullptr;
  prometheus::Counter* failed = nullptr;
  prometheus::Counter* rejected = nullptr;
  prometheus::Histogram* latency = nullptr;
  prometheus::Gauge* inflight_gauge = nullptr;

  ServedModel() = default;
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;
  /// Closes the submitter and joins the receiver thread (it ends once the queue is drained);
  /// also when the server's constructor fails after this model was loaded.
  ~ServedModel() {
    if (submitter) submitter->close();
    if (receiver_thread.joinable()) receiver_thread.join();
  }

  void receive_loop() {
    for (;;) {
      runtime::QueueResult result;
      try {
        result = receiver->recv();
      } catch (const Error& e) {
        if (e.code() == ErrorCode::SessionTerminated || e.code() == ErrorCode::SessionClosed) return;
        continue;  // QueueWaitTimeout after a year: keep waiting
      }
      auto done = std::any_cast<std::shared_ptr<Completion>>(result.context);
      (*done)(std::move(result.outputs), result.error);
    }
  }
};

struct InferenceServer::Impl {
  ServerOptions options;
  std::ostream& log;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> active_requests{0};  ///< parsed and not yet answered
  std::once_flag teardown_once;

  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>* requests_family = nullptr;
  prometheus::Family<prometheus::Histogram>* latency_family = nullptr;
  prometheus::Family<prometheus::Gauge>* inflight_family = nullptr;
  std::map<std::string, std::unique_ptr<ServedModel>> models;

  // Declared last: destroyed first, with any handler still queued, while the above still exist.
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  Impl(ServerOptions o, std::ostream& l) : options(std::move(o)), log(l) {}

  void accept();
  void drain_then_stop();
  void teardown();
  ServedModel* find(const std::string& name);
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
    } catch (const Error& e) {
      reply(status_of(e.code()), error_json(e.what()));
    } catch (const std::exception& e) {
      reply(http::status::internal_server_error, error_json(e.what()));
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
      ServedModel* model = server_->find(path[2]);
      if (model == nullptr) {
        return reply(http::status::not_found, error_json(fmt::format("unknown model '{}'", path[2])));
      }
      std::size_t rest = 3;
      if (path.size() >= 5 && path[3] == "versions") {
        if (path[4] != model->entry.version) {
          return reply(http::status::not_found,
                       error_json(fmt::format("model '{}' has no served version '{}' (serving {})", path[2], path[4],
                                              model->entry.version)));
        }
        rest = 5;
      }
      if (path.size() == rest && get) {
        return reply(http::status::ok, model_metadata_json(model->entry.name, model->entry.versions,
                                                           model->entry.platform, model->model));
      }
      if (path.size() == rest + 1 && path[rest] == "ready" && get) return reply(http::status::ok, "");
      if (path.size() == rest + 1 && path[rest] == "infer" && method == http::verb::post) return infer(*model);
    }
    reply(http::status::not_found, error_json("no such endpoint"));
  }

  static std::string nlohmann_server_metadata() {
    return R"({"name":"furiosa-serve","version":"0.1.0","extensions":["binary_tensor_data"]})";
  }

  void infer(ServedModel& model) {
    std::optional<std::size_t> header_length;
    if (auto h = request_.find("Inference-Header-Content-Length"); h != request_.end()) {
      std::size_t n = 0;
      const auto value = h->value();
      auto [p, err] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (err != std::errc() || p != value.data() + value.size()) {
        throw Error(ErrorCode::InvalidInput, "Inference-Header-Content-Length is not a byte count");
      }
      header_length = n;
    }
    auto request = std::make_shared<InferRequest>(decode_infer_request(request_.body(), header_length, model.model.inputs));
    // Admission: at most max_inflight requests of this model at once; the rest are answered now.
    if (model.inflight.fetch_add(1) >= model.entry.config.max_inflight) {
      model.inflight.fetch_sub(1);
      model.rejected->Increment();
      return reply(http::status::too_many_requests,
                   error_json(fmt::format("model '{}' has {} requests in flight (max_inflight)", model.entry.name,
                                          model.entry.config.max_inflight)));
    }
    model.inflight_gauge->Increment();
    const auto start = std::chrono::steady_clock::now();
    auto done = std::make_shared<Completion>(
        [self = shared_from_this(), &model, request, start](std::vector<Tensor> outputs, std::exception_ptr error) {
          model.inflight.fetch_sub(1);
          model.inflight_gauge->Decrement();
          model.latency->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          (error ? model.failed : model.succeeded)->Increment();
          asio::post(self->stream_.get_executor(), [self, &model, request, outputs = std::move(outputs), error] {
            self->complete(model, *request, outputs, error);
          });
        });
    try {
      std::vector<Tensor> inputs = std::move(request->inputs);
      model.submitter->submit(std::move(inputs), std::any(done));
    } catch (...) {
      // Not queued: the completion will never run, so answer here.
      model.inflight.fetch_sub(1);
      model.inflight_gauge->Decrement();
      model.failed->Increment();
      throw;
    }
  }

  void complete(ServedModel& model, const InferRequest& request, const std::vector<Tensor>& outputs,
                std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
      auto encoded = encode_infer_response(model.entry.name, model.entry.version, request, model.model.outputs, outputs);
      Response res{http::status::ok, request_.version()};
      if (encoded.header_length) {
        res.set(http::field::content_type, "application/octet-stream");
        res.set("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
      } else {
        res.set(http::field::content_type, "application/json");
      }
      res.body() = std::move(encoded.body);
      write(std::move(res));
    } catch (const Error& e) {
      reply(status_of(e.code()), error_json(e.what()));
    } catch (const std::exception& e) {
      reply(http::status::internal_server_error, error_json(e.what()));
    }
  }

  void reply_metrics() {
    Response res{http::status::ok, request_.version()};
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    res.body() = prometheus::TextSerializer().Serialize(server_->registry.Collect());
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

ServedModel* InferenceServer::Impl::find(const std::string& name) {
  auto it = models.find(name);
  return it == models.end() ? nullptr : it->second.get();
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
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  // Every admitted request was answered before the threads stopped; closing the submitters ends
  // each receiver thread once its queue is drained.
  for (auto& [name, model] : models) {
    if (model->submitter) model->submitter->close();
    if (model->receiver_thread.joinable()) model->receiver_thread.join();
  }
}

InferenceServer::InferenceServer(ServerOptions options, std::ostream& log)
    : impl_(std::make_unique<Impl>(std::move(options), log)) {
  auto& s = *impl_;
  if (s.options.http_threads < 1) throw Error(ErrorCode::InvalidArgument, "http_threads must be >= 1");
  s.requests_family = &prometheus::BuildCounter()
                           .Name("furiosa_serve_requests_total")
                           .Help("Inference requests by model and outcome (success, failure, rejected: 429)")
                           .Register(s.registry);
  s.latency_family = &prometheus::BuildHistogram()
                          .Name("furiosa_serve_request_duration_seconds")
                          .Help("Time from admission to the inference's completion, by model")
                          .Register(s.registry);
  s.inflight_family = &prometheus::BuildGauge()
                           .Name("furiosa_serve_inflight_requests")
                           .Help("Inference requests admitted and not yet completed, by model")
                           .Register(s.registry);
  for (auto& entry : scan_model_repository(s.options.model_repository)) {
    auto model = std::make_unique<ServedModel>();
    runtime::QueueOptions q;
    q.device = entry.config.device;
    q.worker_num = entry.config.worker_num;
    q.batch_size = entry.config.batch_size;
    // One more slot than admitted requests: submit() never blocks an HTTP thread.
    q.input_queue_size = entry.config.max_inflight + 1;
    q.output_queue_size = entry.config.max_inflight + 1;
    try {
      auto [submitter, receiver] = runtime::create_queue(entry.path, q);
      model->model = submitter.model();
      model->submitter.emplace(std::move(submitter));
      model->receiver.emplace(std::move(receiver));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("model '{}' ({}): {}", entry.name, entry.path.string(), e.message()), e.subject());
    }
    const std::map<std::string, std::string> labels = {{"model", entry.name}};
    model->succeeded = &s.requests_family->Add({{"model", entry.name}, {"outcome", "success"}});
    model->failed = &s.requests_family->Add({{"model", entry.name}, {"outcome", "failure"}});
    model->rejected = &s.requests_family->Add({{"model", entry.name}, {"outcome", "rejected"}});
    model->latency = &s.latency_family->Add(labels, latency_buckets());
    model->inflight_gauge = &s.inflight_family->Add(labels);
    ServedModel* raw = model.get();
    model->receiver_thread = std::thread([raw] { raw->receive_loop(); });
    s.log << fmt::format("model {} version {}: {} ({}, {} input(s), {} output(s), device {})\n", entry.name,
                         entry.version, entry.path.string(), entry.platform, raw->model.inputs.size(),
                         raw->model.outputs.size(), entry.config.device.empty() ? "default" : entry.config.device);
    model->entry = std::move(entry);
    s.models.emplace(model->entry.name, std::move(model));
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
  s.log << fmt::format("HTTP: {}:{}\n", s.options.host, http_port());
  s.log.flush();
  s.work.emplace(s.ioc.get_executor());
  s.accept();
  for (int i = 0; i < s.options.http_threads; ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
}

std::uint16_t InferenceServer::http_port() const {
  return impl_->acceptor ? impl_->acceptor->local_endpoint().port() : 0;
}

void InferenceServer::shutdown() {
  if (impl_->stopping.exchange(true)) return;
  if (impl_->threads.empty()) return;  // never started
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
  for (const auto& [name, model] : impl_->models) out.push_back(model->entry);
  return out;
}

}  // namespace furiosa::server
