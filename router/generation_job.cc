#include "router/generation_job.h"

#include <algorithm>

#include "router/api_error.h"
#include "router/stop_matcher.h"
#include "router/upstream_errors.h"

namespace llm::router {

using nlohmann::json;

struct GenerationJob::Choice {
  JobChoiceSpec spec;
  std::shared_ptr<GenerateStream> call;
  std::unique_ptr<IncrementalDecoder> decoder;
  std::unique_ptr<StopMatcher> matcher;
  std::unique_ptr<ReasoningStreamer> reasoning;  // stream with parsers
  std::unique_ptr<ToolCallStreamer> tools;
  std::string text;  // non-stream: everything emitted so far (after the echo)
  std::vector<TokenLogprob> logprobs;
  int64_t text_offset = 0;  // completions: offset of the next token's text
  int64_t completion_tokens = 0;
  int32_t prev_token = -1;
  std::string finish_reason;
  bool finished = false;  // the choice's text is complete
  bool done = false;      // its call reported on_done
};

namespace {

// OpenAI's finish_reason for the coordinator's (proto/llm.proto lists them all).
const char* FinishName(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_EOS:
    case v1::FINISH_REASON_STOP_TOKEN:
      return "stop";
    case v1::FINISH_REASON_MAX_TOKENS:
    case v1::FINISH_REASON_MAX_MODEL_LEN:
      return "length";
    case v1::FINISH_REASON_ABORT:
      return "abort";
    default:
      return "stop";
  }
}

}  // namespace

void ApplyChatParsers(ToolParserKind tools, ReasoningParserKind reasoning, ChoiceOutput* out) {
  if (reasoning != ReasoningParserKind::kNone) {
    ReasoningSplit split = SplitReasoning(reasoning, out->text);
    out->has_reasoning = split.has_reasoning;
    out->reasoning = std::move(split.reasoning);
    out->text = std::move(split.content);
  }
  if (tools == ToolParserKind::kNone) return;
  ToolParseResult parsed = ParseToolCalls(tools, out->text);
  if (parsed.calls.empty()) return;
  out->text = std::move(parsed.content);
  out->tool_calls = json::array();
  for (const ParsedToolCall& call : parsed.calls) {
    out->tool_calls.push_back(ToolCallJson(MakeToolCallId(), call.name, call.arguments));
  }
  out->finish_reason = "tool_calls";
}

const std::string& JobChoiceSpec::echo() const {
  static const std::string kNone;
  return echo_text ? *echo_text : kNone;
}

v1::GenerateRequest MakeGenerateRequest(const JobSpec& spec, const JobChoiceSpec& choice) {
  const GenerationOptions& o = spec.options;
  v1::GenerateRequest req;
  req.set_api_version(kGenerateApiVersion);
  const std::string& id = spec.request_id.empty() ? spec.meta.id : spec.request_id;
  req.set_request_id(spec.choices.size() > 1 ? id + "-" + std::to_string(choice.index) : id);
  req.mutable_prompt_token_ids()->Add(choice.prompt_ids->begin(), choice.prompt_ids->end());
  v1::SamplingParams* s = req.mutable_sampling();
  const SamplingParams& p = o.sampling;
  s->set_temperature(p.temperature);
  s->set_top_k(p.top_k);
  s->set_top_p(p.top_p);
  s->set_min_p(p.min_p);
  s->set_repetition_penalty(p.repetition_penalty);
  s->set_presence_penalty(p.presence_penalty);
  s->set_frequency_penalty(p.frequency_penalty);
  if (choice.seed) s->set_seed(*choice.seed);
  s->set_logprobs(p.logprobs);
  req.set_max_tokens(static_cast<int32_t>(o.max_tokens.value_or(16)));
  req.set_ignore_eos(o.ignore_eos);
  req.mutable_stop_token_ids()->Add(o.stop_token_ids.begin(), o.stop_token_ids.end());
  req.set_priority(o.priority);
  req.set_min_tokens(static_cast<int32_t>(o.min_tokens));
  if (o.structured == StructuredOutput::kJsonObject) {
    req.mutable_structured_output()->set_json_object(true);
  } else if (o.structured == StructuredOutput::kJsonSchema) {
    req.mutable_structured_output()->set_json_schema(o.json_schema);
  } else if (o.structured == StructuredOutput::kChoice) {
    auto* values = req.mutable_structured_output()->mutable_choice()->mutable_values();
    for (const std::string& c : o.choices) values->Add(std::string(c));
  } else if (o.structured == StructuredOutput::kRegex) {
    req.mutable_structured_output()->set_regex(o.regex);
  }
  return req;
}

