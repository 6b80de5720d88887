// TLS on the router's HTTP port (router.tls_cert_file, router.tls_key_file): the server
// context that HttpServer's HTTPS sessions share.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/status.h"

namespace llm::router {

// A TLS 1.2+ server context from `cert_file` (PEM certificate, or chain with the leaf first) and
// `key_file` (its PEM private key). Errors name the key and the file: unreadable, not PEM, or a
// key that does not belong to the certificate.
StatusOr<std::unique_ptr<boost::asio::ssl::context>> MakeTlsServerContext(
    const std::string& cert_file, const std::string& key_file);

}  // namespace llm::router
