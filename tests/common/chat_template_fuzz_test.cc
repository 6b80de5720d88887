// Chat template bugs found with tests/fuzz/fuzz_chat_template: a template nested a few thousand
// levels deep (parentheses, `not not ...`, a long `+` chain, nested blocks) overflowed the stack
// while parsing or rendering (now a parse error naming the line beyond kMaxTemplateNesting), and
// integer arithmetic overflowed int64 (UB; now a render error).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/chat_template.h"

namespace llm {
namespace {

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void ExpectTooDeep(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  ASSERT_FALSE(t.ok()) << source.substr(0, 80);
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("nested deeper than 128 levels"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("line"), std::string::npos) << t.status().message();
}

TEST(ChatTemplateNesting, DeepTemplatesAreErrorsNotStackOverflows) {
  const int n = 100000;
  ExpectTooDeep("{{ " + Repeat("(", n) + "1" + Repeat(")", n) + " }}");
  ExpectTooDeep("{{ " + Repeat("not ", n) + "1 }}");
  ExpectTooDeep("{{ " + Repeat("- ", n) + "1 }}");
  ExpectTooDeep("{{ 1" + Repeat(" + 1", n) + " }}");
  ExpectTooDeep("{{ " + Repeat("[", n) + Repeat("]", n) + " }}");
  ExpectTooDeep("{{ x" + Repeat(".a", n) + " }}");
  ExpectTooDeep(Repeat("{% if true %}", n) + "x" + Repeat("{% endif %}", n));
  ExpectTooDeep(Repeat("{% for m in messages %}", n) + "x" + Repeat("{% endfor %}", n));
}

TEST(ChatTemplateNesting, NestingUpToTheLimitStillRenders) {
  const nlohmann::json context = {{"messages", nlohmann::json::array()}};
  auto t = ChatTemplate::Parse("{{ " + Repeat("(", 100) + "1" + Repeat(")", 100) + " }}" +
                               Repeat("{% if true %}", 100) + "x" + Repeat("{% endif %}", 100) +
                               "{{ 1" + Repeat(" + 1", 100) + " }}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto out = t->Render(context);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "1x101");
}

std::string RenderOrError(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) return "parse error: " + t.status().message();
  auto out = t->Render(nlohmann::json::object());
  return out.ok() ? *out : "error: " + out.status().message();
}

TEST(ChatTemplateArithmetic, IntegerOverflowIsAnErrorNotUndefinedBehaviour) {
  for (const char* source : {"{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}",
                             "{{ 4611686018427387904 * 2 }}", "{{ 3474786533798197 * 28013 }}",
                             "{{ -(-9223372036854775807 - 1) }}"}) {
    const std::string out = RenderOrError(source);
    EXPECT_NE(out.find("integer overflow"), std::string::npos) << source << " -> " << out;
  }
  EXPECT_EQ(RenderOrError("{{ 9223372036854775806 + 1 }}"), "9223372036854775807");
  EXPECT_EQ(RenderOrError("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
  // Python's modulo: the sign of the divisor.
  EXPECT_EQ(RenderOrError("{{ -7 % 3 }},{{ 7 % -3 }},{{ 7 % 3 }},{{ -7 % -3 }},{{ 6 % -3 }}"),
            "2,-2,1,-1,0");
}

// Loops nested over long lists (found as a 23 s input by the fuzzer) stop at the loop-iteration
// budget with an error instead of running for minutes.
TEST(ChatTemplateBudget, NestedLoopsOverLongListsStopWithAnError) {
  auto t = ChatTemplate::Parse(
      "{% for a in messages %}{% for b in messages %}{% for c in messages %}x"
      "{% endfor %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  nlohmann::json context = {{"messages", nlohmann::json::array()}};
  for (int i = 0; i < 1000; ++i) context["messages"].push_back(i);
  const auto rendered = t->Render(context);
  ASSERT_FALSE(rendered.ok());
  EXPECT_NE(rendered.status().message().find("loop iterations"), std::string::npos)
      << rendered.status().ToString();
  // A realistic conversation stays far below the budget.
  auto small = ChatTemplate::Parse("{% for m in messages %}[{{ m }}]{% endfor %}");
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->Render(context).ok());
}

}  // namespace
}  // namespace llm