GenerationJob::GenerationJob(JobSpec spec, std::shared_ptr<const Tokenizer> tokenizer,
                             UpstreamPool& pool, std::shared_ptr<ResponseSink> sink)
    : spec_(std::move(spec)),
      tokenizer_(std::move(tokenizer)),
      pool_(pool),
      sink_(std::move(sink)) {
  // One copy of the stop strings for all choices (the parser rejects empty ones).
  auto stops = std::make_shared<const std::vector<std::string>>(spec_.options.stop);
  for (JobChoiceSpec& cs : spec_.choices) {
    auto c = std::make_unique<Choice>();
    c->spec = std::move(cs);
    c->decoder =
        std::make_unique<IncrementalDecoder>(*tokenizer_, spec_.options.skip_special_tokens);
    // Prime the decoder with the end of the prompt so the first piece decodes in context
    // (e.g. keeps the space a SentencePiece word starts with), as vLLM does.
    const std::vector<int32_t>& prompt = *c->spec.prompt_ids;
    const size_t n = prompt.size();
    c->decoder->Prime(std::span<const int32_t>(prompt).subspan(n - std::min<size_t>(n, 4)));
    c->prev_token = n ? prompt.back() : -1;
    c->matcher = std::make_unique<StopMatcher>(stops, spec_.options.include_stop_str_in_output);
    c->text_offset = static_cast<int64_t>(c->spec.echo().size());
    if (parsing() && spec_.options.stream) {
      c->reasoning = std::make_unique<ReasoningStreamer>(spec_.reasoning_parser);
      c->tools = std::make_unique<ToolCallStreamer>(spec_.tool_parser);
    }
    choices_.push_back(std::move(c));
  }
}

GenerationJob::~GenerationJob() = default;

bool GenerationJob::Start() {
  if (cancelled_) return false;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& c = *choices_[i];
    auto self = shared_from_this();
    GenerateCallbacks cb;
    cb.on_message = [self, i](v1::GenerateResponse r) {
      self->sink_->Post([self, i, r = std::move(r)] { self->OnMessage(i, r); });
    };
    cb.on_done = [self, i](std::optional<ApiError> e) {
      self->sink_->Post([self, i, e = std::move(e)] { self->OnDone(i, e); });
    };
    auto call = pool_.StartGenerate(MakeGenerateRequest(spec_, c.spec), spec_.timeout, cb);
    if (!call.ok()) {
      c.done = true;
      for (size_t k = i + 1; k < choices_.size(); ++k) choices_[k]->done = true;
      Fail(ToApiError(call.status()));
      return !answered_;
    }
    c.call = std::move(call).value();
    // The first call is on its way: a stream's headers (and chat's role chunk) go out now,
    // before the first token, so a proxy with an idle timeout does not cut a request that
    // waits in the coordinator's queue. Errors from here on are a last error event.
    if (i == 0) EnsureStreamStarted();
  }
  return true;
}

void GenerationJob::Cancel() {
  if (!answered_) {
    for (auto& c : choices_) {
      if (!c->finished) c->finish_reason = "abort";
    }
    Record();
  }
  cancelled_ = true;
  answered_ = true;
  for (auto& c : choices_) {
    if (c->call && !c->done) c->call->Cancel();
  }
}

