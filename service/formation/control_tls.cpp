#include "service/formation/control_tls.h"

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/private_file.h"

namespace ringsync::service::formation {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

constexpr std::size_t kMaxKeyBytes = 64 * 1024;

std::string named(const std::string& path, const char* flag) { return "'" + path + "' (" + flag + ")"; }

Result<std::string> read_public_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read " + named(path, flag) + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return Status::InvalidArgument(named(path, flag) + " is empty");
  return text.str();
}

std::string subject_of(X509* cert) {
  char line[512] = {};
  if (cert) X509_NAME_oneline(X509_get_subject_name(cert), line, sizeof(line));
  return line;
}

// Whether the CA signed this node's own certificate: else every other node
// would refuse it, and the error belongs at start-up.
Status check_signed_by_ca(SSL_CTX* ctx, const TlsFiles& files) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  if (!check) return Status::Internal("out of memory checking the TLS certificate");
  int ok = X509_STORE_CTX_init(check, SSL_CTX_get_cert_store(ctx), cert, chain);
  if (ok == 1) ok = X509_verify_cert(check);
  const int error = X509_STORE_CTX_get_error(check);
  X509_STORE_CTX_free(check);
  if (ok == 1) return Status::Ok();
  return Status::InvalidArgument("the certificate " + named(files.cert, "--tls-cert") + " does not verify against " +
                                 named(files.ca, "--tls-ca") + ": " + X509_verify_cert_error_string(error) +
                                 "; the other nodes would refuse it. Sign every node's certificate with the CA "
                                 "they are all given");
}

Status configure(ssl::context& ctx, bool server, const TlsFiles& files, const std::string& cert,
                 const std::string& key, const std::string& ca) {
  SSL_CTX* native = ctx.native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION) != 1)
    return Status::Internal("this OpenSSL cannot require TLS 1.3");
  boost::system::error_code ec;
  ctx.use_certificate_chain(asio::buffer(cert), ec);
  if (ec)
    return Status::InvalidArgument(named(files.cert, "--tls-cert") + " is not a PEM certificate: " + ec.message());
  BIO* bio = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
  // No passphrase: OpenSSL's default would ask for one on the terminal.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  EVP_PKEY* pkey = bio ? PEM_read_bio_PrivateKey(bio, nullptr, no_passphrase, nullptr) : nullptr;
  BIO_free(bio);
  if (!pkey)
    return Status::InvalidArgument(named(files.key, "--tls-key") +
                                   " is not a PEM private key (or is encrypted: ringsyncd needs it unencrypted)");
  const bool matches = SSL_CTX_use_PrivateKey(native, pkey) == 1 && SSL_CTX_check_private_key(native) == 1;
  EVP_PKEY_free(pkey);
  if (!matches)
    return Status::InvalidArgument("the key " + named(files.key, "--tls-key") + " is not the key of the certificate " +
                                   named(files.cert, "--tls-cert") + "; give the key the certificate was made for");
  ctx.add_certificate_authority(asio::buffer(ca), ec);
  if (ec)
    return Status::InvalidArgument(named(files.ca, "--tls-ca") + " is not a PEM CA certificate: " + ec.message());
  ctx.set_verify_mode(server ? ssl::verify_peer | ssl::verify_fail_if_no_peer_cert : ssl::verify_peer);
  return check_signed_by_ca(native, files);
}

}  // namespace

ControlTls::ControlTls() : server_(ssl::context::tls_server), client_(ssl::context::tls_client) {}

Result<std::shared_ptr<ControlTls>> ControlTls::load(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty() || files.ca.empty()) {
    std::string missing;
    for (const auto& [path, flag] : {std::pair{&files.cert, "--tls-cert"}, std::pair{&files.key, "--tls-key"},
                                     std::pair{&files.ca, "--tls-ca"}})
      if (path->empty()) missing += (missing.empty() ? "" : ", ") + std::string(flag);
    return Status::InvalidArgument("TLS for the control plane needs --tls-cert, --tls-key and --tls-ca together; " +
                                   missing + " missing");
  }
  auto cert = read_public_file(files.cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  auto ca = read_public_file(files.ca, "--tls-ca");
  if (!ca.ok()) return ca.status();
  auto key = read_private_file(files.key, "TLS key file " + named(files.key, "--tls-key"), kMaxKeyBytes,
                               "is over 64 KiB; it is not a private key");
  if (!key.ok()) return key.status();
  std::shared_ptr<ControlTls> tls(new ControlTls());
  RINGSYNC_RETURN_IF_ERROR(configure(tls->server_, true, files, *cert, *key, *ca));
  RINGSYNC_RETURN_IF_ERROR(configure(tls->client_, false, files, *cert, *key, *ca));
  tls->subject_ = subject_of(SSL_CTX_get0_certificate(tls->server_.native_handle()));
  return tls;
}

}  // namespace ringsync::service::formation
