// How the router answers a coordinator's gRPC status: the one table (issue 6). Every error that
// ends a Generate call goes through UpstreamApiError, so a status means the same HTTP answer
// whether it ends a plain response or arrives as the last event of a stream.
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include <cstdint>
#include <string>

#include "proto/llm.pb.h"
#include "router/api_error.h"

namespace llm::router {

// The api_version of every GenerateRequest this router sends (proto/llm.proto).
inline constexpr uint32_t kGenerateApiVersion = v1::API_VERSION_CURRENT;

// The seconds a client is asked to wait (Retry-After) when a coordinator's queue is full.
inline constexpr int kUpstreamRetryAfterS = 1;

// UNAVAILABLE (shutting down, draining, unhealthy, unreachable) → 503
//   service_unavailable_error;
// DEADLINE_EXCEEDED (router.request_timeout_s) → 504, type "timeout";
// FAILED_PRECONDITION naming api_version → 500 naming both versions; other
//   FAILED_PRECONDITION (the engine cannot serve now) → 503;
// RESOURCE_EXHAUSTED (the coordinator's waiting queue is full or the request waited past its
//   queue timeout) → 429 rate_limit_error with Retry-After;
// INVALID_ARGUMENT / OUT_OF_RANGE / UNIMPLEMENTED → 400; NOT_FOUND → 404;
// anything else (CANCELLED by the coordinator, INTERNAL, UNKNOWN, ...) → 500 server_error.
// `address` is the coordinator's host:port, named in the message.
ApiError UpstreamApiError(grpc::StatusCode code, const std::string& message,
                          const std::string& address);

}  // namespace llm::router
