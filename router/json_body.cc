#include "router/json_body.h"

#include <string>

namespace llm::router {

namespace {

using nlohmann::json;

// nlohmann's DOM builder behind a depth counter: start_object / start_array past the limit
// return false, which ends sax_parse at once (before the deep value exists).
class DepthLimitedSax {
 public:
  DepthLimitedSax(json* root, int max_depth) : dom_(*root, false), max_depth_(max_depth) {}

  bool too_deep() const { return too_deep_; }
  bool errored() const { return dom_.is_errored(); }

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool start_object(std::size_t n) { return Enter() && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return Enter() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& ex) {
    return dom_.parse_error(position, token, ex);
  }

 private:
  bool Enter() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
};

}  // namespace

std::optional<ApiError> ParseJsonObjectBody(std::string_view body, json* out, int max_depth) {
  DepthLimitedSax sax(out, max_depth);
  const bool ok = json::sax_parse(body, &sax);
  if (sax.too_deep()) {
    *out = nullptr;  // what was built is at most max_depth deep
    return InvalidParam("", "The request body is nested deeper than the limit of " +
                                std::to_string(max_depth) + " levels of arrays and objects");
  }
  if (!ok || sax.errored()) {
    *out = nullptr;
    return InvalidParam("", "The request body is not valid JSON");
  }
  if (!out->is_object()) return InvalidParam("", "The request body must be a JSON object");
  return std::nullopt;
}

}  // namespace llm::router
