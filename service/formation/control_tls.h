// Mutual TLS for the control plane (--tls-cert, --tls-key, --tls-ca): this
// daemon's certificate and key, and the CA that signs every node's. Each end
// of a control connection proves itself with its certificate and accepts the
// other's only when the CA signed it (TLS 1.3; node 0 requires a client
// certificate). Loaded once at start-up, where every file problem is an error
// that names the flag: a missing or unreadable file, a key that group or
// others may read, a key that is not the certificate's, a certificate the CA
// did not sign.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/status.h"

namespace ringsync::service::formation {

// The three files, all given or none.
struct TlsFiles {
  std::string cert;  // PEM: this node's certificate (then any intermediates)
  std::string key;   // PEM: its private key, chmod 600
  std::string ca;    // PEM: the CA certificate(s) every node's certificate must chain to
};

class ControlTls {
 public:
  static Result<std::shared_ptr<ControlTls>> load(const TlsFiles& files);

  // For connections this daemon accepts (it is node 0) and opens (a worker).
  boost::asio::ssl::context& server() { return server_; }
  boost::asio::ssl::context& client() { return client_; }
  // The subject of this node's certificate, for the start-up log.
  const std::string& subject() const { return subject_; }

 private:
  ControlTls();
  boost::asio::ssl::context server_;
  boost::asio::ssl::context client_;
  std::string subject_;
};

}  // namespace ringsync::service::formation
