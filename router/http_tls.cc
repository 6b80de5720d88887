#include "router/http_tls.h"

#include <openssl/ssl.h>

#include <fstream>
#include <iterator>

namespace llm::router {

namespace ssl = boost::asio::ssl;

namespace {

StatusOr<std::string> ReadPem(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(key + ": cannot read '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty() || text.size() > (1u << 20)) {
    return InvalidArgument(key + ": '" + path + "' is empty or larger than 1 MiB");
  }
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<ssl::context>> MakeTlsServerContext(const std::string& cert_file,
                                                             const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return InvalidArgument(
        std::string(cert_file.empty() ? "router.tls_cert_file" : "router.tls_key_file") +
        " is not set: router.tls_cert_file and router.tls_key_file go together");
  }
  LLM_ASSIGN_OR_RETURN(const std::string cert, ReadPem(cert_file, "router.tls_cert_file"));
  LLM_ASSIGN_OR_RETURN(const std::string key, ReadPem(key_file, "router.tls_key_file"));
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::no_compression | ssl::context::single_dh_use,
                   ec);
  if (ec) return Internal("TLS context: " + ec.message());
  ctx->use_certificate_chain(boost::asio::buffer(cert), ec);
  if (ec) {
    return InvalidArgument("router.tls_cert_file: '" + cert_file +
                           "' is not a PEM certificate: " + ec.message());
  }
  ctx->use_private_key(boost::asio::buffer(key), ssl::context::pem, ec);
  if (ec) {
    return InvalidArgument(
        "router.tls_key_file: '" + key_file +
        "' is not a PEM private key (or not the key of router.tls_cert_file): " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return InvalidArgument("router.tls_key_file: '" + key_file +
                           "' is not the private key of router.tls_cert_file '" + cert_file + "'");
  }
  return ctx;
}

}  // namespace llm::router
