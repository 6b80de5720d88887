#include "router/api_error.h"

#include <nlohmann/json.hpp>

namespace llm::router {

namespace {

const char* TypeFor(int http_status) {
  switch (http_status) {
    case 400:
    case 413:
    case 431:
    case 401:  // what OpenAI sends for a missing or wrong key (code invalid_api_key)
      return "invalid_request_error";
    case 404:
      return "not_found_error";
    case 405:
      return "method_not_allowed_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    case 504:
      return "timeout";
    default:
      return "server_error";
  }
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnavailable:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kResourceExhausted:
      return 503;
    default:
      return 500;
  }
}

}  // namespace

ApiError HttpError(int http_status, const std::string& message, const std::string& param) {
  return ApiError{http_status, message, TypeFor(http_status), param, ""};
}

ApiError ToApiError(const Status& status, const std::string& param) {
  ApiError e = HttpError(HttpStatusFor(status.code()), status.message(), param);
  if (status.code() == StatusCode::kNotFound && param == "model") e.code = "model_not_found";
  if (e.message.empty()) e.message = StatusCodeName(status.code());
  return e;
}

ApiError InvalidParam(const std::string& param, const std::string& message) {
  return ToApiError(InvalidArgument(message), param);
}

std::string ApiErrorJson(const ApiError& error) {
  nlohmann::json e = {
      {"message", error.message}, {"type", error.type}, {"param", nullptr}, {"code", nullptr}};
  if (!error.param.empty()) e["param"] = error.param;
  if (!error.code.empty()) e["code"] = error.code;
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false,
                                           nlohmann::json::error_handler_t::replace);
}

HttpResponse ApiErrorResponse(const ApiError& error) {
  HttpResponse r{error.http_status, "application/json", ApiErrorJson(error), {}};
  if (error.retry_after_s > 0) {
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  }
  return r;
}

}  // namespace llm::router
