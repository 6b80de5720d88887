// Hostile chat templates: loops, recursion and string growth stop at the limits named in
// common/chat_template.h with an InvalidArgument naming the limit, quickly and without
// exhausting memory or the stack.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/chat_template.h"

namespace llm {
namespace {

// Renders `source`, expecting an InvalidArgument whose message contains `limit`.
void ExpectLimit(const std::string& source, const std::string& limit) {
  const auto start = std::chrono::steady_clock::now();
  auto t = ChatTemplate::Parse(source);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = t->Render(nlohmann::json{{"messages", nlohmann::json::array()}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok()) << source.substr(0, 100);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(limit), std::string::npos)
      << source.substr(0, 100) << ": " << r.status().message();
  EXPECT_LT(seconds, 20) << source.substr(0, 100);
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ChatTemplateLimits, LoopsStopAtTheIterationLimit) {
  ExpectLimit("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
              "kMaxChatTemplateLoopIterations");
  // jinja2's sandbox refuses long ranges outright.
  ExpectLimit("{% for a in range(1000000000) %}{% endfor %}", "MAX_RANGE (100000)");
}

TEST(ChatTemplateLimits, RecursiveMacrosStopAtTheDepthLimit) {
  ExpectLimit("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
              "kMaxChatTemplateMacroDepth");
  // Two calls per level: depth stays under 64, the number of calls does not.
  ExpectLimit(
      "{% macro r(n) %}{% if n < 60 %}{{ r(n + 1) }}{{ r(n + 1) }}{% endif %}"
      "{% endmacro %}{{ r(0) }}",
      "kMaxChatTemplate");
  // Deeply nested blocks inside a recursive macro: the total recursion is bounded too.
  ExpectLimit("{% macro r(n) %}" + Repeat("{% if true %}", 100) + "{{ r(n + 1) }}" +
                  Repeat("{% endif %}", 100) + "{% endmacro %}{{ r(0) }}",
              "nested deeper than 1024 levels");
}

TEST(ChatTemplateLimits, StringsAndOutputStopAtTheSizeLimits) {
  ExpectLimit("{{ 'x' * 1000000000 }}", "kMaxChatTemplateOutputBytes");
  ExpectLimit("{{ 'xy' * 9223372036854775807 }}", "kMaxChatTemplateOutputBytes");
  ExpectLimit(
      "{% set ns = namespace(s='x') %}{% for i in range(40) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "kMaxChatTemplateOutputBytes");
  ExpectLimit("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
              "kMaxChatTemplateOutputBytes");
  ExpectLimit("{{ 'a' | indent(1000000000) }}", "kMaxChatTemplateOutputBytes");
  ExpectLimit("{% set l = ['x' * 10000000] * 1000 %}{{ l }}", "kMaxChatTemplateOutputBytes");
  ExpectLimit("{% set l = ['x' * 10000000] * 1000 %}{{ l | tojson }}",
              "kMaxChatTemplateOutputBytes");
  // Strings built and dropped again count too.
  ExpectLimit("{% for i in range(100000) %}{% set s = 'x' * 10000 %}{% endfor %}",
              "kMaxChatTemplateBuiltBytes");
}

TEST(ChatTemplateLimits, ListsStopAtTheStepAndMemoryLimits) {
  ExpectLimit("{{ ([1] * 100000000) | length }}", "kMaxChatTemplateSteps");
  ExpectLimit("{{ ([1] * 9223372036854775807) | length }}", "kMaxChatTemplateSteps");
  ExpectLimit(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}"
      "{% set ns.l = ns.l + ns.l %}{% endfor %}",
      "kMaxChatTemplateBuiltBytes");
  ExpectLimit("{% set s = 'a,' * 8000000 %}{{ s.split(',') | length }}",
              "kMaxChatTemplateBuiltBytes");
  ExpectLimit("{% set s = 'ab' * 4000000 %}{% for c in s %}{% endfor %}",
              "kMaxChatTemplateBuiltBytes");
  ExpectLimit(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
      "{% set ns.l = [ns.l] %}{% endfor %}",
      "nested deeper than 256 levels");
  ExpectLimit("{{ 2 ** 100 }}", "integer overflow");
}

// A namespace that holds itself prints, and is freed with the render (no reference cycle).
TEST(ChatTemplateLimits, SelfReferentialNamespaces) {
  auto t = ChatTemplate::Parse(
      "{% set ns = namespace() %}{% set ns.self = ns %}{% set ns.l = [ns, ns] %}"
      "{% macro m() %}{{ ns.l | length }}{% endmacro %}{% set ns.m = m %}{{ ns.self.self.l }}"
      "{{ ns.m() }}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(nlohmann::json::object());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "[<Namespace>, <Namespace>]2");
}

// Ordinary conversations stay far below every limit.
TEST(ChatTemplateLimits, LongConversationsRender) {
  nlohmann::json messages = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i) {
    messages.push_back(
        {{"role", i % 2 ? "assistant" : "user"}, {"content", "message " + std::to_string(i)}});
  }
  auto t = ChatTemplate::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% if m.role == 'user' %}"
      "{% set ns.n = ns.n + 1 %}{% endif %}<|{{ m.role }}|>{{ m.content | trim }}"
      "{% if not loop.last and messages[loop.index0 + 1].role == m.role %}!{% endif %}"
      "{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  auto r = t->Render(nlohmann::json{{"messages", messages}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->substr(r->size() - 4), "2500");
}

}  // namespace
}  // namespace llm
