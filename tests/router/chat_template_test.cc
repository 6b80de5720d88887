// Chat template engine (common/chat_template.h): expected strings written by hand, plus the
// rendered prompts of ../shared/tokenizers/chat_cases.jsonl for the templates in the subset.
#include "common/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
  auto unsupported = ChatTemplate::Parse("{% macro m() %}x{% endmacro %}");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(unsupported.status().message().find("macro"), std::string::npos);

  auto filter = ChatTemplate::Parse("{{ x | tojson }}");
  ASSERT_FALSE(filter.ok());
  EXPECT_NE(filter.status().message().find("tojson"), std::string::npos);

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

// The templates of ../shared/tokenizers that fit the subset render exactly like Python Jinja.
TEST(ChatTemplate, SharedChatCases) {
  const std::filesystem::path dir = std::filesystem::path(LLM_SHARED_DIR) / "tokenizers";
  std::ifstream cases(dir / "chat_cases.jsonl");
  if (!cases) GTEST_SKIP() << "missing " << (dir / "chat_cases.jsonl");
  int checked = 0;
  for (std::string line; std::getline(cases, line);) {
    const json c = json::parse(line);
    const std::string name = c["tokenizer"];
    if (name != "llama3" && name != "gemma3") continue;
    std::ifstream cfg_file(dir / name / "tokenizer_config.json");
    const json cfg = json::parse(cfg_file);
    auto tpl = ChatTemplate::Parse(cfg["chat_template"].get<std::string>());
    ASSERT_TRUE(tpl.ok()) << name << ": " << tpl.status().ToString();
    auto token = [&](const char* key) {
      const json& t = cfg[key];
      return t.is_object() ? t["content"].get<std::string>() : t.get<std::string>();
    };
    json ctx = {{"messages", c["messages"]},
                {"add_generation_prompt", c["add_generation_prompt"]},
                {"bos_token", token("bos_token")},
                {"eos_token", token("eos_token")}};
    auto out = tpl->Render(ctx);
    if (c.contains("error") && c["error"].is_string()) {
      ASSERT_FALSE(out.ok()) << c["id"];
      EXPECT_NE(out.status().message().find(c["error"].get<std::string>()), std::string::npos);
      ++checked;
      continue;
    }
    ASSERT_TRUE(out.ok()) << c["id"] << ": " << out.status().ToString();
    EXPECT_EQ(*out, c["rendered"].get<std::string>()) << c["id"];
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace llm::router
