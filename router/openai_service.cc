#include "router/openai_service.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <optional>

#include "common/log.h"
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

// The sink of one exchange: counts its response by route (RouterMetrics::CountResponse), puts
// the request id into error bodies, and for generation requests writes the request's one log
// line when the exchange is over (its last holder lets go: the job after its last upstream
// call, so a client that hangs up is logged too).
class ExchangeSink final : public ResponseSink {
 public:
  ExchangeSink(std::shared_ptr<ResponseSink> inner, std::shared_ptr<RouterMetrics> metrics,
               std::string route, std::string request_id)
      : inner_(std::move(inner)),
        metrics_(std::move(metrics)),
        route_(std::move(route)),
        request_id_(std::move(request_id)) {}
  ~ExchangeSink() override {
    if (outcome_) LogRequest();
  }

  // Makes this a logged generation request; the job fills the returned record.
  std::shared_ptr<RequestRecord> LogAsRequest(std::string model) {
    model_ = std::move(model);
    outcome_ = std::make_shared<RequestRecord>();
    return outcome_;
  }

  void Respond(HttpResponse response) override {
    Started(response.status);
    if (response.status >= 400) AddRequestId(&response);
    Ended();
    inner_->Respond(std::move(response));
  }
  void BeginStream(int status, const std::string& content_type) override {
    Started(status);
    inner_->BeginStream(status, content_type);
  }
  void StreamWrite(std::string data) override { inner_->StreamWrite(std::move(data)); }
  void EndStream() override {
    Ended();
    inner_->EndStream();
  }
  void Post(std::function<void()> fn) override { inner_->Post(std::move(fn)); }
  void WhenWritable(std::function<void()> fn) override { inner_->WhenWritable(std::move(fn)); }
  bool closed() const override { return inner_->closed(); }

 private:
  void Started(int status) {
    status_ = status;
    metrics_->CountResponse(route_, status);
  }
  void Ended() { ended_ = std::chrono::steady_clock::now(); }

  // {"error":{...}} gets "request_id" beside message/type/param/code.
  void AddRequestId(HttpResponse* response) {
    json body = json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return;
    if (body["error"].contains("message") && body["error"]["message"].is_string()) {
      error_message_ = body["error"]["message"].get<std::string>();
    }
    body["error"]["request_id"] = request_id_;
    response->body = JsonText(body);
  }

  void LogRequest() const {
    const RequestRecord& r = *outcome_;
    const auto end = ended_.value_or(std::chrono::steady_clock::now());
    nlohmann::ordered_json fields = {
        {"request_id", request_id_},
        {"route", route_},
        {"model", model_},
        {"status", status_},
        {"prompt_tokens", r.prompt_tokens},
        {"completion_tokens", r.generation_tokens},
        {"ttft_ms", r.ttft_s < 0 ? -1 : static_cast<int64_t>(r.ttft_s * 1000 + 0.5)},
        {"total_ms", static_cast<int64_t>(
                         std::chrono::duration<double, std::milli>(end - started_).count() + 0.5)}};
    std::string reasons;
    for (const auto& f : r.finish_reasons) reasons += (reasons.empty() ? "" : ",") + f;
    fields["finish_reason"] = reasons.empty() ? "none" : reasons;
    if (!r.error.empty() || !error_message_.empty()) {
      fields["error"] = r.error.empty() ? error_message_ : r.error;
    }
    if (!ended_) fields["client_closed"] = true;
    LogEvent(status_ < 400 && ended_ ? LogLevel::kInfo : LogLevel::kWarn, "request finished",
             fields);
  }

  std::shared_ptr<ResponseSink> inner_;
  std::shared_ptr<RouterMetrics> metrics_;
  std::string route_;
  std::string request_id_;
  std::string model_;
  std::shared_ptr<RequestRecord> outcome_;  // null: not a logged generation request
  std::string error_message_;               // of an error answer
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> ended_;
  int status_ = 0;
};

