// InferenceServer (server.h): the io_context running the HTTP connections (http_session.cpp) and
// the gRPC front end (grpc_frontend.h) over one ModelService per model (model_service.h: runner,
// admission, deadlines, batching, metrics); Prometheus text on /metrics and graceful shutdown.
#include "furiosa/server/server.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
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
#include "auth.h"
#include "grpc_frontend.h"
#include "model_service.h"
#include "server_impl.h"

namespace furiosa::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string InferenceServer::Impl::collect_metrics() {
  models->update_device_metrics();
  http_metrics.buffered.Set(static_cast<double>(buffered_bytes.load()));
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

HttpMetrics::HttpMetrics(prometheus::Registry& registry)
    : connections(prometheus::BuildGauge()
                      .Name("furiosa_serve_http_connections")
                      .Help("Open HTTP connections")
                      .Register(registry)
                      .Add({})),
      receiving(
          prometheus::BuildGauge()
              .Name("furiosa_serve_http_requests_receiving")
              .Help("HTTP requests whose first bytes arrived and that are not yet read in full")
              .Register(registry)
              .Add({})),
      buffered(
          prometheus::BuildGauge()
              .Name("furiosa_serve_http_buffered_bytes")
              .Help("Bytes of HTTP request bodies held across connections (--max-buffered-bytes)")
              .Register(registry)
              .Add({})),
      refused(prometheus::BuildCounter()
                  .Name("furiosa_serve_http_refused_total")
                  .Help("HTTP requests refused before routing, by reason (malformed: 400, timeout: "
                        "connection closed, body_too_large: 413, header_too_large: 431, "
                        "buffered_bytes: 503, unauthorized: 401, tls_handshake: connection "
                        "closed)")
                  .Register(registry)) {}

void InferenceServer::Impl::accept() {
  // Handlers of the io_context hold the Impl by raw pointer: the Impl owns the io_context, so it
  // outlives every handler (a shared_ptr there would be a cycle).
  acceptor->async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed by shutdown()
    start_http_session(std::move(socket), this, /*request_pending=*/false);
    accept();
  });
}

void InferenceServer::Impl::stop_accepting() {
  if (!acceptor) return;
  // Connections completed by the kernel but not yet accepted would be reset by closing the
  // listening socket: a client whose request bytes are already there is served (answered 503
  // with a body, or whatever its route answers), one that has sent nothing yet is closed.
  beast::error_code ec;
  acceptor->non_blocking(true, ec);
  while (!ec) {
    tcp::socket socket(asio::make_strand(ioc));
    acceptor->accept(socket, ec);
    if (ec) break;
    beast::error_code ignored;
    if (socket.available(ignored) > 0)
      start_http_session(std::move(socket), this, /*request_pending=*/true);
  }
  acceptor->close(ec);
  close_idle_tls();
}

void InferenceServer::Impl::close_idle_tls() {
  std::vector<std::function<void()>> closers;
  {
    std::lock_guard lock(idle_mutex);
    for (const auto& [session, close] : idle_tls) closers.push_back(close);
  }
  for (const auto& close : closers) close();
}

void InferenceServer::Impl::drain_then_stop(std::chrono::steady_clock::time_point give_up) {
  const bool idle_tls_left = [this] {
    std::lock_guard lock(idle_mutex);
    return !idle_tls.empty();
  }();
  if ((active_requests.load() == 0 && closing_connections.load() == 0 && !idle_tls_left) ||
      std::chrono::steady_clock::now() >= give_up) {
    work.reset();
    ioc.stop();
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(5));
  timer->async_wait([this, timer, give_up](beast::error_code) { drain_then_stop(give_up); });
}

void InferenceServer::Impl::teardown() {
  // gRPC first: it stops taking calls and waits for the ones in progress (their models still run).
  if (grpc) {
    grpc->shutdown(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.shutdown_grace_s)));
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  // Every admitted request was answered before the threads stopped; the registry finishes a
  // load or unload in progress, refuses later ones and closes every model.
  models->close();
}

InferenceServer::InferenceServer(ServerOptions options, std::ostream& log)
    : impl_(std::make_unique<Impl>(std::move(options), log)) {
  auto& s = *impl_;
  if (s.options.http_threads < 1) throw Error(ErrorCode::InvalidArgument, "http_threads must be >= 1");
  if (s.options.model_control_mode == ModelControlMode::Poll && !(s.options.repository_poll_s > 0)) {
    throw Error(ErrorCode::InvalidArgument, "--repository-poll-secs must be > 0");
  }
  // Security files first: a typo in one is reported before any model is compiled.
  s.tls_files = read_tls_files(s.options.tls_cert, s.options.tls_key, s.options.tls_client_ca);
  if (s.tls_files) s.tls = make_tls_context(*s.tls_files);
  if (!s.options.auth_token_file.empty()) s.auth_token = read_token_file(s.options.auth_token_file);
  s.models = std::make_unique<ModelRegistry>(s.options, s.metrics, s.log);
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
    s.grpc = std::make_unique<GrpcFrontend>(*s.models, s.stopping, s.auth_token);
    s.grpc_port = s.grpc->start(s.options.host, s.options.grpc_port, s.tls_files);
  }
  const char* tls = !s.tls ? "" : s.tls_files->client_ca_pem.empty() ? " (TLS)" : " (mutual TLS)";
  s.log << fmt::format("HTTP: {}:{}{}\n", s.options.host, http_port(), tls);
  if (s.grpc) s.log << fmt::format("gRPC: {}:{}{}\n", s.options.host, s.grpc_port, tls);
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
  impl_->models->stop_batching();
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(impl_->options.shutdown_grace_s));
  asio::post(impl_->ioc, [s = impl_.get(), give_up] {
    s->stop_accepting();
    s->drain_then_stop(give_up);
  });
}

void InferenceServer::wait() {
  // The first caller joins the threads and drains the queues; concurrent callers block in
  // call_once until it is done.
  std::call_once(impl_->teardown_once, [this] { impl_->teardown(); });
}

void InferenceServer::rescan_repository() { impl_->models->rescan(); }

std::vector<ModelEntry> InferenceServer::models() const {
  std::vector<ModelEntry> out;
  for (const ModelService* model : impl_->models->served()) out.push_back(model->entry());
  return out;
}

}  // namespace furiosa::server
