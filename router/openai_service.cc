#include "router/openai_service.h"

#include <ctime>
#include <map>
#include <random>

#include "common/version.h"
#include "router/api_error.h"
#include "router/chat_prompt.h"
#include "router/generation_job.h"

namespace llm::router {

using nlohmann::json;

namespace {

HttpResponse ErrorResponse(const ApiError& e) {
  return ApiErrorResponse(e);
}

HttpResponse JsonResponse(const json& body) {
  return {200, "application/json", JsonText(body), {}};
}

std::string RandomId(const char* prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

// Counts each response of one route as it starts (RouterMetrics::CountResponse) and forwards
// everything to the connection's sink.
class CountingSink final : public ResponseSink {
 public:
  CountingSink(std::shared_ptr<ResponseSink> inner, std::shared_ptr<RouterMetrics> metrics,
               std::string route)
      : inner_(std::move(inner)), metrics_(std::move(metrics)), route_(std::move(route)) {}
  void Respond(HttpResponse response) override {
    metrics_->CountResponse(route_, response.status);
    inner_->Respond(std::move(response));
  }
  void BeginStream(int status, const std::string& content_type) override {
    metrics_->CountResponse(route_, status);
    inner_->BeginStream(status, content_type);
  }
  void StreamWrite(std::string data) override { inner_->StreamWrite(std::move(data)); }
  void EndStream() override { inner_->EndStream(); }
  void Post(std::function<void()> fn) override { inner_->Post(std::move(fn)); }
  void WhenWritable(std::function<void()> fn) override { inner_->WhenWritable(std::move(fn)); }
  bool closed() const override { return inner_->closed(); }

 private:
  std::shared_ptr<ResponseSink> inner_;
  std::shared_ptr<RouterMetrics> metrics_;
  std::string route_;
};

// Answers through the sink and reports that nothing is pending.
std::shared_ptr<PendingExchange> Answer(const std::shared_ptr<ResponseSink>& sink,
                                        HttpResponse response) {
  sink->Respond(std::move(response));
  return nullptr;
}

// Starts the job on the connection's strand, where all its callbacks run (Handle runs on a
// work thread). A job that answers at once (e.g. no upstream) ends the exchange there.
std::shared_ptr<PendingExchange> Launch(JobSpec spec, std::shared_ptr<const Tokenizer> tokenizer,
                                        UpstreamPool& pool,
                                        const std::shared_ptr<ResponseSink>& sink) {
  auto job = std::make_shared<GenerationJob>(std::move(spec), std::move(tokenizer), pool, sink);
  sink->Post([job] { job->Start(); });
  return job;
}

}  // namespace

OpenAiService::OpenAiService(ServiceOptions options, std::shared_ptr<const Tokenizer> tokenizer,
                             UpstreamPool& pool)
    : options_(std::move(options)),
      tokenizer_(std::move(tokenizer)),
      pool_(pool),
      metrics_(std::make_shared<RouterMetrics>(options_.limits.served_model_name)) {
  started_at_ = static_cast<int64_t>(std::time(nullptr));
  const std::string& source =
      options_.chat_template.empty() ? tokenizer_->chat_template() : options_.chat_template;
  if (source.empty()) {
    template_status_ = FailedPrecondition(
        "this model has no chat template (tokenizer_config.json has no chat_template); use "
        "/v1/completions");
    return;
  }
  auto parsed = ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    template_status_ = parsed.status();
    return;
  }
  template_ = std::move(parsed).value();
}

std::shared_ptr<PendingExchange> OpenAiService::Handle(
    const HttpRequest& request, const std::shared_ptr<ResponseSink>& connection) {
  static const std::map<std::string, std::string> kRoutes = {{"/v1/chat/completions", "POST"},
                                                             {"/v1/completions", "POST"},
                                                             {"/v1/models", "GET"},
                                                             {"/health", "GET"},
                                                             {"/livez", "GET"},
                                                             {"/readyz", "GET"},
                                                             {"/version", "GET"},
                                                             {"/metrics", "GET"},
                                                             {"/tokenize", "POST"},
                                                             {"/detokenize", "POST"}};
  // Known routes by name; any other path is "other" (a label per path would let clients grow
  // the metrics without bound).
  const std::string route_label = kRoutes.count(request.path) ? request.path : "other";
  const std::shared_ptr<ResponseSink> sink =
      std::make_shared<CountingSink>(connection, metrics_, route_label);
  if (!Authorized(request)) {
    const bool missing = request.authorization.empty();
    ApiError e = HttpError(
        401, missing ? "You didn't provide an API key. Send it in the Authorization header "
                       "(Authorization: Bearer YOUR_KEY)."
                     : "Incorrect API key provided.");
    e.code = "invalid_api_key";
    HttpResponse r = ErrorResponse(e);
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return Answer(sink, std::move(r));
  }
  auto route = kRoutes.find(request.path);
  if (route == kRoutes.end()) {
    return Answer(sink, ErrorResponse(HttpError(404, "Not found: " + request.path)));
  }
  if (request.method != route->second) {
    HttpResponse r =
        ErrorResponse(HttpError(405, "Method " + request.method + " is not allowed for " +
                                         request.path + "; use " + route->second));
    r.headers.emplace_back("Allow", route->second);
    return Answer(sink, std::move(r));
  }
  const std::string& path = request.path;
  // /health and /readyz: some upstream can generate (readiness); /livez: this process serves
  // HTTP (liveness: a restart would not help while only the coordinators are down).
  if (path == "/health" || path == "/readyz") return Answer(sink, Health());
  if (path == "/livez") return Answer(sink, JsonResponse({{"status", "ok"}}));
  if (path == "/v1/models") return Answer(sink, Models());
  if (path == "/metrics") return Answer(sink, Metrics());
  if (path == "/version") {
    return Answer(sink, JsonResponse({{"version", Version()}, {"commit", GitCommit()}}));
  }
  if (path == "/tokenize") return Answer(sink, Tokenize(request.body));
  if (path == "/detokenize") return Answer(sink, Detokenize(request.body));
  if (path == "/v1/chat/completions") return Chat(request.body, sink);
  return Completions(request.body, sink);
}

// Every route needs a key when keys are configured (unknown routes too: a client without a key
// learns nothing), except the probes (/health, /livez, /readyz) unless the operator protects
// them.
bool OpenAiService::Authorized(const HttpRequest& request) const {
  if (!options_.api_keys.enabled()) return true;
  const bool probe =
      request.path == "/health" || request.path == "/livez" || request.path == "/readyz";
  if (probe && !options_.health_requires_key) return true;
  return options_.api_keys.Accepts(request.authorization);
}

HttpResponse OpenAiService::Health() const {
  if (pool_.AnyHealthy()) return JsonResponse({{"status", "ok"}});
  return ErrorResponse(ToApiError(Unavailable("no coordinator is available")));
}

HttpResponse OpenAiService::Metrics() const {
  const auto [open, busy] = server_gauges_ ? server_gauges_() : std::pair<int, int>{0, 0};
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_->Render(pool_.FetchStats(std::chrono::milliseconds(1000)), open, busy);
  return r;
}

HttpResponse OpenAiService::Models() const {
  json model = {{"id", limits_.served_model_name},
                {"object", "model"},
                {"created", started_at_},
                {"owned_by", "llmserve"},
                {"root", limits_.served_model_name}};
  auto limits = pool_.Limits();
  if (limits.ok()) model["max_model_len"] = limits->max_model_len;
  return JsonResponse({{"object", "list"}, {"data", json::array({model})}});
}

int64_t OpenAiService::VocabSize(const ModelLimits& limits) const {
  return limits.vocab_size > 0 ? limits.vocab_size : tokenizer_->vocab_size();
}

StatusOr<std::vector<int32_t>> OpenAiService::ChatPromptIds(json messages,
                                                            bool add_generation_prompt, json kwargs,
                                                            bool add_special_tokens) const {
  if (!template_) return InvalidArgument(template_status_.message());
  json context = kwargs.is_object() ? std::move(kwargs) : json::object();
  context["messages"] = std::move(messages);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = tokenizer_->bos_token();
  context["eos_token"] = tokenizer_->eos_token();
  LLM_ASSIGN_OR_RETURN(ChatPrompt prompt,
                       RenderChatPrompt(*template_, *tokenizer_, std::move(context),
                                        /*protect_contents=*/!options_.special_tokens_in_messages));
  return EncodeChatPrompt(*tokenizer_, prompt, add_special_tokens);
}

HttpResponse OpenAiService::Tokenize(const std::string& body) const {
  TokenizeRequest req;
  if (auto e = ParseTokenizeRequest(body, limits_, &req)) return ErrorResponse(*e);
  std::vector<int32_t> ids;
  if (req.has_messages) {
    auto chat_ids = ChatPromptIds(std::move(req.messages), req.add_generation_prompt,
                                  std::move(req.template_kwargs), req.add_special_tokens);
    if (!chat_ids.ok()) return ErrorResponse(ToApiError(chat_ids.status(), "messages"));
    ids = std::move(chat_ids).value();
  } else {
    ids = tokenizer_->Encode(req.prompt, req.add_special_tokens);
  }
  json out = {{"count", ids.size()}, {"tokens", ids}, {"max_model_len", nullptr}};
  auto limits = pool_.Limits();
  if (limits.ok()) out["max_model_len"] = limits->max_model_len;
  return JsonResponse(out);
}

HttpResponse OpenAiService::Detokenize(const std::string& body) const {
  DetokenizeRequest req;
  if (auto e = ParseDetokenizeRequest(body, limits_, &req)) return ErrorResponse(*e);
  if (auto e = CheckTokenIds(req.tokens, tokenizer_->vocab_size(), "tokens")) {
    return ErrorResponse(*e);
  }
  return JsonResponse({{"prompt", tokenizer_->Decode(req.tokens)}});
}

std::shared_ptr<PendingExchange> OpenAiService::Chat(const std::string& body,
                                                     const std::shared_ptr<ResponseSink>& sink) {
  ChatRequest req;
  if (auto e = ParseChatRequest(body, limits_, &req)) return Answer(sink, ErrorResponse(*e));
  auto limits = pool_.Limits();
  if (!limits.ok()) return Answer(sink, ErrorResponse(ToApiError(limits.status())));
  auto prompt_ids = ChatPromptIds(std::move(req.messages), req.add_generation_prompt,
                                  std::move(req.template_kwargs), /*add_special_tokens=*/false);
  if (!prompt_ids.ok()) {
    return Answer(sink, ErrorResponse(ToApiError(prompt_ids.status(), "messages")));
  }
  std::vector<int32_t> ids = std::move(prompt_ids).value();
  if (ids.empty()) {
    return Answer(sink, ErrorResponse(InvalidParam("messages", "the rendered prompt is empty")));
  }
  GenerationOptions& o = req.options;
  if (auto e = CheckContextLength(static_cast<int64_t>(ids.size()), limits->max_model_len,
                                  "messages", &o)) {
    return Answer(sink, ErrorResponse(*e));
  }
  if (auto e = CheckTokenIds(o.stop_token_ids, VocabSize(*limits), "stop_token_ids")) {
    return Answer(sink, ErrorResponse(*e));
  }
  JobSpec spec;
  spec.chat = true;
  spec.meta = {RandomId("chatcmpl-"), static_cast<int64_t>(std::time(nullptr)),
               limits_.served_model_name};
  spec.prompt_tokens = static_cast<int64_t>(ids.size());
  spec.timeout = options_.request_timeout;
  spec.metrics = metrics_;
  auto shared_ids = std::make_shared<const std::vector<int32_t>>(std::move(ids));
  for (int j = 0; j < o.n; ++j) {
    JobChoiceSpec c;
    c.index = j;
    c.prompt_ids = shared_ids;
    if (o.sampling.seed) c.seed = *o.sampling.seed + static_cast<uint64_t>(j);
    spec.choices.push_back(std::move(c));
  }
  spec.options = std::move(o);
  return Launch(std::move(spec), tokenizer_, pool_, sink);
}

std::shared_ptr<PendingExchange> OpenAiService::Completions(
    const std::string& body, const std::shared_ptr<ResponseSink>& sink) {
  CompletionRequest req;
  if (auto e = ParseCompletionRequest(body, limits_, &req)) return Answer(sink, ErrorResponse(*e));
  auto limits = pool_.Limits();
  if (!limits.ok()) return Answer(sink, ErrorResponse(ToApiError(limits.status())));
  GenerationOptions& o = req.options;
  if (auto e = CheckTokenIds(o.stop_token_ids, VocabSize(*limits), "stop_token_ids")) {
    return Answer(sink, ErrorResponse(*e));
  }
  JobSpec spec;
  spec.chat = false;
  spec.meta = {RandomId("cmpl-"), static_cast<int64_t>(std::time(nullptr)),
               limits_.served_model_name};
  spec.timeout = options_.request_timeout;
  spec.metrics = metrics_;
  for (size_t p = 0; p < req.prompts.size(); ++p) {
    CompletionPrompt& prompt = req.prompts[p];
    std::vector<int32_t> ids =
        prompt.is_token_ids ? std::move(prompt.token_ids) : tokenizer_->Encode(prompt.text, true);
    if (auto e = CheckTokenIds(ids, VocabSize(*limits), "prompt")) {
      return Answer(sink, ErrorResponse(*e));
    }
    if (ids.empty()) {
      return Answer(sink, ErrorResponse(InvalidParam("prompt", "the prompt is empty")));
    }
    if (auto e = CheckContextLength(static_cast<int64_t>(ids.size()), limits->max_model_len,
                                    "prompt", &o)) {
      return Answer(sink, ErrorResponse(*e));
    }
    spec.prompt_tokens += static_cast<int64_t>(ids.size());
    std::shared_ptr<const std::string> echo;
    if (req.echo) {
      echo = std::make_shared<const std::string>(
          prompt.is_token_ids ? tokenizer_->Decode(ids, o.skip_special_tokens) : prompt.text);
    }
    auto shared_ids = std::make_shared<const std::vector<int32_t>>(std::move(ids));
    for (int j = 0; j < o.n; ++j) {
      JobChoiceSpec c;
      c.index = static_cast<int>(p) * o.n + j;
      c.prompt_ids = shared_ids;
      c.echo_text = echo;
      if (o.sampling.seed) c.seed = *o.sampling.seed + static_cast<uint64_t>(j);
      spec.choices.push_back(std::move(c));
    }
  }
  spec.options = std::move(o);
  return Launch(std::move(spec), tokenizer_, pool_, sink);
}

}  // namespace llm::router
