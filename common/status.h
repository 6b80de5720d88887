// Status / StatusOr: the one error type of every process (see STYLE.md #7).
// A Status is either ok or carries a code and a message meant for a user: it names the file,
// key or tensor at fault. It is converted to gRPC status at the coordinator's edge and to
// OpenAI error JSON at the router's edge, nowhere else.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace llm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad user input or config value
  kNotFound,            // missing file, key or tensor
  kFailedPrecondition,  // state does not allow the call (e.g. draining)
  kOutOfRange,          // too long, too large
  kResourceExhausted,   // out of KV blocks or memory
  kUnimplemented,       // unsupported architecture, dtype, option
  kDataLoss,            // truncated or corrupt file
  kInternal,            // a bug: an invariant did not hold
  kUnavailable,         // a peer cannot be reached
  kCancelled,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message"
  std::string ToString() const;
  // Returns a copy with "context: " put in front of the message.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status OutOfRange(std::string m) {
  return {StatusCode::kOutOfRange, std::move(m)};
}
inline Status Unimplemented(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status DataLoss(std::string m) {
  return {StatusCode::kDataLoss, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr constructed from an ok Status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace llm

#define LLM_CONCAT_INNER(a, b) a##b
#define LLM_CONCAT(a, b) LLM_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not ok.
#define LLM_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::llm::Status llm_status_ = (expr);        \
    if (!llm_status_.ok()) return llm_status_; \
  } while (0)

// `LLM_ASSIGN_OR_RETURN(auto x, StatusOrExpr)`.
#define LLM_ASSIGN_OR_RETURN(lhs, expr) \
  LLM_ASSIGN_OR_RETURN_IMPL(LLM_CONCAT(llm_statusor_, __LINE__), lhs, expr)
#define LLM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
