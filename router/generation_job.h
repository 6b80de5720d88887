// One chat or completion request in flight: one Generate call per choice (prompt × n), the
// incremental detokenizer and stop strings per choice, and the response (SSE chunks or one
// JSON body with usage). Thread affinity: every method runs on the connection's strand; gRPC
// callbacks only post to it. The job keeps itself alive until its last call is done.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/tokenizer.h"
#include "router/api_error.h"
#include "router/http_exchange.h"
#include "router/metrics.h"
#include "router/openai_format.h"
#include "router/openai_request.h"
#include "router/reasoning_parser.h"
#include "router/tool_parser.h"
#include "router/upstream_pool.h"

namespace llm::router {

// One choice. The n choices of a prompt share its token ids and echo text (never copied per
// choice: a request may have hundreds of choices).
struct JobChoiceSpec {
  int index = 0;  // the OpenAI choice index (prompt-major: prompt_i * n + j)
  std::shared_ptr<const std::vector<int32_t>> prompt_ids;
  std::shared_ptr<const std::string> echo_text;  // completions with echo; null: none
  std::optional<uint64_t> seed;

  const std::string& echo() const;
};

struct JobSpec {
  bool chat = true;
  std::string request_id;  // the HTTP request's id (X-Request-Id): names the upstream calls
  ResponseMeta meta;
  GenerationOptions options;  // max_tokens resolved
  // Chat: how tool calls (kNone: the request has no tools) and reasoning are found in the text.
  ToolParserKind tool_parser = ToolParserKind::kNone;
  ReasoningParserKind reasoning_parser = ReasoningParserKind::kNone;
  std::vector<JobChoiceSpec> choices;
  int64_t prompt_tokens = 0;  // for usage: each prompt counted once
  std::chrono::seconds timeout{600};
  std::shared_ptr<RouterMetrics> metrics;  // null: not recorded
  // Filled with what the finished request did, for the request's log line; null: not kept.
  std::shared_ptr<RequestRecord> outcome;
};

// The message of a finished chat choice: reasoning split off, then tool calls parsed (their
// ids made here); finish_reason becomes "tool_calls" when there are calls.
void ApplyChatParsers(ToolParserKind tools, ReasoningParserKind reasoning, ChoiceOutput* out);

// Builds the Generate request of one choice. Its request_id is the HTTP request's id, with
// "-<choice index>" appended when the request has several choices.
v1::GenerateRequest MakeGenerateRequest(const JobSpec& spec, const JobChoiceSpec& choice);

class GenerationJob : public PendingExchange, public std::enable_shared_from_this<GenerationJob> {
 public:
  GenerationJob(JobSpec spec, std::shared_ptr<const Tokenizer> tokenizer, UpstreamPool& pool,
                std::shared_ptr<ResponseSink> sink);
  ~GenerationJob() override;

  // Starts every call; runs on the connection's strand. Returns false when the exchange is
  // already answered (no upstream: 503) or was cancelled.
  bool Start();
  void Cancel() override;

  struct Choice;

 private:
  void OnMessage(size_t i, const v1::GenerateResponse& response);
  void OnDone(size_t i, const std::optional<ApiError>& error);
  void Fail(const ApiError& error);
  void EnsureStreamStarted();
  void Emit(Choice& c, const std::string& text, std::vector<TokenLogprob> logprobs);
  // Stream: what the parsers still hold, then the tool-call deltas; returns the finish reason.
  std::string FlushParsers(Choice& c);
  // Stream with parsers: a chunk with the reasoning and content (when any, or when `logprobs`
  // must go out), then one chunk per tool-call delta (a call's first delta: its index, a new
  // id, type and name, arguments ""; then {"index", "function": {"arguments"}} fragments).
  // `logprobs` (null: none) goes with the first chunk.
  void WriteParsed(Choice& c, std::string reasoning, ToolStreamEvents tools,
                   nlohmann::json logprobs);
  bool parsing() const {
    return spec_.chat && (spec_.tool_parser != ToolParserKind::kNone ||
                          spec_.reasoning_parser != ReasoningParserKind::kNone);
  }
  void Finish();
  TokenLogprob MakeLogprob(int32_t prev, const v1::GenerateResponse& r, int k) const;
  std::string TokenText(int32_t prev, int32_t id) const;

  JobSpec spec_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  UpstreamPool& pool_;
  std::shared_ptr<ResponseSink> sink_;
  std::vector<std::unique_ptr<Choice>> choices_;
  std::optional<ApiError> error_;  // the first error; the client gets it
  // Reports the finished request to spec_.metrics (once).
  void Record();

  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first_token_;
  bool recorded_ = false;
  bool cancelled_ = false;
  bool stream_started_ = false;
  bool answered_ = false;
};

}  // namespace llm::router
