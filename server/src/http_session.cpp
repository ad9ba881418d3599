// One HTTP/1.1 connection of an InferenceServer (server_impl.h): reading a request in stages
// with their own limits and timeouts, routing it, answering it (possibly later, from an inference
// completion), and closing the connection without losing the answer.
//
// The stages of a request, each bounded:
//   idle    keep-alive, no byte of the next request yet  -> options.idle_timeout_s
//   header  first byte to the end of the header section   -> header_timeout_s, max_header_bytes
//                                                            (431)
//   body    the rest of the request                        -> body_timeout_s, max_body_bytes (413,
//                                                            as soon as a Content-Length or a
//                                                            chunk passes it)
// A stage that times out closes the connection (the stream has closed the socket; counted in
// furiosa_serve_http_refused_total{reason="timeout"}).
// A request counts as active (InferenceServer::Impl::active_requests, what shutdown drains) from
// its first byte until its response is written. Malformed HTTP is answered 400 naming what Beast's
// parser found wrong. After an error response the connection is closed by a lingering close: the
// server stops sending, then reads and discards what the client still sends (bounded in bytes and
// time), so a client still uploading its body reads the 413 instead of a reset.
//
// One Session template serves both transports: Session<PlainStream> (beast::tcp_stream) and
// Session<TlsStream> (beast::ssl_stream over it, --tls-cert), which first completes the TLS
// handshake within header_timeout_s (plain HTTP to the TLS port fails it and is closed without
// an answer) and ends each close it chooses with a TLS shutdown (close_notify, bounded). With
// --auth-token-file every request but the health probes must carry "Authorization: Bearer
// TOKEN", checked once its header section is read (before its body): else 401.
#include <fmt/format.h>

#include <utility>  // before Boost.Asio 1.74 (awaitable.hpp uses std::exchange)
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "auth.h"
#include "http_common.h"
#include "furiosa/server/v2_protocol.h"
#include "introspection.h"
#include "load_parameters.h"
#include "server_impl.h"

namespace furiosa::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Response = http::response<http::string_body>;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

/// The error a request body over the server-wide budget ends its read with.
beast::error_code over_budget() { return asio::error::no_buffer_space; }

/// Bytes a lingering close reads and discards at most, and for how long without any.
constexpr std::size_t kLingerBytes = std::size_t{1} << 30;
constexpr auto kLingerQuiet = std::chrono::seconds(5);
/// How long a TLS shutdown may take (our close_notify sent, the peer's awaited) before the
/// socket is closed anyway: a peer that never answers cannot hold the connection.
constexpr auto kTlsCloseTimeout = std::chrono::seconds(5);

