// furiosa-serve: serves the models of a model repository over the Open Inference Protocol
// (KServe v2) HTTP/REST and gRPC APIs, with Prometheus metrics on /metrics, until SIGTERM or SIGINT, then
// shuts down gracefully (every request already received is answered) and exits 0.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <pthread.h>

#include "furiosa/core/error.h"
#include "furiosa/server/server.h"

int main(int argc, char** argv) {
  furiosa::server::ServerOptions options;
  CLI::App app{"Serve models over the Open Inference Protocol (KServe v2) HTTP/REST and gRPC APIs"};
  app.add_option("--model-repository", options.model_repository,
                 "Folder of MODEL_NAME/VERSION/model.{onnx,tflite,enf} (+ MODEL_NAME/config.json)")
      ->required();
  std::string control_mode = "none";
  app.add_option("--model-control-mode", control_mode,
                 "none: load every model at start, refuse load/unload; explicit: load the "
                 "--load-model models at start, then load/unload on request (POST "
                 "/v2/repository/models/NAME/load|unload); poll: load every model at start, "
                 "then rescan the repository every --repository-poll-secs (load/unload refused)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "explicit", "poll"}));
  app.add_option("--repository-poll-secs", options.repository_poll_s,
                 "With --model-control-mode poll: seconds between two rescans of the repository")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option(
      "--load-model", options.load_models,
      "With --model-control-mode explicit: a model to load at start (repeatable; * = all)");
  app.add_option("--host", options.host,
                 "Address to listen on (0.0.0.0: every interface; see --auth-token-file)")
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM certificate chain: serve HTTPS and gRPC over TLS (with --tls-key)");
  app.add_option("--tls-key", options.tls_key, "PEM private key of --tls-cert (unencrypted)");
  app.add_option("--tls-client-ca", options.tls_client_ca,
                 "PEM CA certificate(s): mutual TLS, every client (health probes included) must "
                 "present a certificate signed by them (with --tls-cert)");
  app.add_option("--auth-token-file", options.auth_token_file,
                 "File holding a bearer token every request but the health probes must carry "
                 "(Authorization: Bearer TOKEN; gRPC metadata authorization)");
  app.add_option("--http-port", options.http_port, "HTTP port (0: any free port)")->capture_default_str();
  app.add_option("--grpc-port", options.grpc_port, "gRPC port (inference.GRPCInferenceService; 0: any free port)")
      ->capture_default_str();
  app.add_option("--http-threads", options.http_threads, "Threads serving HTTP connections")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // Limits of one HTTP request and connection (docs/serving.md "Limits").
  app.add_option("--max-body-bytes", options.max_body_bytes, "Largest request body (413 past it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-header-bytes", options.max_header_bytes,
                 "Largest request line plus header fields (431 past it)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  app.add_option("--max-buffered-bytes", options.max_buffered_bytes,
                 "Request body bytes held at once across all connections (503 past it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--idle-timeout", options.idle_timeout_s,
                 "Seconds a keep-alive connection may wait for a request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--header-timeout", options.header_timeout_s,
                 "Seconds from a request's first byte to the end of its header section")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--body-timeout", options.body_timeout_s,
                 "Seconds for the rest of a request (its body), and for writing a response")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--shutdown-grace", options.shutdown_grace_s,
                 "Seconds shutdown waits for requests in progress before dropping them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (control_mode == "explicit") {
    options.model_control_mode = furiosa::server::ModelControlMode::Explicit;
  } else if (control_mode == "poll") {
    options.model_control_mode = furiosa::server::ModelControlMode::Poll;
  }
  if (control_mode != "poll" && app.count("--repository-poll-secs") > 0) {
    std::cerr << "furiosa-serve: --repository-poll-secs needs --model-control-mode poll\n";
    return 1;
  }
  if (control_mode != "explicit" && !options.load_models.empty()) {
    std::cerr << "furiosa-serve: --load-model needs --model-control-mode explicit (none and poll load "
                 "every model)\n";
    return 1;
  }

  // SIGTERM/SIGINT are blocked in every thread (the server's threads inherit the mask) and
  // taken by sigwait on this thread, where shutdown() may be called.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  try {
    furiosa::server::InferenceServer server(options, std::cout);
    server.start();
    int signal = 0;
    sigwait(&signals, &signal);
    std::cout << "shutting down (" << (signal == SIGTERM ? "SIGTERM" : "SIGINT") << ")" << std::endl;
    server.shutdown();
    server.wait();
    std::cout << "stopped" << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "furiosa-serve: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
