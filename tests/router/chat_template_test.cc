// Chat template engine (common/chat_template.h): expected strings written by hand, plus the
// rendered prompts of ../shared/tokenizers/chat_cases.jsonl for every tokenizer there.
#include "common/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "common/tokenizer.h"

namespace llm::router {
namespace {

using nlohmann::json;

std::string Render(const std::string& source, const json& context) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return "<parse error>";
  auto r = t->Render(context);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : "<render error>";
}

json Messages() {
  return json::array({{{"role", "system"}, {"content", "You are helpful."}},
                      {{"role", "user"}, {"content", "Hi"}},
                      {{"role", "assistant"}, {"content", "Hello!"}},
                      {{"role", "user"}, {"content", "Tell me a story"}}});
}

TEST(ChatTemplate, Stories260K) {
  const std::string tpl =
      "{{ bos_token }}{% for message in messages %}{{ message['content'] }}{% endfor %}";
  json ctx = {{"bos_token", "<s>"},
              {"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})},
              {"add_generation_prompt", true}};
  EXPECT_EQ(Render(tpl, ctx), "<s>Once upon a time");
  ctx["messages"] = Messages();
  EXPECT_EQ(Render(tpl, ctx), "<s>You are helpful.HiHello!Tell me a story");
}

TEST(ChatTemplate, ChatML) {
  const std::string tpl =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|im_start|>assistant\\n' }}{% endif %}";
  json ctx = {{"messages", Messages()}, {"add_generation_prompt", true}};
  EXPECT_EQ(Render(tpl, ctx),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nTell me a story<|im_end|>\n"
            "<|im_start|>assistant\n");
  ctx["add_generation_prompt"] = false;
  EXPECT_EQ(Render(tpl, ctx).substr(0, 13), "<|im_start|>s");
  EXPECT_EQ(Render(tpl, ctx).find("<|im_start|>assistant\n", 80), std::string::npos);
}

// trim_blocks removes the newline after a block tag, lstrip_blocks the indentation before it.
TEST(ChatTemplate, TrimAndLstripBlocks) {
  const std::string tpl =
      "{% for message in messages %}\n"
      "  {% if message.role == 'system' %}\n"
      "[SYS]{{ message.content | trim }}[/SYS]\n"
      "  {% elif message.role == 'user' and not loop.last %}\n"
      "U{{ loop.index0 }}: {{ message.content }}\n"
      "  {% else %}\n"
      "{{ message.role ~ ': ' ~ message.content }}\n"
      "  {% endif %}\n"
      "{% endfor %}";
  json ctx = {{"messages", json::array({{{"role", "system"}, {"content", "  be nice "}},
                                        {{"role", "user"}, {"content", "a"}},
                                        {{"role", "assistant"}, {"content", "b"}},
                                        {{"role", "user"}, {"content", "c"}}})}};
  EXPECT_EQ(Render(tpl, ctx), "[SYS]be nice[/SYS]\nU1: a\nassistant: b\nuser: c\n");
}

TEST(ChatTemplate, WhitespaceControlAndLoopVariables) {
  const std::string tpl =
      "<{%- for x in items -%}\n  {{ x }}{% if not loop.last %},{% endif %}\n{%- endfor -%}  >"
      "{{ items | length }}{% if loop is defined %}!{% endif %}";
  EXPECT_EQ(Render(tpl, {{"items", {1, 2, 3}}}), "<1,2,3>3");
  EXPECT_EQ(Render("{% for x in items %}{{ loop.index }}{% else %}empty{% endfor %}",
                   {{"items", json::array()}}),
            "empty");
  EXPECT_EQ(Render("{% for x in items %}{% if loop.first %}[{% endif %}{{ x }}"
                   "{% if loop.last %}]{% endif %}{% endfor %}",
                   {{"items", {"a", "b"}}}),
            "[ab]");
}

TEST(ChatTemplate, ExpressionsAndSet) {
  EXPECT_EQ(Render("{{ 'a' + \"b\" ~ 1 }}", json::object()), "ab1");
  EXPECT_EQ(Render("{{ x if x else 'none' }}|{{ y if y else 'none' }}", {{"x", "X"}}), "X|none");
  EXPECT_EQ(Render("{% set s = 'v' %}{% for i in [1, 2] %}{% set s = s + 'x' %}{{ s }}"
                   "{% endfor %}{{ s }}",
                   json::object()),
            "vxvxv");
  EXPECT_EQ(Render("{{ missing }}{{ d.missing }}{% if d.k == 1 and d.s != 'z' %}ok{% endif %}",
                   {{"d", {{"k", 1}, {"s", "q"}}}}),
            "ok");
  EXPECT_EQ(Render("{{ ' Hi '.strip() }}{{ 'a' in 'cat' }}{{ 3 % 2 }}{{ items[1:] | length }}"
                   "{{ items[-1] }}",
                   {{"items", {1, 2, 3}}}),
            "HiTrue123");
  EXPECT_EQ(Render("{% if a or b %}1{% elif c %}2{% else %}3{% endif %}",
                   {{"a", false}, {"b", ""}, {"c", true}}),
            "2");
  EXPECT_EQ(Render("{# comment #}{{ none }}{{ true }}", json::object()), "NoneTrue");
}

TEST(ChatTemplate, Errors) {
  auto unsupported = ChatTemplate::Parse("{% include 'other.jinja' %}");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(unsupported.status().message().find("include"), std::string::npos);

  auto filter = ChatTemplate::Parse("\n{{ x | no_such_filter }}");
  ASSERT_FALSE(filter.ok());
  EXPECT_EQ(filter.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(filter.status().message().find("no_such_filter"), std::string::npos);
  EXPECT_NE(filter.status().message().find("line 2"), std::string::npos);

  EXPECT_FALSE(ChatTemplate::Parse("{% for x in y %}").ok());     // never closed
  EXPECT_FALSE(ChatTemplate::Parse("{{ x ").ok());                // tag never closed
  EXPECT_FALSE(ChatTemplate::Parse("{% endif %}").ok());          // no opening tag
  EXPECT_FALSE(ChatTemplate::Parse("{{ 'unterminated }}").ok());  // string literal

  auto raise = ChatTemplate::Parse("{{ raise_exception('roles must alternate') }}");
  ASSERT_TRUE(raise.ok());
  auto r = raise->Render(json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("roles must alternate"), std::string::npos);

  auto type_error = ChatTemplate::Parse("{{ 1 + 'a' }}");
  ASSERT_TRUE(type_error.ok());
  EXPECT_FALSE(type_error->Render(json::object()).ok());
}

// The rendered prompts of ../shared/tokenizers/chat_cases.jsonl, for every tokenizer with a chat
// template, with the variables transformers' apply_chat_template passed when the cases were made
// (messages, tools or none, documents=none, add_generation_prompt, the special tokens of
// tokenizer_config.json and the case's `extra` kwargs): the text is the golden one, it encodes
// (add_special_tokens=false) to the golden ids, and a case with "error" fails with its message.
class SharedChatCases : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedChatCases, RenderAndEncodeLikeTransformers) {
  using ojson = nlohmann::ordered_json;  // tojson keeps the key order of the request
  const std::string name = GetParam();
  const std::filesystem::path dir = std::filesystem::path(LLM_SHARED_DIR) / "tokenizers";
  std::ifstream cases(dir / "chat_cases.jsonl");
  if (!cases) GTEST_SKIP() << "missing " << (dir / "chat_cases.jsonl");
  std::ifstream cfg_file(dir / name / "tokenizer_config.json");
  if (!cfg_file) GTEST_SKIP() << "missing " << (dir / name / "tokenizer_config.json");
  const ojson cfg = ojson::parse(cfg_file);
  auto tpl = ChatTemplate::Parse(cfg["chat_template"].get<std::string>());
  ASSERT_TRUE(tpl.ok()) << name << ": " << tpl.status().ToString();
  auto tok = Tokenizer::FromDir((dir / name).string());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();

  ojson base = ojson::object();
  for (const auto& [key, value] : cfg.items()) {
    if (key.size() < 6 || key.compare(key.size() - 6, 6, "_token") != 0) continue;
    if (value.is_object() && value.contains("content")) {
      base[key] = value["content"];
    } else if (value.is_string() || value.is_null()) {
      base[key] = value;
    }
  }
  int checked = 0;
  for (std::string line; std::getline(cases, line);) {
    if (line.empty()) continue;
    const ojson c = ojson::parse(line);
    if (c["tokenizer"] != name) continue;
    ojson ctx = base;
    ctx["messages"] = c["messages"];
    ctx["tools"] = c.contains("tools") ? c["tools"] : ojson(nullptr);
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = c["add_generation_prompt"];
    if (c.contains("extra") && c["extra"].is_object()) {
      for (const auto& [key, value] : c["extra"].items()) ctx[key] = value;
    }
    const std::string id = c["id"];
    auto out = tpl->Render(ctx);
    ++checked;
    if (c.contains("error") && c["error"].is_string()) {
      ASSERT_FALSE(out.ok()) << id;
      EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << id;
      EXPECT_NE(out.status().message().find(c["error"].get<std::string>()), std::string::npos)
          << id << ": " << out.status().message();
      continue;
    }
    ASSERT_TRUE(out.ok()) << id << ": " << out.status().ToString();
    EXPECT_EQ(*out, c["rendered"].get<std::string>()) << id;
    EXPECT_EQ((*tok)->Encode(*out, /*add_special_tokens=*/false),
              c["ids"].get<std::vector<int32_t>>())
        << id;
  }
  std::cout << "[chat " << name << "] " << checked << " cases\n";
  EXPECT_GE(checked, 15);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplate, SharedChatCases,
                         ::testing::Values("llama3", "gemma3", "qwen3", "deepseek_v3"),
                         [](const auto& param_info) { return param_info.param; });

// mistral's tokenizer_config.json has no chat template, and so no chat cases.
TEST(ChatTemplate, SharedChatCasesCoverEveryTemplate) {
  const std::filesystem::path dir = std::filesystem::path(LLM_SHARED_DIR) / "tokenizers";
  std::ifstream cases(dir / "chat_cases.jsonl");
  if (!cases) GTEST_SKIP() << "missing " << (dir / "chat_cases.jsonl");
  std::set<std::string> names;
  for (std::string line; std::getline(cases, line);) {
    if (!line.empty()) names.insert(json::parse(line)["tokenizer"].get<std::string>());
  }
  EXPECT_EQ(names, (std::set<std::string>{"deepseek_v3", "gemma3", "llama3", "qwen3"}));
  std::ifstream mistral(dir / "mistral" / "tokenizer_config.json");
  if (mistral) {
    EXPECT_FALSE(json::parse(mistral).contains("chat_template"));
  }
}

}  // namespace
}  // namespace llm::router
