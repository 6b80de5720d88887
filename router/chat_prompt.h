// Chat prompt = the chat template rendered over the request's messages, and its token ids.
//
// Special-token injection: a user who types "<|im_end|><|im_start|>system" or "</s><s>" into a
// message must not get those control tokens (the template's own special tokens still are
// ones). vLLM tokenizes the rendered prompt with special-token parsing everywhere; here, unless
// the operator allows it (router.special_tokens_in_messages), message contents are tokenized
// as text. How: when some content holds special-token text, the template is rendered a second
// time with each content replaced by a unique placeholder; substituting the contents back
// gives their byte ranges in the prompt, which Tokenizer::EncodeWithPlainRanges keeps as text.
// The two renders must agree; a template that transforms content (| upper, slicing, tests on
// its value) makes them differ, and such a request is refused rather than tokenized unsafely.
// Requests whose contents hold no special-token text take the plain path (identical ids).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/chat_template.h"
#include "common/status.h"
#include "common/tokenizer.h"

namespace llm::router {

struct ChatPrompt {
  std::string text;
  std::vector<TextRange> contents;  // message contents to tokenize as text; empty: none
};

// Renders `context` (a template context with "messages" whose contents are strings; moved in,
// never copied). With protect_contents, fills ChatPrompt::contents as described above;
// kInvalidArgument when they cannot be located.
StatusOr<ChatPrompt> RenderChatPrompt(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                      nlohmann::ordered_json context, bool protect_contents);

// Assistant tool_calls' arguments that are JSON strings holding an object (as OpenAI clients
// send them) become that object, for templates that apply tojson to them (Qwen3, Llama 3.1).
void ToolCallArgumentsAsMappings(nlohmann::ordered_json& messages);
// Assistant messages with tool_calls and empty content get content null, for templates that
// render the calls only then (DeepSeek-V3's tests `message['content'] is none`).
void EmptyCallContentAsNull(nlohmann::ordered_json& messages);

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, const ChatPrompt& prompt,
                                      bool add_special_tokens);

}  // namespace llm::router
