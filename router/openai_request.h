// OpenAI request bodies → plain C++ structs, with validation. Each parser returns the first
// problem as an ApiError naming the parameter (400), or 404 for a model that is not served.
// Pure functions: no tokenizer, no network; the context-length check needs the prompt length
// and lives in CheckContextLength.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config_sections.h"
#include "common/sampling_params.h"
#include "common/status.h"
#include "router/api_error.h"

namespace llm::router {

// What a request may ask for: cluster.yaml's router caps (common/config_sections.h) and the
// one model name served.
struct RequestLimits : RequestCaps {
  std::string served_model_name;
  // What a request that does not set a sampling field gets: the model's
  // generation_config.json (as vLLM does), else SamplingParams' own defaults.
  SamplingParams default_sampling;
};

// The sampling defaults of a model folder's generation_config.json (temperature, top_p, top_k,
// min_p, repetition_penalty; other keys are ignored), on top of SamplingParams' own; no file:
// those. A value of the wrong type or out of range is an error naming the file and key.
StatusOr<SamplingParams> SamplingDefaultsFromModel(const std::string& model_path);

// response_format: free text, any JSON object, or JSON valid against a schema; vLLM's
// guided_choice (one of some strings) and guided_regex (text matching a pattern).
enum class StructuredOutput { kNone, kJsonObject, kJsonSchema, kChoice, kRegex };

// What every generation request shares (chat and completions).
struct GenerationOptions {
  // temperature, top_p, top_k (-1 is accepted and mapped to 0 = off), min_p, the penalties,
  // seed (any int64, kept as its bits) and logprobs (-1 none, 0 the chosen token, N > 0 plus
  // the top N): the one type the coordinator and the sampler use.
  SamplingParams sampling;
  std::optional<int64_t> max_tokens;  // nullopt: the rest of the context
  int64_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  int priority = 0;  // 0 unless RequestLimits::allow_priority
  // Enforced by the coordinator while decoding (common/json_schema_grammar.h); the router has
  // already checked that the schema compiles. json_schema: JSON text, property order kept.
  StructuredOutput structured = StructuredOutput::kNone;
  std::string json_schema;
  std::vector<std::string> choices;  // kChoice
  std::string regex;                 // kRegex (common/regex_grammar.h)
};

// Tool calling: at most kMaxTools tools whose JSON totals kMaxToolsBytes.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolsBytes = 1 << 20;

struct ChatRequest {
  std::string model;
  nlohmann::json messages;  // normalised: every content is a string
  // The request's `tools` (a list of {"type":"function","function":{name, description,
  // parameters}}); null when absent or empty.
  // Keys in the order sent: the template renders them (tojson) as transformers would.
  nlohmann::ordered_json tools;
  std::string tool_choice = "auto";  // "auto", "none", "required" or "function"
  std::string tool_choice_name;      // tool_choice "function": the named tool
  // tool_choice "required" or a named function: options.json_schema makes the model write
  // [{"name": ..., "parameters": {...}}, ...] with a declared tool's name and arguments that
  // follow its parameters schema (the json_array tool parser reads it back).
  bool forced_tool_calls = false;
  bool add_generation_prompt = true;
  nlohmann::json template_kwargs = nlohmann::json::object();
  GenerationOptions options;
};

struct CompletionPrompt {
  bool is_token_ids = false;
  std::string text;
  std::vector<int32_t> token_ids;
};

struct CompletionRequest {
  std::string model;
  std::vector<CompletionPrompt> prompts;
  bool echo = false;
  GenerationOptions options;
};

// vLLM /tokenize: a prompt or chat messages.
struct TokenizeRequest {
  std::string model;
  bool has_messages = false;
  std::string prompt;
  nlohmann::json messages;
  nlohmann::ordered_json tools;    // as ChatRequest::tools
  bool add_special_tokens = true;  // default: true for a prompt, false for messages
  bool add_generation_prompt = true;
  nlohmann::json template_kwargs = nlohmann::json::object();
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits,
                                         ChatRequest* out);
std::optional<ApiError> ParseCompletionRequest(std::string_view body, const RequestLimits& limits,
                                               CompletionRequest* out);
std::optional<ApiError> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits,
                                             TokenizeRequest* out);
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits,
                                               DetokenizeRequest* out);

// Resolves max_tokens against the context: nullopt becomes max_model_len - prompt_tokens.
// 400 when the prompt plus max_tokens does not fit ("This model's maximum context length is X
// tokens. However, you requested Y tokens (P in the prompt, M for the completion) ...").
std::optional<ApiError> CheckContextLength(int64_t prompt_tokens, int64_t max_model_len,
                                           const std::string& prompt_param,
                                           GenerationOptions* options);

// 400 when a token id is outside [0, vocab_size).
std::optional<ApiError> CheckTokenIds(const std::vector<int32_t>& ids, int64_t vocab_size,
                                      const std::string& param);

}  // namespace llm::router
