#include "router/chat_prompt.h"

#include <random>

namespace llm::router {

namespace {

// Ordered: tools and tool-call arguments render with their keys in the order the client sent
// them, as Python's dicts keep them in transformers.
using json = nlohmann::ordered_json;

// What the template's trim removes at the ends of a placeholder's content is kept outside the
// placeholder, so a template that trims content still renders the placeholder whole.
constexpr const char* kSpace = " \t\n\r\f\v";

std::string RandomNonce() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) s += kHex[rng() & 15];
  return s;
}

struct Placeholders {
  std::string prefix;              // "@@<nonce>_"; a placeholder is prefix + index + "@@"
  std::vector<std::string> cores;  // content i without its leading / trailing whitespace
};

// Replaces every string content with lead + placeholder + trail; returns what they stand for.
Placeholders InsertPlaceholders(json& messages) {
  Placeholders p;
  p.prefix = "@@" + RandomNonce() + "_";
  for (json& m : messages) {
    auto content = m.is_object() ? m.find("content") : m.end();
    if (content == m.end() || !content->is_string()) continue;
    const std::string& s = content->get_ref<const std::string&>();
    const size_t b = s.find_first_not_of(kSpace);
    const size_t e = b == std::string::npos ? b : s.find_last_not_of(kSpace) + 1;
    const std::string lead = b == std::string::npos ? s : s.substr(0, b);
    const std::string core = b == std::string::npos ? "" : s.substr(b, e - b);
    const std::string trail = b == std::string::npos ? "" : s.substr(e);
    const std::string placeholder = p.prefix + std::to_string(p.cores.size()) + "@@";
    p.cores.push_back(core);
    *content = lead + placeholder + trail;
  }
  return p;
}

// Puts the contents back into the placeholder rendering, recording where each one lands.
// False when a placeholder came out mangled.
bool SubstituteContents(const std::string& rendered, const Placeholders& p, ChatPrompt* out) {
  size_t pos = 0;
  while (true) {
    const size_t at = rendered.find(p.prefix, pos);
    out->text.append(rendered, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) return true;
    const size_t digits = at + p.prefix.size();
    const size_t end = rendered.find("@@", digits);
    if (end == std::string::npos || end == digits || end - digits > 9) return false;
    size_t index = 0;
    for (size_t k = digits; k < end; ++k) {
      if (rendered[k] < '0' || rendered[k] > '9') return false;
      index = index * 10 + static_cast<size_t>(rendered[k] - '0');
    }
    if (index >= p.cores.size()) return false;
    const std::string& core = p.cores[index];
    if (!core.empty()) out->contents.push_back({out->text.size(), out->text.size() + core.size()});
    out->text += core;
    pos = end + 2;
  }
}

bool AnyContentHasSpecialText(const json& messages, const Tokenizer& tokenizer) {
  for (const json& m : messages) {
    auto content = m.is_object() ? m.find("content") : m.end();
    if (content != m.end() && content->is_string() &&
        tokenizer.ContainsSpecialTokenText(content->get_ref<const std::string&>())) {
      return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<ChatPrompt> RenderChatPrompt(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                      json context, bool protect_contents) {
  ChatPrompt prompt;
  LLM_ASSIGN_OR_RETURN(prompt.text, chat_template.Render(context));
  json& messages = context["messages"];
  if (!protect_contents || !messages.is_array() || !AnyContentHasSpecialText(messages, tokenizer)) {
    return prompt;
  }
  const Placeholders placeholders = InsertPlaceholders(messages);
  LLM_ASSIGN_OR_RETURN(const std::string rendered, chat_template.Render(context));
  ChatPrompt located;
  if (!SubstituteContents(rendered, placeholders, &located) || located.text != prompt.text) {
    return InvalidArgument(
        "a message content contains special-token text, and this chat template transforms "
        "message content, so it cannot be kept apart from the template's own special tokens; "
        "remove the special-token text (or the operator can set "
        "router.special_tokens_in_messages: true)");
  }
  return located;
}

void ToolCallArgumentsAsMappings(json& messages) {
  if (!messages.is_array()) return;
  for (json& m : messages) {
    auto calls = m.is_object() ? m.find("tool_calls") : m.end();
    if (calls == m.end() || !calls->is_array()) continue;
    for (json& c : *calls) {
      auto f = c.is_object() ? c.find("function") : c.end();
      if (f == c.end() || !f->is_object()) continue;
      auto args = f->find("arguments");
      if (args == f->end() || !args->is_string()) continue;
      json parsed =
          json::parse(args->get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
    }
  }
}

void EmptyCallContentAsNull(json& messages) {
  if (!messages.is_array()) return;
  for (json& m : messages) {
    if (!m.is_object() || m.value("role", "") != "assistant") continue;
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array() || calls->empty()) continue;
    auto content = m.find("content");
    if (content == m.end() ||
        (content->is_string() && content->get_ref<const std::string&>().empty())) {
      m["content"] = nullptr;
    }
  }
}

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tokenizer, const ChatPrompt& prompt,
                                      bool add_special_tokens) {
  if (prompt.contents.empty()) return tokenizer.Encode(prompt.text, add_special_tokens);
  return tokenizer.EncodeWithPlainRanges(prompt.text, prompt.contents, add_special_tokens);
}

}  // namespace llm::router
