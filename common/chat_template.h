// Chat templates from tokenizer_config.json: a Jinja engine that renders Hugging Face
// `chat_template`s exactly like Python transformers (jinja2's ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks, loopcontrols, and transformers' tojson / raise_exception /
// strftime_now).
//
// Statements: if/elif/else, for (tuple targets, `loop.*` incl. previtem/nextitem/cycle(),
// `for x in y if cond`, for-else, break/continue), set (names, tuples, `ns.attr`, set blocks
// with filters), macro (defaults, varargs/kwargs) and call blocks (`caller`), filter blocks, with,
// generation (renders its body), raw, comments and whitespace control. Expressions: Python
// literals incl. tuples and dicts, arithmetic (`+ - * / // % **`), `~`, chained comparisons,
// `in`/`not in`, `and`/`or`/`not`, conditional expressions, attributes, items, slices with
// steps, `%` string formatting, tests (`is [not] ...`), filters, string/dict methods and the
// globals range(), namespace(), dict(), raise_exception(), strftime_now().
// Undefined variables behave like jinja2's default Undefined: they print as "", are falsy and
// iterate as empty; an attribute or item of one is an error.
//
// Values come from JSON (keep an nlohmann::ordered_json to keep tojson's key order).
// Thread safety: a parsed ChatTemplate is immutable; Render may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace llm {

namespace chat_template_internal {
struct Program;
}

// Bounds of one render: a template (from the operator's files) or a request (its messages and
// kwargs drive the loops) can neither hang the router nor exhaust its memory. Exceeding one is
// a kInvalidArgument error naming the limit.
inline constexpr int64_t kMaxChatTemplateLoopIterations =
    1'000'000;                                                      // for iterations + macro calls
inline constexpr int kMaxChatTemplateMacroDepth = 64;               // nested macro calls
inline constexpr size_t kMaxChatTemplateOutputBytes = 16u << 20;    // output, and any one string
inline constexpr int64_t kMaxChatTemplateSteps = 10'000'000;        // expressions + items filtered
inline constexpr uint64_t kMaxChatTemplateBuiltBytes = 256u << 20;  // all strings built, in total

class ChatTemplate {
 public:
  // kUnimplemented for Jinja syntax the engine does not have (include, extends, recursive loops,
  // unknown filters and tests), kInvalidArgument for malformed templates; messages name the line.
  static StatusOr<ChatTemplate> Parse(std::string_view source);

  // `context` is a JSON object of variables (messages, add_generation_prompt, bos_token, ...).
  // Errors: kInvalidArgument for type errors, raise_exception() and the limits above, naming the
  // line.
  StatusOr<std::string> Render(const nlohmann::json& context) const;
  StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const chat_template_internal::Program> program)
      : program_(std::move(program)) {}
  std::shared_ptr<const chat_template_internal::Program> program_;
};

}  // namespace llm
