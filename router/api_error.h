// OpenAI error responses. Every error the router sends goes through ToApiError (Status → HTTP
// status + error type) and ApiErrorJson (→ {"error":{"message","type","param","code"}}): the
// one place where errors become JSON (STYLE.md #7).
#pragma once

#include <string>

#include "common/status.h"
#include "router/http_exchange.h"

namespace llm::router {

struct ApiError {
  int http_status = 500;
  std::string message;
  std::string type;       // "invalid_request_error", "not_found_error", "server_error", ...
  std::string param;      // "" renders as null
  std::string code;       // "" renders as null
  int retry_after_s = 0;  // > 0: sent as Retry-After (429)
};

// Maps a Status of the router's own (validation, templates, no healthy upstream) to its HTTP
// status: INVALID_ARGUMENT/OUT_OF_RANGE/UNIMPLEMENTED → 400, NOT_FOUND → 404,
// UNAVAILABLE/FAILED_PRECONDITION/RESOURCE_EXHAUSTED → 503, anything else → 500. A
// coordinator's gRPC status is mapped by UpstreamApiError (router/upstream_errors.h).
ApiError ToApiError(const Status& status, const std::string& param = "");

// A 400 invalid_request_error naming `param`.
ApiError InvalidParam(const std::string& param, const std::string& message);

// An error with an explicit HTTP status (404 routes, 405, 413, 431).
ApiError HttpError(int http_status, const std::string& message, const std::string& param = "");

// {"error":{"message":...,"type":...,"param":...|null,"code":...|null}}
std::string ApiErrorJson(const ApiError& error);

// The whole HTTP response of an error: its status, the JSON, and Retry-After when set.
HttpResponse ApiErrorResponse(const ApiError& error);

}  // namespace llm::router
