// Private: TLS of furiosa-serve (--tls-cert, --tls-key, --tls-client-ca for mutual TLS;
// docs/serving.md "Security"): the PEM
// files read and checked once at start, the OpenSSL context of the HTTPS sessions
// (http_session.cpp, Boost.Beast over boost::asio::ssl::stream) and the PEM strings gRPC's
// SslServerCredentials takes (grpc_frontend.cpp).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <utility>  // before Boost.Asio 1.74 (awaitable.hpp uses std::exchange)
#include <boost/asio/ssl/context.hpp>

namespace furiosa::server {

/// The certificate chain and private key, PEM, as read from their files.
struct TlsFiles {
  std::string cert_pem;  ///< the server's certificate, then any intermediates
  std::string key_pem;   ///< its private key (unencrypted)
  std::filesystem::path cert_file;  ///< where cert_pem was read (for error messages)
  std::filesystem::path key_file;   ///< where key_pem was read
  /// --tls-client-ca: the CA certificate(s), PEM, a client's certificate must be signed by
  /// (mutual TLS); "" when clients are not asked for a certificate.
  std::string client_ca_pem;
  std::filesystem::path client_ca_file;  ///< where client_ca_pem was read
};

/// Reads --tls-cert `cert`, --tls-key `key` and --tls-client-ca `client_ca` (all empty:
/// nullopt, plain transport; `client_ca` empty: no client certificate asked for). Throws
/// Error(InvalidArgument), one line: naming the flag given without the other (--tls-client-ca
/// needs both); naming the file that cannot be read, or holds no PEM certificate / private
/// key; naming both when the key is not the certificate's.
std::optional<TlsFiles> read_tls_files(const std::filesystem::path& cert,
                                       const std::filesystem::path& key,
                                       const std::filesystem::path& client_ca = {});

/// The server-side OpenSSL context of the HTTPS sessions: TLS 1.2 or later, `files` loaded;
/// with a client CA, every handshake requires a client certificate it verifies against them
/// (verify_peer | verify_fail_if_no_peer_cert).
/// The context is thread-safe for concurrent handshakes (OpenSSL's SSL_CTX); it must outlive
/// every stream made from it. Throws as read_tls_files (its files were checked there).
std::unique_ptr<boost::asio::ssl::context> make_tls_context(const TlsFiles& files);

}  // namespace furiosa::server
