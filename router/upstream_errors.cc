#include "router/upstream_errors.h"

namespace llm::router {

ApiError UpstreamApiError(grpc::StatusCode code, const std::string& message,
                          const std::string& address) {
  const std::string from = "coordinator " + address;
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::UNIMPLEMENTED:
      return HttpError(400, message);
    case grpc::StatusCode::NOT_FOUND:
      return HttpError(404, message);
    case grpc::StatusCode::UNAVAILABLE:
      return HttpError(503, from + " is unavailable: " + message);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return HttpError(504, "The request did not finish within router.request_timeout_s (" + from +
                                ": " + message + ")");
    case grpc::StatusCode::FAILED_PRECONDITION:
      if (message.find("api_version") != std::string::npos) {
        return HttpError(500, "The router and " + from +
                                  " speak different API versions: this router sends "
                                  "api_version " +
                                  std::to_string(kGenerateApiVersion) +
                                  "; the coordinator says: " + message);
      }
      return HttpError(503, from + " cannot serve now: " + message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: {
      ApiError e = HttpError(429, from + " is overloaded: " + message + "; retry later");
      e.code = "rate_limit_exceeded";
      e.retry_after_s = kUpstreamRetryAfterS;
      return e;
    }
    case grpc::StatusCode::CANCELLED:
      return HttpError(500, from + " cancelled the request: " + message);
    default:
      return HttpError(500, from + ": " + message);
  }
}

}  // namespace llm::router