// `allowed`: "GET" or a list "GET, POST".
bool AllowsMethod(const std::string& allowed, const std::string& method) {
  size_t start = 0;
  while (start <= allowed.size()) {
    const size_t end = std::min(allowed.find(", ", start), allowed.size());
    if (allowed.compare(start, end - start, method) == 0) return true;
    start = end + 2;
  }
  return false;
}

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
  tool_parser_ =
      options_.tool_call_parser == "auto"
          ? DetectToolParser(source)
          : ToolParserFromName(options_.tool_call_parser).value_or(ToolParserKind::kNone);
  reasoning_parser_ =
      ReasoningParserFromName(options_.reasoning_parser).value_or(ReasoningParserKind::kNone);
  null_content_for_calls_ = source.find("['content'] is none") != std::string::npos ||
                            source.find("content is none") != std::string::npos;
  arguments_as_mapping_ = source.find("arguments | tojson") != std::string::npos ||
                          source.find("arguments|tojson") != std::string::npos;
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
                                                             {"/upstreams", "GET, POST, DELETE"},
                                                             {"/detokenize", "POST"}};
  // Known routes by name; any other path is "other" (a label per path would let clients grow
  // the metrics without bound).
  const std::string route_label = kRoutes.count(request.path) ? request.path : "other";
  const auto exchange =
      std::make_shared<ExchangeSink>(connection, metrics_, route_label, request.request_id);
  const std::shared_ptr<ResponseSink> sink = exchange;
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
  if (!AllowsMethod(route->second, request.method)) {
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
  if (path == "/upstreams") return Answer(sink, Upstreams(request));
  if (path == "/tokenize") return Answer(sink, Tokenize(request.body));
  if (path == "/detokenize") return Answer(sink, Detokenize(request.body));
  const RequestContext context{request.request_id,
                               exchange->LogAsRequest(limits_.served_model_name)};
  if (path == "/v1/chat/completions") return Chat(request.body, context, sink);
  return Completions(request.body, context, sink);
}

// Every route needs a key when keys are configured (unknown routes too: a client without a key
// learns nothing), except the probes (/health, /livez, /readyz) unless the operator protects
// them.
bool OpenAiService::Authorized(const HttpRequest& request) const {
  if (request.path == "/upstreams") return true;  // the admin token instead: AdminAuthorized
  if (!options_.api_keys.enabled()) return true;
  const bool probe =
      request.path == "/health" || request.path == "/livez" || request.path == "/readyz";
  if (probe && !options_.health_requires_key) return true;
  return options_.api_keys.Accepts(request.authorization);
}

// The admin routes change (or show) where requests go: the admin token, or, when none is set,
// a client on this host (as the coordinator's Drain/Resume).
bool OpenAiService::AdminAuthorized(const HttpRequest& request) const {
  if (options_.admin_token.empty()) return request.from_loopback;
  return ConstantTimeEquals(request.authorization, "Bearer " + options_.admin_token);
}

