// Certificates for the control plane's TLS tests, made with the openssl
// command in a private folder removed with the object (no keys are kept in
// the repository): a CA and one node certificate it signed, and a rogue CA
// with a certificate of its own. Every key is chmod 600.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringsync::test {

class TlsCertificates {
 public:
  TlsCertificates() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ringsync-tls-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    openssl("ecparam -name prime256v1 -genkey -noout -out ca.key");
    openssl("req -x509 -new -key ca.key -subj /CN=ringsync-test-ca -days 2 -out ca.pem");
    issue("node", "ca");
    openssl("ecparam -name prime256v1 -genkey -noout -out rogue-ca.key");
    openssl("req -x509 -new -key rogue-ca.key -subj /CN=rogue-ca -days 2 -out rogue-ca.pem");
    issue("rogue", "rogue-ca");
    // Trusting both: a rogue that accepts node 0, so that node 0 is the one
    // that must refuse it.
    std::ofstream(file("both-cas.pem")) << text(file("ca.pem")) << text(file("rogue-ca.pem"));
  }
  ~TlsCertificates() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TlsCertificates(const TlsCertificates&) = delete;
  TlsCertificates& operator=(const TlsCertificates&) = delete;

  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  // Runs `openssl ARGS` in the folder; throws with its output when it fails.
  void openssl(const std::string& args) const {
    const std::string command = "cd '" + dir_ + "' && openssl " + args + " >> openssl.log 2>&1";
    if (std::system(command.c_str()) != 0)
      throw std::runtime_error("openssl " + args + " failed:\n" + text(file("openssl.log")));
  }

 private:
  static std::string text(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  void issue(const std::string& name, const std::string& ca) const {
    std::ofstream(file(name + ".ext")) << "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n";
    openssl("ecparam -name prime256v1 -genkey -noout -out " + name + ".key");
    ::chmod(file(name + ".key").c_str(), 0600);
    openssl("req -new -key " + name + ".key -subj /CN=ringsync-" + name + " -out " + name + ".csr");
    openssl("x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca + ".key -CAcreateserial -days 2 " +
            "-extfile " + name + ".ext -out " + name + ".pem");
  }
  std::string dir_;
};

}  // namespace ringsync::test