void GenerationJob::Fail(const ApiError& error) {
  if (!error_) error_ = error;
  for (auto& c : choices_) {
    if (c->call && !c->done) c->call->Cancel();
  }
  Finish();
}

void GenerationJob::EnsureStreamStarted() {
  if (!spec_.options.stream || stream_started_) return;
  stream_started_ = true;
  sink_->BeginStream(200, "text/event-stream");
  for (auto& c : choices_) {
    json chunk;
    if (spec_.chat) {
      chunk = ChatChunkJson(spec_.meta, c->spec.index, {{"role", "assistant"}, {"content", ""}},
                            nullptr, "");
    } else if (!c->spec.echo().empty()) {
      chunk = CompletionChunkJson(spec_.meta, c->spec.index, c->spec.echo(), nullptr, "");
    } else {
      continue;
    }
    if (spec_.options.include_usage) chunk["usage"] = nullptr;
    sink_->StreamWrite(SseData(chunk));
  }
}

std::string GenerationJob::TokenText(int32_t prev, int32_t id) const {
  if (prev >= 0) {
    const int32_t both[2] = {prev, id};
    const std::string a = tokenizer_->Decode(std::span<const int32_t>(both, 1));
    const std::string ab = tokenizer_->Decode(std::span<const int32_t>(both, 2));
    if (ab.size() >= a.size() && ab.compare(0, a.size(), a) == 0) return ab.substr(a.size());
  }
  return tokenizer_->Decode(std::span<const int32_t>(&id, 1));
}

TokenLogprob GenerationJob::MakeLogprob(int32_t prev, const v1::GenerateResponse& r, int k) const {
  TokenLogprob t;
  t.token = TokenText(prev, r.token_ids(k));
  t.logprob = r.logprobs(k);
  if (k < r.top_logprobs_size()) {
    for (const v1::TokenLogprob& e : r.top_logprobs(k).entries()) {
      t.top.emplace_back(TokenText(prev, e.token_id()), e.logprob());
    }
  }
  return t;
}

void GenerationJob::OnMessage(size_t i, const v1::GenerateResponse& r) {
  Choice& c = *choices_[i];
  if (cancelled_ || error_ || c.finished) return;
  EnsureStreamStarted();
  const bool final = r.finish_reason() != v1::FINISH_REASON_UNSPECIFIED;
  std::string out;
  std::vector<TokenLogprob> logprobs;
  if (!first_token_ && r.token_ids_size() > 0) first_token_ = std::chrono::steady_clock::now();
  for (int k = 0; k < r.token_ids_size() && !c.matcher->stopped(); ++k) {
    const int32_t id = r.token_ids(k);
    ++c.completion_tokens;
    if (spec_.options.sampling.logprobs >= 0 && k < r.logprobs_size()) {
      logprobs.push_back(MakeLogprob(c.prev_token, r, k));
    }
    c.prev_token = id;
    // The eos / stop token that ended the sequence (the coordinator names it) is not part of
    // the text.
    const bool ending_token =
        final && k + 1 == r.token_ids_size() && r.has_stop_token_id() && r.stop_token_id() == id;
    if (!ending_token) out += c.matcher->Push(c.decoder->Add(id));
  }
  if (!c.matcher->stopped() && final) {
    out += c.matcher->Push(c.decoder->Flush());
    out += c.matcher->Flush();
  }
  if (c.matcher->stopped()) {
    c.finished = true;
    c.finish_reason = "stop";
    c.call->Cancel();
  } else if (final) {
    c.finished = true;
    c.finish_reason = FinishName(r.finish_reason());
  }
  if (final && r.has_timings() && spec_.metrics) spec_.metrics->ObserveEngineTimings(r.timings());
  Emit(c, out, std::move(logprobs));
  if (c.finished && spec_.options.stream) {
    const std::string finish = c.reasoning ? FlushParsers(c) : c.finish_reason;
    json chunk = spec_.chat
                     ? ChatChunkJson(spec_.meta, c.spec.index, json::object(), nullptr, finish)
                     : CompletionChunkJson(spec_.meta, c.spec.index, "", nullptr, c.finish_reason);
    if (spec_.options.include_usage) chunk["usage"] = nullptr;
    sink_->StreamWrite(SseData(chunk));
  }
  if (c.matcher->stopped()) return;  // cancelled: on_done follows
  // Ask for the next message (after the last one this reads the end of the stream) once the
  // connection has room: a slow client slows the stream instead of growing a queue.
  auto self = shared_from_this();
  sink_->WhenWritable([self, i] {
    Choice& ch = *self->choices_[i];
    if (!self->cancelled_ && !ch.done && !(ch.finished && ch.matcher->stopped())) {
      ch.call->ReadNext();
    }
  });
}

