// Fuzz target (a): request bodies -> the OpenAI request parsers (router/openai_request.h) and the
// depth-limited JSON body parser (router/json_body.h). The first byte picks the parser, the rest
// is the body. Every parser must return a value or an ApiError; never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "router/json_body.h"
#include "router/openai_request.h"

using namespace llm::router;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestLimits limits;
  limits.served_model_name = "demo";
  limits.allow_priority = (selector & 0x80) != 0;
  switch (selector % 5) {
    case 0: {
      ChatRequest r;
      if (!ParseChatRequest(body, limits, &r)) {
        // The parsed request feeds the context check next in the router.
        (void)CheckContextLength(static_cast<int64_t>(r.messages.size()), 4096, "messages",
                                 &r.options);
        (void)r.messages.dump();
      }
      break;
    }
    case 1: {
      CompletionRequest r;
      if (!ParseCompletionRequest(body, limits, &r)) {
        for (const auto& p : r.prompts) {
          if (p.is_token_ids) (void)CheckTokenIds(p.token_ids, 32000, "prompt");
          (void)CheckContextLength(static_cast<int64_t>(p.token_ids.size() + p.text.size()), 2048,
                                   "prompt", &r.options);
        }
      }
      break;
    }
    case 2: {
      TokenizeRequest r;
      (void)ParseTokenizeRequest(body, limits, &r);
      break;
    }
    case 3: {
      DetokenizeRequest r;
      if (!ParseDetokenizeRequest(body, limits, &r)) (void)CheckTokenIds(r.tokens, 32000, "tokens");
      break;
    }
    default: {
      nlohmann::json j;
      if (!ParseJsonObjectBody(body, &j, 1 + (selector >> 3) % 16)) (void)j.dump();
      break;
    }
  }
  return 0;
}
