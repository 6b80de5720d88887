// Request bodies → JSON with a nesting limit checked while parsing. nlohmann's parser is
// iterative, but everything that walks a parsed value afterwards (copies, the chat template,
// dump) recurses, so a body nested 200,000 deep must never become a json value at all: the SAX
// handler below stops the parse at the first value deeper than the limit.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "router/api_error.h"

namespace llm::router {

// Deepest nesting of arrays and objects a request body may have (the body's own object is
// level 1). Fixed: OpenAI requests need a handful of levels; chat_template_kwargs a few more.
inline constexpr int kMaxJsonDepth = 64;

// Parses `body` into `out`. 400 (invalid_request_error) for invalid JSON, for a top level that
// is not an object, and for nesting deeper than `max_depth` (the message names the limit);
// nothing deeper than the limit is ever built.
std::optional<ApiError> ParseJsonObjectBody(std::string_view body, nlohmann::json* out,
                                            int max_depth = kMaxJsonDepth);

}  // namespace llm::router
