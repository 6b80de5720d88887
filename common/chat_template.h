// Chat templates from tokenizer_config.json: a small Jinja subset, enough for the templates of
// small and common models (stories260K, ChatML, Llama-2-style). The full Jinja engine is a later
// issue; anything outside the subset is a clear kUnimplemented error at parse time.
//
// Supported: `{{ expr }}`, `{% for x in list %}` (with `loop.index`, `index0`, `first`, `last`,
// `length`; `{% else %}`), `{% if %}/{% elif %}/{% else %}`, `{% set x = expr %}`, comments,
// whitespace control (`{%-`, `-%}`) and the Hugging Face environment's trim_blocks and
// lstrip_blocks. Expressions: variables, `.attr`, `[item]`, `[a:b]` slices, string / number /
// true / false / none literals, list literals, `+ - * / %`, `~`, `== != < > <= >=`, `in`,
// `not in`, `and`/`or`/`not`, `a if c else b`, tests `is [not] defined/none/string/number`,
// filters `trim`, `length`, `lower`, `upper`, `string`, string methods `strip()`, `lstrip()`,
// `rstrip()`, `lower()`, `upper()`, and `raise_exception(msg)` (renders as an error).
//
// Values are JSON (nlohmann::json); a missing key or variable is undefined and renders as "".
// Thread safety: a parsed ChatTemplate is immutable; Render may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace llm {

namespace chat_template_internal {
struct Program;
}

class ChatTemplate {
 public:
  // kUnimplemented for syntax outside the subset, kInvalidArgument for malformed templates;
  // messages name the line.
  static StatusOr<ChatTemplate> Parse(std::string_view source);

  // `context` is a JSON object of variables (messages, add_generation_prompt, bos_token, ...).
  // Errors: kInvalidArgument for type errors and raise_exception().
  StatusOr<std::string> Render(const nlohmann::json& context) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const chat_template_internal::Program> program)
      : program_(std::move(program)) {}
  std::shared_ptr<const chat_template_internal::Program> program_;
};

}  // namespace llm
