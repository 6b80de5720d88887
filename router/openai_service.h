// The OpenAI-compatible API over the upstream pool: routes, validation, chat template,
// tokenization, and the start of each GenerationJob. Stateless apart from the open exchanges.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/chat_template.h"
#include "common/tokenizer.h"
#include "router/api_keys.h"
#include "router/http_exchange.h"
#include "router/metrics.h"
#include "router/openai_request.h"
#include "router/reasoning_parser.h"
#include "router/tool_parser.h"
#include "router/upstream_pool.h"

namespace llm::router {

struct ServiceOptions {
  RequestLimits limits;  // the served model's name and what a request may ask for
  std::chrono::seconds request_timeout{600};
  ApiKeys api_keys;                  // none: authentication is off
  bool health_requires_key = false;  // false: /health answers without a key
  // The /upstreams admin routes need 'Authorization: Bearer <admin_token>'; empty: only
  // clients on this host may use them.
  std::string admin_token;
  // true: special-token text in message content becomes control tokens (vLLM's behaviour);
  // false: it is tokenized as text (router/chat_prompt.h).
  bool special_tokens_in_messages = false;
  // The chat template's source (model.chat_template); "": the tokenizer's.
  std::string chat_template;
  // router.tool_call_parser: "auto" (from the chat template's text), "none", "hermes",
  // "llama3_json", "mistral", "deepseek_v3" (router/tool_parser.h).
  std::string tool_call_parser = "auto";
  // router.reasoning_parser: "none", "deepseek_r1", "qwen3" (router/reasoning_parser.h).
  std::string reasoning_parser = "none";
};

// What a generation request carries besides its body: its id (X-Request-Id) and the record its
// job fills for the request's log line.
struct RequestContext {
  std::string request_id;
  std::shared_ptr<RequestRecord> outcome;
};

class OpenAiService final : public RequestHandler {
 public:
  // The chat template comes from the tokenizer (tokenizer_config.json); when it is missing or
  // outside the supported subset, chat requests get a 400 that says so.
  OpenAiService(ServiceOptions options, std::shared_ptr<const Tokenizer> tokenizer,
                UpstreamPool& pool);

  std::shared_ptr<PendingExchange> Handle(const HttpRequest& request,
                                          const std::shared_ptr<ResponseSink>& sink) override;

  // The HTTP server's open and busy connections, for /metrics (set once the server exists).
  void SetServerGauges(std::function<std::pair<int, int>()> gauges) {
    server_gauges_ = std::move(gauges);
  }

  // The chat template's status ("" when usable), for the start-up log.
  std::string chat_template_problem() const {
    return template_status_.ok() ? "" : template_status_.message();
  }

 private:
  bool Authorized(const HttpRequest& request) const;
  HttpResponse Health() const;
  HttpResponse Metrics() const;
  HttpResponse Models() const;
  HttpResponse Upstreams(const HttpRequest& request);
  bool AdminAuthorized(const HttpRequest& request) const;
  HttpResponse Tokenize(const std::string& body) const;
  HttpResponse Detokenize(const std::string& body) const;
  std::shared_ptr<PendingExchange> Chat(const std::string& body, const RequestContext& context,
                                        const std::shared_ptr<ResponseSink>& sink);
  std::shared_ptr<PendingExchange> Completions(const std::string& body,
                                               const RequestContext& context,
                                               const std::shared_ptr<ResponseSink>& sink);
  // Renders the chat template and tokenizes the result (message contents as text unless
  // special_tokens_in_messages). Takes the request's messages and kwargs by value: callers
  // move them in (no deep copy).
  // `tools` (null: none) goes to the template as `tools`.
  StatusOr<std::vector<int32_t>> ChatPromptIds(nlohmann::ordered_json messages,
                                               bool add_generation_prompt, nlohmann::json kwargs,
                                               nlohmann::ordered_json tools,
                                               bool add_special_tokens) const;
  int64_t VocabSize(const ModelLimits& limits) const;

  ServiceOptions options_;
  const RequestLimits& limits_ = options_.limits;
  std::shared_ptr<const Tokenizer> tokenizer_;
  UpstreamPool& pool_;
  std::optional<ChatTemplate> template_;
  Status template_status_;
  // The template applies tojson to tool-call arguments (Qwen3, Llama 3.1): they go to it as
  // mappings; otherwise (DeepSeek-V3 concatenates them) as the JSON strings clients send.
  bool arguments_as_mapping_ = false;
  // The template tests the content of a message with tool calls for none (DeepSeek-V3).
  bool null_content_for_calls_ = false;
  ToolParserKind tool_parser_ = ToolParserKind::kNone;
  ReasoningParserKind reasoning_parser_ = ReasoningParserKind::kNone;
  int64_t started_at_ = 0;
  std::shared_ptr<RouterMetrics> metrics_;
  std::function<std::pair<int, int>()> server_gauges_;
};

}  // namespace llm::router