void GenerationJob::Emit(Choice& c, const std::string& text, std::vector<TokenLogprob> logprobs) {
  if (text.empty() && logprobs.empty()) return;
  if (!spec_.options.stream) {
    c.text += text;
    for (auto& l : logprobs) c.logprobs.push_back(std::move(l));
    return;
  }
  json chunk;
  const bool with_logprobs = spec_.options.sampling.logprobs >= 0;
  if (spec_.chat) {
    if (c.reasoning) {
      std::string reasoning;
      std::string content;
      c.reasoning->Push(text, &reasoning, &content);
      WriteParsed(c, std::move(reasoning), c.tools->Push(content),
                  with_logprobs && !logprobs.empty() ? ChatLogprobsJson(logprobs) : json(nullptr));
      return;
    }
    json delta = {{"content", text}};
    chunk = ChatChunkJson(spec_.meta, c.spec.index, std::move(delta),
                          with_logprobs ? ChatLogprobsJson(logprobs) : json(nullptr), "");
  } else {
    chunk = CompletionChunkJson(
        spec_.meta, c.spec.index, text,
        with_logprobs ? CompletionLogprobsJson(logprobs, c.text_offset) : json(nullptr), "");
    for (const TokenLogprob& l : logprobs) c.text_offset += static_cast<int64_t>(l.token.size());
  }
  if (spec_.options.include_usage) chunk["usage"] = nullptr;
  sink_->StreamWrite(SseData(chunk));
}

void GenerationJob::WriteParsed(Choice& c, std::string reasoning, ToolStreamEvents tools,
                                json logprobs) {
  auto write = [&](json delta) {
    json chunk = ChatChunkJson(spec_.meta, c.spec.index, std::move(delta), std::move(logprobs), "");
    logprobs = nullptr;
    if (spec_.options.include_usage) chunk["usage"] = nullptr;
    sink_->StreamWrite(SseData(chunk));
  };
  json delta = json::object();
  if (!reasoning.empty()) delta["reasoning_content"] = std::move(reasoning);
  // Logprobs of tokens that produced no text yet go out with an empty content.
  if (!tools.content.empty() || (delta.empty() && tools.calls.empty() && !logprobs.is_null())) {
    delta["content"] = std::move(tools.content);
  }
  if (!delta.empty()) write(std::move(delta));
  for (ToolCallDelta& d : tools.calls) {
    if (!d.name.empty()) write(ToolCallStartDelta(d.index, MakeToolCallId(), d.name));
    if (!d.arguments.empty()) write(ToolCallArgumentsDelta(d.index, d.arguments));
  }
}

std::string GenerationJob::FlushParsers(Choice& c) {
  std::string reasoning;
  std::string content;
  c.reasoning->Finish(&reasoning, &content);
  ToolStreamEvents tools = c.tools->Push(content);
  ToolStreamEvents rest = c.tools->Finish();
  tools.content += rest.content;
  for (ToolCallDelta& d : rest.calls) tools.calls.push_back(std::move(d));
  WriteParsed(c, std::move(reasoning), std::move(tools), nullptr);
  return c.tools->FinishReason(c.finish_reason);
}

