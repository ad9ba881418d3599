// TLS files and context (tls.h).
#include "tls.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "furiosa/core/error.h"

namespace furiosa::server {
namespace {

namespace ssl = boost::asio::ssl;

std::string read_file(const char* flag, const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream content;
  if (in) content << in.rdbuf();
  if (!in || in.bad()) {
    throw Error(ErrorCode::InvalidArgument, fmt::format("{} '{}': cannot read it: {}", flag,
                                                        file.string(), std::strerror(errno)));
  }
  return content.str();
}

/// Whether `pem` holds an unencrypted PEM private key (read alone, before OpenSSL checks it
/// against the certificate: the two errors are told apart).
bool is_pem_private_key(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!bio) return false;
  // No passphrase callback input: an encrypted key fails here rather than prompting.
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, [](char*, int, int, void*) { return 0; },
                                          nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (!key) return false;
  EVP_PKEY_free(key);
  return true;
}

/// The certificates of `pem` (PEM, one or more); empty when it holds none.
std::vector<X509*> pem_certificates(const std::string& pem) {
  std::vector<X509*> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (!bio) return out;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) out.push_back(cert);
  BIO_free(bio);
  ERR_clear_error();  // the end of the input reads as an error
  return out;
}

/// Requires and verifies client certificates signed by the CAs of `files.client_ca_pem`, and
/// names them in the handshake's CertificateRequest (the client picks its certificate by them).
void require_client_certificates(ssl::context& ctx, const TlsFiles& files) {
  std::vector<X509*> cas = pem_certificates(files.client_ca_pem);
  if (cas.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--tls-client-ca '{}': holds no valid PEM certificate",
                            files.client_ca_file.string()));
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx.native_handle());
  bool ok = true;
  for (X509* ca : cas) {
    // add_cert takes its own reference; the list takes ownership of a copy of the name.
    ok = ok && X509_STORE_add_cert(store, ca) == 1 &&
         SSL_CTX_add_client_CA(ctx.native_handle(), ca) == 1;
    X509_free(ca);
  }
  ERR_clear_error();
  if (!ok) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--tls-client-ca '{}': cannot use its certificates",
                            files.client_ca_file.string()));
  }
  ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
}

/// The context with `files` loaded, or the error naming the file at fault.
std::unique_ptr<ssl::context> load(const TlsFiles& files) {
  const auto& cert = files.cert_file;
  const auto& key = files.key_file;
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain(boost::asio::buffer(files.cert_pem), ec);
  if (ec) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--tls-cert '{}': holds no valid PEM certificate", cert.string()));
  }
  if (!is_pem_private_key(files.key_pem)) {
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--tls-key '{}': holds no valid unencrypted PEM private key",
                            key.string()));
  }
  // OpenSSL refuses a key that does not match the certificate already loaded.
  ctx->use_private_key(boost::asio::buffer(files.key_pem), ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--tls-key '{}' is not the private key of --tls-cert '{}'",
                            key.string(), cert.string()));
  }
  if (!files.client_ca_file.empty()) require_client_certificates(*ctx, files);
  return ctx;
}

}  // namespace

std::optional<TlsFiles> read_tls_files(const std::filesystem::path& cert,
                                       const std::filesystem::path& key,
                                       const std::filesystem::path& client_ca) {
  if (!client_ca.empty() && (cert.empty() || key.empty())) {
    throw Error(ErrorCode::InvalidArgument,
                "--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS first)");
  }
  if (cert.empty() && key.empty()) return std::nullopt;
  if (key.empty()) throw Error(ErrorCode::InvalidArgument, "--tls-cert needs --tls-key (the certificate's private key)");
  if (cert.empty()) throw Error(ErrorCode::InvalidArgument, "--tls-key needs --tls-cert (the certificate of the key)");
  TlsFiles files{read_file("--tls-cert", cert), read_file("--tls-key", key), cert, key, "", {}};
  if (!client_ca.empty()) {
    files.client_ca_pem = read_file("--tls-client-ca", client_ca);
    files.client_ca_file = client_ca;
  }
  load(files);  // checked now, with the file names for the error
  return files;
}

std::unique_ptr<ssl::context> make_tls_context(const TlsFiles& files) {
  return load(files);
}

}  // namespace furiosa::server
