// The coordinator's gRPC statuses as HTTP answers (issue 6), in one table: shutting down /
// draining / unhealthy → 503, deadline → 504 "timeout", api_version mismatch → 500 naming both
// versions, a full or timed-out waiting queue → 429 with Retry-After and rate_limit_error.
#include "router/upstream_errors.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace llm::router {
namespace {

using nlohmann::json;

const char* kAddress = "10.0.0.7:50051";

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(UpstreamErrors, UnavailableIs503) {
  for (const char* why : {"the coordinator is shutting down",
                          "the coordinator is draining: it admits no new requests",
                          "the cluster is not healthy: rank 1 has not answered for 5 s"}) {
    const ApiError e = UpstreamApiError(grpc::StatusCode::UNAVAILABLE, why, kAddress);
    EXPECT_EQ(e.http_status, 503) << why;
    EXPECT_EQ(e.type, "service_unavailable_error");
    EXPECT_NE(e.message.find(why), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(kAddress), std::string::npos) << e.message;
    EXPECT_EQ(e.retry_after_s, 0);
  }
}

TEST(UpstreamErrors, DeadlineIs504Timeout) {
  const ApiError e =
      UpstreamApiError(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded", kAddress);
  EXPECT_EQ(e.http_status, 504);
  EXPECT_EQ(e.type, "timeout");
  EXPECT_NE(e.message.find("router.request_timeout_s"), std::string::npos) << e.message;
}

TEST(UpstreamErrors, ApiVersionMismatchIs500NamingBothVersions) {
  const ApiError e = UpstreamApiError(
      grpc::StatusCode::FAILED_PRECONDITION,
      "api_version 1 is not supported; this coordinator speaks version 2", kAddress);
  EXPECT_EQ(e.http_status, 500);
  EXPECT_EQ(e.type, "server_error");
  EXPECT_NE(e.message.find("api_version " + std::to_string(kGenerateApiVersion)), std::string::npos)
      << e.message;
  EXPECT_NE(e.message.find("speaks version 2"), std::string::npos) << e.message;
  // Another precondition (the engine cannot serve right now) is a 503, not a version problem.
  EXPECT_EQ(UpstreamApiError(grpc::StatusCode::FAILED_PRECONDITION,
                             "the engine's followers were shut down", kAddress)
                .http_status,
            503);
}

TEST(UpstreamErrors, ResourceExhaustedIs429WithRetryAfter) {
  const ApiError e = UpstreamApiError(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                      "the waiting queue is full (256 requests)", kAddress);
  EXPECT_EQ(e.http_status, 429);
  EXPECT_EQ(e.type, "rate_limit_error");
  EXPECT_EQ(e.code, "rate_limit_exceeded");
  EXPECT_EQ(e.retry_after_s, kUpstreamRetryAfterS);
  const HttpResponse r = ApiErrorResponse(e);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Header(r, "Retry-After"), std::to_string(kUpstreamRetryAfterS));
  const json body = json::parse(r.body);
  EXPECT_EQ(body["error"]["type"], "rate_limit_error");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("waiting queue is full"),
            std::string::npos);
}

TEST(UpstreamErrors, RequestErrorsKeepTheirMeaning) {
  EXPECT_EQ(UpstreamApiError(grpc::StatusCode::INVALID_ARGUMENT, "bad", kAddress).http_status, 400);
  EXPECT_EQ(UpstreamApiError(grpc::StatusCode::OUT_OF_RANGE, "too long", kAddress).http_status,
            400);
  EXPECT_EQ(UpstreamApiError(grpc::StatusCode::UNIMPLEMENTED, "no", kAddress).http_status, 400);
  EXPECT_EQ(UpstreamApiError(grpc::StatusCode::NOT_FOUND, "x", kAddress).http_status, 404);
  for (auto code : {grpc::StatusCode::INTERNAL, grpc::StatusCode::UNKNOWN,
                    grpc::StatusCode::CANCELLED, grpc::StatusCode::DATA_LOSS}) {
    const ApiError e = UpstreamApiError(code, "boom", kAddress);
    EXPECT_EQ(e.http_status, 500);
    EXPECT_EQ(e.type, "server_error");
  }
  // The 400s carry the coordinator's words only (they describe the client's request).
  EXPECT_EQ(UpstreamApiError(grpc::StatusCode::INVALID_ARGUMENT, "bad", kAddress).message, "bad");
}

// Errors without Retry-After render without the header.
TEST(UpstreamErrors, ResponseHasRetryAfterOnlyWhenSet) {
  EXPECT_EQ(Header(ApiErrorResponse(HttpError(503, "x")), "Retry-After"), "");
}

}  // namespace
}  // namespace llm::router