/// The plain HTTP stream and the HTTPS one (TLS over the same TCP stream and its timeouts).
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>>, ConnectionAccounting {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  /// Takes the connection: `stream_args` construct the Stream (the socket, then for TLS the
  /// server's ssl::context).
  template <class... StreamArgs>
  explicit Session(InferenceServer::Impl* server, StreamArgs&&... stream_args)
      : ConnectionAccounting(server),
        stream_(std::forward<StreamArgs>(stream_args)...),
        idle_timer_(stream_.get_executor()) {}
  ~Session() {
    if constexpr (kTls) {
      std::lock_guard lock(server_->idle_mutex);
      server_->idle_tls.erase(this);
    }
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start(bool request_pending) {
    if (request_pending) count_request();
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->handshake();
      } else {
        self->wait_request();
      }
    });
  }

 private:
  /// The lowest layer: the TCP stream with its timer and socket.
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  /// TLS: the server side of the handshake, bounded by header_timeout_s. A failed one (plain
  /// HTTP, an unknown CA on the client's side, a timeout) closes the connection unanswered.
  void handshake() {
    lowest().expires_after(seconds(server_->options.header_timeout_s));
    stream_.async_handshake(asio::ssl::stream_base::server,
                            [self = this->shared_from_this()](beast::error_code ec) {
                              if (ec) {
                                self->server_->http_metrics.refused.Add({{"reason", "tls_handshake"}})
                                    .Increment();
                                return self->close_now();
                              }
                              self->wait_request();
                            });
  }

  /// Whether the request whose header was just read may go on: no token configured, a health
  /// probe (open, for load balancers and Kubernetes probes), or "Authorization: Bearer TOKEN".
  bool authorized() const {
    const auto& req = parser_->get();
    const auto target = req.target();
    const auto header = req[http::field::authorization];
    return request_authorized(server_->auth_token, std::string_view(target.data(), target.size()),
                              std::string_view(header.data(), header.size()));
  }

  /// 401 before the body is read (an unauthenticated client never has its body buffered); the
  /// connection is kept only when the request has no body.
  void refuse_unauthorized() {
    set_receiving(false);
    keep_alive_ = parser_->is_done() && parser_->get().keep_alive();
    request_ = {};
    request_.version(parser_->get().version());
    server_->http_metrics.refused.Add({{"reason", "unauthorized"}}).Increment();
    Response res{http::status::unauthorized, request_.version()};
    res.set(http::field::www_authenticate, "Bearer");
    res.set(http::field::content_type, "application/json");
    res.body() = error_json("missing or wrong bearer token (Authorization: Bearer TOKEN)");
    write(std::move(res));
  }

  /// Idle: waits for the first byte of the next request (bytes already buffered count). Over
  /// TLS the idle timeout is a timer of its own that ends the read without closing the socket
  /// (close_notify can still be sent), and the connection is in idle_tls (server_impl.h), for
  /// shutdown; listed first, then `stopping` read: a shutdown that missed it has set it.
  void wait_request() {
    if constexpr (kTls) list_idle(true);
    if (buffer_.size() > 0 || (kTls && server_->stopping.load())) {
      if (buffer_.size() > 0) read_header();
      else close_gracefully();
      if constexpr (kTls) list_idle(false);
      return;
    }
    if constexpr (kTls) {
      lowest().expires_never();
      idle_ = true;
      idle_timer_.expires_after(seconds(server_->options.idle_timeout_s));
      idle_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
        if (!ec) self->end_idle();
      });
    } else {
      lowest().expires_after(seconds(server_->options.idle_timeout_s));
    }
    stream_.async_read_some(
        buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
          self->buffer_.commit(n);
          if constexpr (kTls) {
            self->idle_ = false;
            self->idle_timer_.cancel();
          }
          if (!ec && n > 0) {
            if constexpr (kTls) self->idle_expired_ = false;
            self->read_header();
          } else if (kTls && (self->idle_expired_ || ec == asio::error::eof)) {
            self->close_gracefully();  // the idle timeout, shutdown or the peer's close_notify
          } else {
            self->close_now();  // closed, reset or timed out: no request started
          }
          if constexpr (kTls) self->list_idle(false);  // counted by its next state by now
        });
  }

  /// TLS: lists the connection in idle_tls (`on`), with the function shutdown calls to end its
  /// idle wait on its strand, or takes it off.
  void list_idle(bool on) {
    std::lock_guard lock(server_->idle_mutex);
    if (!on) return (void)server_->idle_tls.erase(this);
    server_->idle_tls[this] = [weak = this->weak_from_this()] {
      if (auto self = weak.lock())
        asio::post(self->stream_.get_executor(), [self] { self->end_idle(); });
    };
  }

  /// TLS, on the strand: the idle timeout fired or shutdown asked the connection to close. Ends
  /// the idle read, whose handler closes with close_notify; nothing once it is not idle.
  void end_idle() {
    if (!idle_) return;
    idle_expired_ = true;
    beast::error_code ignored;
    lowest().socket().cancel(ignored);
  }

  void read_header() {
    count_request();
    set_receiving(true);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    lowest().expires_after(seconds(server_->options.header_timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->on_read_error(ec, "header");
                              self->read_body();
                            });
  }

  void read_body() {
    if (!authorized()) return refuse_unauthorized();
    const auto expect = parser_->get()[http::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser_->is_done()) {
      // The client (curl, for bodies over 1 MiB) waits for this before sending the body.
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      lowest().expires_after(seconds(server_->options.body_timeout_s));
      return http::async_write(
          stream_, *cont, [self = this->shared_from_this(), cont](beast::error_code ec, std::size_t) {
            if (ec) return self->close_now();
            self->read_body_after_continue();
          });
    }
    read_body_after_continue();
  }

  void read_body_after_continue() {
    // The body's bytes count against the budget across connections before they are read: all
    // of a Content-Length at once (and the string is sized once, not grown by doubling), a
    // chunked body chunk by chunk as each chunk's size arrives.
    if (const auto length = parser_->content_length()) {
      if (!reserve_body_bytes(*length)) return on_read_error(over_budget(), "body");
      parser_->get().body().reserve(static_cast<std::size_t>(*length));
    } else if (parser_->chunked()) {
      chunk_cb_ = [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
        if (!reserve_body_bytes(size)) ec = over_budget();
      };
      parser_->on_chunk_header(chunk_cb_);
    }
    lowest().expires_after(seconds(server_->options.body_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->on_read_error(ec, "body");
                       self->on_request();
                     });
  }

  /// A request that could not be read: answered when there is someone to answer.
  void on_read_error(beast::error_code ec, const char* stage) {
    set_receiving(false);
    keep_alive_ = false;
    const auto& limits = server_->options;
    auto refuse = [&](const char* reason, http::status status, std::string message) {
      server_->http_metrics.refused.Add({{"reason", reason}}).Increment();
      reply(status, error_json(message));
    };
    if (ec == http::error::body_limit) {
      return refuse("body_too_large", http::status::payload_too_large,
                    fmt::format("request body larger than {} bytes (--max-body-bytes)",
                                limits.max_body_bytes));
    }
    if (ec == over_budget()) {
      return refuse(
          "buffered_bytes", http::status::service_unavailable,
          fmt::format("the server holds {} bytes of requests already (--max-buffered-bytes "
                      "{}); retry later",
                      server_->buffered_bytes.load(), limits.max_buffered_bytes));
    }
    if (ec == http::error::header_limit) {
      return refuse(
          "header_too_large", http::status::request_header_fields_too_large,
          fmt::format("request line and header fields larger than {} bytes (--max-header-bytes)",
                      limits.max_header_bytes));
    }
    if (ec == beast::error::timeout) {
      // The stream closed the socket when its timer fired (beast::tcp_stream): no answer can
      // be sent, as nginx's client_header_timeout does not answer either.
      server_->http_metrics.refused.Add({{"reason", "timeout"}}).Increment();
      return close_now();
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
        ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::ssl::error::stream_truncated ||
        ec == asio::error::operation_aborted) {
      return close_now();  // the client went away mid-request: nobody to answer
    }
    refuse("malformed", http::status::bad_request,
           fmt::format("malformed HTTP request ({}): {}", stage, escape_text(ec.message())));
  }

  void on_request() {
    set_receiving(false);
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    try {
      route();
    } catch (const std::exception& e) {
      reply(http_status(status_of(e)), error_json(e.what()));
    }
    // Routing has decoded the body into tensors (or refused it): its bytes leave the budget
    // now, not when the response has been written (an inference may take a while).
    std::string().swap(request_.body());
    release_body_bytes();
  }

  void route() {
    const auto target = request_.target();
    const auto path = path_segments(std::string_view(target.data(), target.size()));
    const auto method = request_.method();
    const bool get = method == http::verb::get;
    if (server_->stopping.load() &&
        !(path.size() == 3 && path[1] == "health" && path[2] == "live")) {
      keep_alive_ = false;
      return reply(http::status::service_unavailable, error_json("the server is shutting down"));
    }
    if (path.size() == 1 && path[0] == "metrics" && get) return reply_metrics();
    if (path.empty() || path[0] != "v2")
      return reply(http::status::not_found, error_json("no such endpoint"));
    if (path.size() == 1 && get) {
      return reply(http::status::ok, server_metadata_json());
    }
    if (path.size() == 3 && path[1] == "health" && get) {
      if (path[2] == "live") return reply(http::status::ok, "");
      if (path[2] == "ready") return reply(http::status::ok, "");
    }
    // Triton's model repository extension (model_control.h) and introspection (introspection.h).
    if (path.size() >= 3 && path[1] == "repository" && method == http::verb::post) {
      if (path.size() == 3 && path[2] == "index") {
        return reply(
            http::status::ok,
            repository_index_json(server_->models->index(index_ready_only(request_.body()))));
      }
      if (path.size() == 5 && path[2] == "models" && (path[4] == "load" || path[4] == "unload"))
        return control(path[3], path[4] == "load");
    }
    if (path.size() == 3 && path[1] == "models" && path[2] == "stats" && get) {
      return reply(http::status::ok, model_stats_json(server_->models->served()));
    }
    if (path.size() >= 3 && path[1] == "models") {
      // Unknown model or version: ServeError(NotFound); not loaded: ServeError(Unavailable),
      // answered by on_request.
      std::size_t rest = 3;
      std::string version;
      if (path.size() >= 5 && path[3] == "versions") {
        version = path[4];
        rest = 5;
      }
      if (path.size() == rest + 1 && path[rest] == "stats" && get) {
        return reply(http::status::ok,
                     model_stats_json(server_->models->versions_of(path[2], version)));
      }
      const ModelLease model = server_->models->find(path[2], version);
      if (path.size() == rest && get) {
        return reply(http::status::ok,
                     model_metadata_json(model->entry().name, model->entry().versions,
                                         model->entry().platform, model->model()));
      }
      if (path.size() == rest + 1 && path[rest] == "ready" && get)
        return reply(http::status::ok, "");
      if (path.size() == rest + 1 && path[rest] == "infer" && method == http::verb::post)
        return infer(*model);
      if (path.size() == rest + 1 && path[rest] == "config" && get)
        return reply(http::status::ok, model_config_json(*model));
    }
    reply(http::status::not_found, error_json("no such endpoint"));
  }

  /// POST /v2/repository/models/NAME/load|unload: queued on the registry's control thread,
  /// answered (200 with an empty body, or the error) when it is done. A load or unload body's
  /// parameters (load_parameters.h) are checked first: a bad one is answered 400 at once.
  void control(const std::string& name, bool load) {
    auto done = [self = this->shared_from_this()](std::exception_ptr error) {
      asio::post(self->stream_.get_executor(), [self, error] {
        try {
          if (error) std::rethrow_exception(error);
          self->reply(http::status::ok, "");
        } catch (const std::exception& e) {
          self->reply(http_status(status_of(e)), error_json(e.what()));
        }
      });
    };
    if (load) {
      server_->models->load(name, std::move(done),
                            config_of_load_parameters(load_parameters_of_json(request_.body())));
    } else {
      check_unload_parameters(unload_parameters_of_json(request_.body()));
      server_->models->unload(name, std::move(done));
    }
  }

  void infer(ModelService& model) {
    const auto received = Clock::now();
    std::optional<std::size_t> header_length;
    std::shared_ptr<InferRequest> request;
    try {
      if (auto h = request_.find("Inference-Header-Content-Length"); h != request_.end())
        header_length =
            inference_header_length(std::string_view(h->value().data(), h->value().size()));
      request = std::make_shared<InferRequest>(
          decode_infer_request(request_.body(), header_length, model.model().inputs));
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
                [self = this->shared_from_this(), &model, request](std::vector<Tensor> outputs,
                                                             std::exception_ptr error) {
                  asio::post(self->stream_.get_executor(),
                             [self, &model, request, outputs = std::move(outputs), error] {
                               self->complete(model, *request, outputs, error);
                             });
                });
  }

  void complete(ModelService& model, const InferRequest& request,
                const std::vector<Tensor>& outputs, std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
      auto encoded = encode_infer_response(model.entry().name, model.entry().version, request,
                                           model.model().outputs, outputs);
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
    lowest().expires_after(seconds(server_->options.body_timeout_s));
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                        const bool again = !ec && self->response_->keep_alive();
                        const bool error_response = self->response_->result_int() >= 400;
                        self->response_.reset();
                        if (again) {
                          if constexpr (kTls) self->list_idle(true);  // before it stops counting
                          self->uncount_request();
                          return self->wait_request();
                        }
                        if (ec) return self->close_now();
                        // Closing with unread request bytes makes the kernel send a reset, which
                        // can overtake the response: after an error (413 mid-upload) read what the
                        // client still sends first.
                        if (error_response) return self->linger_close();
                        self->close_gracefully();
                      });
  }

  void linger_close() {
    if constexpr (kTls) {
      if (shutting_down_) return;
      shutting_down_ = true;
      count_closing();  // before the request leaves active_requests
    }
    set_receiving(false);
    uncount_request();
    if constexpr (kTls) {
      // A one-way TLS shutdown: the client's close_notify counted as received, so ours is sent
      // without waiting for it; then the plain linger below the TLS layer, so a client still
      // uploading reads the answer and a clean close.
      SSL_set_shutdown(stream_.native_handle(), SSL_RECEIVED_SHUTDOWN);
      lowest().expires_after(kTlsCloseTimeout);
      return stream_.async_shutdown([self = this->shared_from_this()](beast::error_code ec) {
        self->uncount_closing();
        if (ec) return self->close_now();
        self->linger_tcp();
      });
    }
    linger_tcp();
  }

  /// The lingering close on the TCP stream: FIN, then what the client still sends discarded.
  void linger_tcp() {
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close_now();
    discard();
  }

  void discard() {
    buffer_.consume(buffer_.size());
    lowest().expires_after(kLingerQuiet);
    lowest().async_read_some(buffer_.prepare(64 * 1024), [self = this->shared_from_this()](
                                                             beast::error_code ec, std::size_t n) {
      self->lingered_ += n;
      if (ec || n == 0 || self->lingered_ >= kLingerBytes) return self->close_now();
      self->discard();
    });
  }

  /// Closes the connection; over TLS first the TLS shutdown (our close_notify, then the
  /// peer's awaited), bounded by kTlsCloseTimeout, counted in closing_connections meanwhile
  /// (shutdown's drain waits for it). Idempotent.
  void close_gracefully() {
    if constexpr (!kTls) {
      close_now();
    } else {
      if (shutting_down_) return;
      shutting_down_ = true;
      count_closing();  // before the request leaves active_requests
      set_receiving(false);
      uncount_request();
      lowest().expires_after(kTlsCloseTimeout);
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        self->close_now();
        self->uncount_closing();
      });
    }
  }

  /// Closes the connection at once (a FIN; over TLS without close_notify: the TLS session
  /// failed, the socket is already closed, or close_gracefully() has done the TLS shutdown).
  void close_now() {
    set_receiving(false);
    uncount_request();
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  std::shared_ptr<Response> response_;
  bool keep_alive_ = true;
  std::size_t lingered_ = 0;
  /// TLS: the idle timer (the stream's own timer would close the socket), and the idle state,
  /// all used on the strand only: waiting for a request; the idle read ended by the timer or
  /// shutdown; the TLS shutdown started.
  asio::steady_timer idle_timer_;
  bool idle_ = false;
  bool idle_expired_ = false;
  bool shutting_down_ = false;
  /// The parser's chunk-header callback (it keeps a reference: must outlive the parse).
  std::function<void(std::uint64_t, beast::string_view, beast::error_code&)> chunk_cb_;
};

}  // namespace

void start_http_session(tcp::socket socket, InferenceServer::Impl* server, bool request_pending) {
  if (server->tls) {
    std::make_shared<Session<TlsStream>>(server, std::move(socket), *server->tls)
        ->start(request_pending);
  } else {
    std::make_shared<Session<PlainStream>>(server, std::move(socket))->start(request_pending);
  }
}

}  // namespace furiosa::server
