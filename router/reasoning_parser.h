// Reasoning text (router.reasoning_parser): what the model thinks inside <think>...</think>
// goes to reasoning_content, the rest to content. qwen3: only when the text opens with
// <think> (after whitespace); deepseek_r1: the opening tag may be missing (the template put it
// in the prompt), so all text up to </think> is reasoning, and all of it when </think> never
// comes. The content after </think> loses its leading whitespace.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace llm::router {

enum class ReasoningParserKind { kNone, kDeepSeekR1, kQwen3 };

std::optional<ReasoningParserKind> ReasoningParserFromName(std::string_view name);

struct ReasoningSplit {
  std::string reasoning;
  std::string content;
  bool has_reasoning = false;  // a think block was found (reasoning may still be empty)
};

ReasoningSplit SplitReasoning(ReasoningParserKind kind, std::string_view text);

// Streaming: the concatenated pieces equal SplitReasoning on the whole text, however the text
// is split. Text that may be a tag is held back.
class ReasoningStreamer {
 public:
  explicit ReasoningStreamer(ReasoningParserKind kind) : kind_(kind) {}
  // Appends the new reasoning and content to *reasoning / *content.
  void Push(std::string_view piece, std::string* reasoning, std::string* content);
  void Finish(std::string* reasoning, std::string* content);

 private:
  void Drain(bool final, std::string* reasoning, std::string* content);
  ReasoningParserKind kind_;
  enum class State { kStart, kReasoning, kAfterEnd, kContent } state_ = State::kStart;
  std::string pending_;
};

}  // namespace llm::router
