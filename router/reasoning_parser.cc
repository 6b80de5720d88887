#include "router/reasoning_parser.h"

#include <algorithm>

namespace llm::router {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// How many bytes at the end of `s` are a proper prefix of `tag`.
size_t PartialTag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, s.size()); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

std::optional<ReasoningParserKind> ReasoningParserFromName(std::string_view name) {
  if (name == "none") return ReasoningParserKind::kNone;
  if (name == "deepseek_r1") return ReasoningParserKind::kDeepSeekR1;
  if (name == "qwen3") return ReasoningParserKind::kQwen3;
  return std::nullopt;
}

ReasoningSplit SplitReasoning(ReasoningParserKind kind, std::string_view text) {
  ReasoningSplit out;
  ReasoningStreamer s(kind);
  s.Push(text, &out.reasoning, &out.content);
  s.Finish(&out.reasoning, &out.content);
  if (kind == ReasoningParserKind::kNone) return out;
  size_t first = 0;
  while (first < text.size() && IsSpace(text[first])) ++first;
  out.has_reasoning =
      kind == ReasoningParserKind::kDeepSeekR1 || text.substr(first, kOpen.size()) == kOpen;
  return out;
}

void ReasoningStreamer::Push(std::string_view piece, std::string* reasoning, std::string* content) {
  pending_.append(piece);
  Drain(false, reasoning, content);
}

void ReasoningStreamer::Finish(std::string* reasoning, std::string* content) {
  Drain(true, reasoning, content);
}

void ReasoningStreamer::Drain(bool final, std::string* reasoning, std::string* content) {
  while (true) {
    switch (state_) {
      case State::kStart: {
        if (kind_ == ReasoningParserKind::kNone) {
          state_ = State::kContent;
          break;
        }
        size_t first = 0;
        while (first < pending_.size() && IsSpace(pending_[first])) ++first;
        const std::string_view rest = std::string_view(pending_).substr(first);
        if (rest.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, first + kOpen.size());
          state_ = State::kReasoning;
          break;
        }
        if (!final && kOpen.substr(0, rest.size()) == rest) return;  // may still be <think>
        state_ = kind_ == ReasoningParserKind::kDeepSeekR1 ? State::kReasoning : State::kContent;
        break;
      }
      case State::kReasoning: {
        const size_t end = pending_.find(kClose);
        if (end != std::string::npos) {
          reasoning->append(pending_, 0, end);
          pending_.erase(0, end + kClose.size());
          state_ = State::kAfterEnd;
          break;
        }
        const size_t keep = final ? 0 : PartialTag(pending_, kClose);
        reasoning->append(pending_, 0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::kAfterEnd: {
        size_t first = 0;
        while (first < pending_.size() && IsSpace(pending_[first])) ++first;
        pending_.erase(0, first);
        if (pending_.empty()) return;
        state_ = State::kContent;
        break;
      }
      case State::kContent:
        content->append(pending_);
        pending_.clear();
        return;
    }
  }
}

}  // namespace llm::router