// GET /upstreams: each coordinator's state; POST {"address": "host:port"} adds one (checked at
// once, 201), DELETE {"address": ...} removes one (its requests in flight finish there).
HttpResponse OpenAiService::Upstreams(const HttpRequest& request) {
  if (!AdminAuthorized(request)) {
    ApiError e = HttpError(
        options_.admin_token.empty() ? 403 : 401,
        options_.admin_token.empty()
            ? "/upstreams is for clients on the router's host unless router.admin_token (or "
              "LLM_ADMIN_TOKEN) is set"
            : "/upstreams needs 'Authorization: Bearer <router.admin_token>'");
    e.code = "admin_token_required";
    return ErrorResponse(e);
  }
  if (request.method == "GET") {
    json data = json::array();
    for (const UpstreamState& u : pool_.Snapshot()) {
      data.push_back({{"address", u.address},
                      {"healthy", u.healthy},
                      {"outstanding_requests", u.outstanding},
                      {"model", u.limits.model},
                      {"max_model_len", u.limits.max_model_len},
                      {"last_error", u.last_error}});
    }
    return JsonResponse({{"object", "list"}, {"data", data}});
  }
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("address") || !body["address"].is_string()) {
    return ErrorResponse(InvalidParam("address", "the body must be {\"address\": \"host:port\"}"));
  }
  const std::string address = body["address"].get<std::string>();
  const Status s = request.method == "POST" ? pool_.Add(address) : pool_.Remove(address);
  if (!s.ok()) {
    const int status = s.code() == StatusCode::kNotFound             ? 404
                       : s.code() == StatusCode::kFailedPrecondition ? 409
                                                                     : 400;
    return ErrorResponse(HttpError(status, s.message(), "address"));
  }
  for (const UpstreamState& u : pool_.Snapshot()) {
    if (u.address == address) {
      HttpResponse r = JsonResponse(
          {{"address", u.address}, {"healthy", u.healthy}, {"last_error", u.last_error}});
      r.status = 201;
      return r;
    }
  }
  return JsonResponse({{"address", address}, {"removed", true}});
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

StatusOr<std::vector<int32_t>> OpenAiService::ChatPromptIds(nlohmann::ordered_json messages,
                                                            bool add_generation_prompt, json kwargs,
                                                            nlohmann::ordered_json tools,
                                                            bool add_special_tokens) const {
  if (!template_) return InvalidArgument(template_status_.message());
  nlohmann::ordered_json context =
      kwargs.is_object() ? nlohmann::ordered_json(kwargs) : nlohmann::ordered_json::object();
  if (!tools.is_null()) context["tools"] = std::move(tools);
  // OpenAI sends tool-call arguments as a JSON string; such templates want the object.
  if (arguments_as_mapping_) ToolCallArgumentsAsMappings(messages);
  if (null_content_for_calls_) EmptyCallContentAsNull(messages);
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
    auto chat_ids =
        ChatPromptIds(std::move(req.messages), req.add_generation_prompt,
                      std::move(req.template_kwargs), std::move(req.tools), req.add_special_tokens);
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
                                                     const RequestContext& context,
                                                     const std::shared_ptr<ResponseSink>& sink) {
  ChatRequest req;
  if (auto e = ParseChatRequest(body, limits_, &req)) return Answer(sink, ErrorResponse(*e));
  auto limits = pool_.Limits();
  if (!limits.ok()) return Answer(sink, ErrorResponse(ToApiError(limits.status())));
  // tool_choice "none": the template gets no tools and no calls are parsed. "required" and a
  // named function: the tools go to the template, and structured output makes the model write
  // the calls as a JSON array (ForceToolCalls), read back by the json_array parser.
  const bool use_tools = !req.tools.is_null() && req.tool_choice != "none";
  auto prompt_ids = ChatPromptIds(std::move(req.messages), req.add_generation_prompt,
                                  std::move(req.template_kwargs),
                                  use_tools ? std::move(req.tools) : nlohmann::ordered_json(),
                                  /*add_special_tokens=*/false);
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
  spec.tool_parser = req.forced_tool_calls ? ToolParserKind::kJsonArray
                     : use_tools           ? tool_parser_
                                           : ToolParserKind::kNone;
  spec.reasoning_parser = reasoning_parser_;
  spec.meta = {"chatcmpl-" + context.request_id, static_cast<int64_t>(std::time(nullptr)),
               limits_.served_model_name};
  spec.request_id = context.request_id;
  spec.outcome = context.outcome;
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
    const std::string& body, const RequestContext& context,
    const std::shared_ptr<ResponseSink>& sink) {
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
  spec.meta = {"cmpl-" + context.request_id, static_cast<int64_t>(std::time(nullptr)),
               limits_.served_model_name};
  spec.request_id = context.request_id;
  spec.outcome = context.outcome;
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