void GenerationJob::OnDone(size_t i, const std::optional<ApiError>& error) {
  Choice& c = *choices_[i];
  c.done = true;
  if (!c.finished && !cancelled_ && !error_) {
    Fail(error ? *error
               : ToApiError(Internal("the coordinator ended a stream without a finish reason")));
    return;
  }
  Finish();
}

void GenerationJob::Record() {
  if (recorded_ || (!spec_.metrics && !spec_.outcome)) return;
  recorded_ = true;
  RequestRecord r;
  r.ok = !error_ && !cancelled_;
  if (error_) r.error = error_->message;
  r.prompt_tokens = spec_.prompt_tokens;
  for (auto& c : choices_) {
    r.generation_tokens += c->completion_tokens;
    r.finish_reasons.push_back(c->finish_reason.empty() ? (error_ ? "error" : "abort")
                                                        : c->finish_reason);
  }
  const auto now = std::chrono::steady_clock::now();
  r.e2e_s = std::chrono::duration<double>(now - created_).count();
  if (first_token_) {
    r.ttft_s = std::chrono::duration<double>(*first_token_ - created_).count();
    // Per choice the tokens after the first came in (e2e - ttft); with several choices the
    // mean over all of them.
    const int64_t after_first = r.generation_tokens - static_cast<int64_t>(choices_.size());
    if (after_first > 0) {
      r.tpot_s = std::chrono::duration<double>(now - *first_token_).count() *
                 static_cast<double>(choices_.size()) / static_cast<double>(after_first);
    }
  }
  if (spec_.metrics) spec_.metrics->ObserveRequest(r);
  if (spec_.outcome) *spec_.outcome = std::move(r);
}

void GenerationJob::Finish() {
  if (answered_) return;
  for (auto& c : choices_) {
    if (!c->done) return;
  }
  answered_ = true;
  Record();
  UsageCounts usage;
  usage.prompt_tokens = spec_.prompt_tokens;
  for (auto& c : choices_) usage.completion_tokens += c->completion_tokens;
  if (error_) {
    const ApiError& e = *error_;
    if (!stream_started_) {
      sink_->Respond(ApiErrorResponse(e));
    } else {
      sink_->StreamWrite("data: " + ApiErrorJson(e) + "\n\n");
      sink_->StreamWrite(SseDone());
      sink_->EndStream();
    }
    return;
  }
  if (spec_.options.stream) {
    EnsureStreamStarted();
    if (spec_.options.include_usage) {
      sink_->StreamWrite(SseData(UsageChunkJson(spec_.meta, spec_.chat, usage)));
    }
    sink_->StreamWrite(SseDone());
    sink_->EndStream();
    return;
  }
  std::vector<ChoiceOutput> outputs;
  for (auto& c : choices_) {
    ChoiceOutput o;
    o.index = c->spec.index;
    o.text = c->spec.echo() + c->text;
    o.finish_reason = c->finish_reason;
    o.with_logprobs = spec_.options.sampling.logprobs >= 0;
    o.logprobs = std::move(c->logprobs);
    o.text_offset = static_cast<int64_t>(c->spec.echo().size());
    if (parsing()) ApplyChatParsers(spec_.tool_parser, spec_.reasoning_parser, &o);
    outputs.push_back(std::move(o));
  }
  std::sort(outputs.begin(), outputs.end(),
            [](const ChoiceOutput& a, const ChoiceOutput& b) { return a.index < b.index; });
  const json body = spec_.chat ? ChatResponseJson(spec_.meta, outputs, usage)
                               : CompletionResponseJson(spec_.meta, outputs, usage);
  sink_->Respond({200, "application/json", JsonText(body), {}});
}

}  // namespace llm::router
