// Chat template features (common/chat_template.h), one test per feature. Every expected string
// is what Python jinja2 3.1.6 renders with the environment transformers uses
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson,
// raise_exception and strftime_now), checked when the test was written.
#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "common/chat_template.h"

namespace llm {
namespace {

using nlohmann::ordered_json;

std::string Render(const std::string& source, const char* context) {
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) return "parse error: " + t.status().ToString();
  auto r = t->Render(ordered_json::parse(context));
  return r.ok() ? *r : "render error: " + r.status().ToString();
}

void ExpectError(const std::string& source, const char* context, const std::string& message) {
  auto t = ChatTemplate::Parse(source);
  ASSERT_TRUE(t.ok()) << source << ": " << t.status().ToString();
  auto r = t->Render(ordered_json::parse(context));
  ASSERT_FALSE(r.ok()) << source << " rendered " << *r;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << source;
  EXPECT_NE(r.status().message().find(message), std::string::npos)
      << source << ": " << r.status().message();
  EXPECT_NE(r.status().message().find("chat template line "), std::string::npos)
      << r.status().message();
}

// if / elif / else, and `if` expressions with and without else.
TEST(ChatTemplateFeatures, IfElifElse) {
  EXPECT_EQ(Render("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}",
                   R"({"a": 0, "b": "", "c": [1]})"),
            "C");
  EXPECT_EQ(Render("{% if a %}A{% elif b %}B{% else %}D{% endif %}", R"({"a": 0, "b": null})"),
            "D");
  EXPECT_EQ(
      Render("{{ 'y' if x else 'n' }}|{{ 'y' if not x }}|{{ 1 if false else 2 if false else 3 }}",
             R"({"x": false})"),
      "n|y|3");
}

// loop.index/index0/first/last/length/revindex/revindex0/previtem/nextitem/cycle.
TEST(ChatTemplateFeatures, ForLoopVariables) {
  EXPECT_EQ(
      Render(
          "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last "
          "}}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}",
          R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi  "}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]})"),
      "10TrueFalse443|21FalseFalse432|32FalseFalse421|43FalseTrue410|");
  EXPECT_EQ(Render("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ "
                   "loop.cycle('a', 'b') }};{% endfor %}",
                   "{}"),
            "-2-a;1-3-b;2--a;");
  EXPECT_EQ(Render("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% "
                   "endfor %}{{ loop.index }}|{% endfor %}",
                   "{}"),
            "11x 21y 1|12x 22y 2|");
}

// for-else, `for x in y if cond` (loop.length counts kept items), tuple targets, dicts and strings.
TEST(ChatTemplateFeatures, ForElseFilterAndTargets) {
  EXPECT_EQ(Render("{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in [2, 4] if x is "
                   "odd %}{{ x }}{% else %}none{% endfor %}",
                   "{}"),
            "empty|none");
  EXPECT_EQ(
      Render("{% for x in [1, 2, 3, 4, 5] if x is odd %}{{ x }}/{{ loop.length }} {% endfor %}",
             "{}"),
      "1/3 3/3 5/3 ");
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k "
                   "}}{% endfor %}{% for (a, b) in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}",
                   R"({"d": {"b": 1, "a": 2}})"),
            "b=1;a=2;ba37");
  EXPECT_EQ(
      Render("{% for c in 'héllo' %}[{{ c }}]{% endfor %}{% for x in missing %}never{% endfor %}",
             "{}"),
      "[h][é][l][l][o]");
}

// loopcontrols.
TEST(ChatTemplateFeatures, BreakAndContinue) {
  EXPECT_EQ(Render("{% for x in range(10) %}{% if x == 5 %}{% break %}{% endif %}{% if x is even "
                   "%}{% continue %}{% endif %}{{ x }}{% endfor %}",
                   "{}"),
            "13");
}

// set in loops does not leak (jinja2 scoping); namespace() attributes do.
TEST(ChatTemplateFeatures, SetScopingAndNamespace) {
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}{% "
                   "if true %}{% set x = 3 %}{% endif %}{{ x }}",
                   "{}"),
            "213");
  EXPECT_EQ(Render("{% set ns = namespace(n=0, s='') %}{% for i in range(3) %}{% set ns.n = ns.n + "
                   "i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}",
                   "{}"),
            "3 012");
  EXPECT_EQ(Render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", "{}"),
            "12(1, 2)");
  EXPECT_EQ(Render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "{}"), "3[]");
}

// {% set x %}...{% endset %} with and without filters.
TEST(ChatTemplateFeatures, SetBlocks) {
  EXPECT_EQ(Render("{% set x %}  block {{ 1 + 1 }} {% endset %}[{{ x }}]{% set y | trim | upper %} "
                   " block {% endset %}[{{ y }}]",
                   "{}"),
            "[  block 2 ][BLOCK]");
}

// defaults, keyword arguments, varargs/kwargs, recursion, scope at call time.
TEST(ChatTemplateFeatures, Macros) {
  EXPECT_EQ(Render("{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) "
                   "}}|{{ m(1, 2) }}|{{ m(1, c=3) }}|{{ m(a='x', b='y') }}",
                   "{}"),
            "1BNone|12None|1B3|xyNone");
  EXPECT_EQ(
      Render("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", "{}"),
      "(1, 2){'k': 3}");
  EXPECT_EQ(Render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% "
                   "endif %}{% endmacro %}{{ fact(5) }}",
                   "{}"),
            "120");
  EXPECT_EQ(
      Render("{% set g = 'G' %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 'H' %}{{ m() }}",
             "{}"),
      "H");
  EXPECT_EQ(
      Render(
          "{% macro render(m) %}{{ m.role | upper }}: {{ m.content | trim }}\n{% endmacro %}{% for "
          "m in messages %}{{ render(m) }}{% endfor %}",
          R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi  "}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]})"),
      "SYSTEM: Be brief.\nUSER: Hi\nASSISTANT: Hello!\nUSER: Bye\n");
  EXPECT_EQ(Render("{% macro add(a, b) %}{{ a + b }}{% endmacro %}{% set args = [1, 2] %}{{ "
                   "add(*args) }}{{ add(**{'a': 3, 'b': 4}) }}",
                   "{}"),
            "37");
}

// {% call %} and caller(), with arguments.
TEST(ChatTemplateFeatures, CallBlocks) {
  EXPECT_EQ(
      Render(
          "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %}",
          "{}"),
      "[inside]");
  EXPECT_EQ(Render("{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% "
                   "endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}",
                   "{}"),
            "<1><2>");
}

// {% filter %} with arguments and chains.
TEST(ChatTemplateFeatures, FilterBlocks) {
  EXPECT_EQ(Render("{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% filter replace('a', 'o') | "
                   "trim %}  banana  {% endfilter %}",
                   "{}"),
            "HELLO X|bonono");
}

// `is` tests.
TEST(ChatTemplateFeatures, Tests) {
  EXPECT_EQ(
      Render("{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ n is none }}{{ 's' is "
             "string }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ 1 is number }}{{ "
             "1.5 is number }}{{ 1 is integer }}{{ 1.0 is integer }}{{ 1.0 is float }}{{ true is "
             "boolean }}{{ true is true }}{{ 0 is false }}{{ false is false }}",
             R"({"x": 1, "n": null, "d": {}, "l": [1]})"),
      "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueFalseTrue");
  EXPECT_EQ(Render("{{ 1 is eq 1 }}{{ 1 is equalto(2) }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 "
                   "}}{{ 2 is le 2 }}{{ 2 is ge 3 }}{{ 3 is not odd }}{{ 4 is even }}{{ 9 is "
                   "divisibleby 3 }}{{ 'a' is in 'abc' }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ "
                   "y is not defined }}{{ f is callable }}",
                   "{}"),
            "TrueFalseTrueTrueTrueTrueFalseFalseTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(Render("{{ missing is iterable }}{{ missing is sequence }}{{ none is iterable }}{{ "
                   "none is sameas none }}{{ 'a' ~ 'b' is string }}",
                   "{}"),
            "TrueTrueFalseTrueaTrue");
}

// arithmetic, `~`, `in`/`not in`, chained comparisons, equality across int/float/bool.
TEST(ChatTemplateFeatures, Operators) {
  EXPECT_EQ(
      Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7 % 3 }} {{ -7 "
             "% 3 }} {{ 7.5 % 2 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 4 / 2 }} {{ - 3 ** 2 }}",
             "{}"),
      "3 -4 3.5 1024 0.5 1 2 1.5 7 9 2.0 9");
  EXPECT_EQ(Render("{{ 'ab' * 3 }} {{ [1] * 3 }} {{ [1, 2] + [3] }} {{ 'a' ~ 1 ~ none ~ true ~ "
                   "missing }} {{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ [1, 2] < [1, 3] }}",
                   "{}"),
            "ababab [1, 1, 1] [1, 2, 3] a1NoneTrue True False True");
  EXPECT_EQ(Render("{{ 'a' in ['a', 'b'] }} {{ 'c' not in 'abc' }} {{ 'k' in {'k': 1} }} {{ 1 in "
                   "[1.0] }} {{ not 1 in [2] }} {{ 'x' in missing }}",
                   "{}"),
            "True False True True True False");
  EXPECT_EQ(Render("{{ 1 == 1.0 }} {{ true == 1 }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ "
                   "(1, 2) == [1, 2] }} {{ none == none }} {{ missing == none }}",
                   "{}"),
            "True True True False True False");
  EXPECT_EQ(
      Render(
          "{{ 'a' + 'b' | upper }} {{ ('a' + 'b') | upper }} {{ -x | abs }} {{ '%s and %s' % ('x', "
          "'y') }} {{ '%5.2f|%-4s|%03d|%x' % (3.14159, 'ab', 7, 255) }} {{ '%(a)s' % {'a': 1} }}",
          R"({"x": 3})"),
      "aB AB 3 x and y  3.14|ab  |007|ff 1");
}

// `.attr`, `[item]`, `.0`, negative indexes, slices with steps, strings by code point.
TEST(ChatTemplateFeatures, AttributesItemsAndSlices) {
  EXPECT_EQ(Render("{{ x.0 }}{{ x[1] }}{{ x[-1] }}{{ x[5] }}{{ s[0] }}{{ s[-1] }}{{ d['k'] }}{{ "
                   "d.k }}{{ d.missing }}{{ d['missing'] }}{{ none.x }}",
                   R"({"x": [1, 2, 3], "s": "héllo", "d": {"k": "v"}})"),
            "123hovv");
  EXPECT_EQ(Render("{{ x[1:] }}{{ x[:-1] }}{{ x[::-1] }}{{ x[::2] }}{{ x[-2:] }}{{ x[10:] }}{{ "
                   "x[3:0:-1] }}|{{ s[::-1] }}|{{ s[1:3] }}",
                   R"({"x": [1, 2, 3, 4], "s": "héllo"})"),
            "[2, 3, 4][1, 2, 3][4, 3, 2, 1][1, 3][3, 4][][4, 3, 2]|olléh|él");
  EXPECT_EQ(
      Render(
          "{{ messages[0]['content'] }}|{{ messages[-1].role }}|{{ messages[5] is defined }}",
          R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi  "}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]})"),
      "Be brief.|user|False");
}

// Python's str()/repr() of values.
TEST(ChatTemplateFeatures, LiteralsAndPrinting) {
  EXPECT_EQ(
      Render("{{ [1, 'a', none, true, 1.5, {'k': [1]}] }} {{ (1,) }} {{ () }} {{ (1, 'b') }} {{ 1, "
             "2 }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1_000 }} {{ 10 / 3 }}",
             "{}"),
      "[1, 'a', None, True, 1.5, {'k': [1]}] (1,) () (1, 'b') (1, 2) 1.0 1e+20 0.1 1e-05 0.0001 "
      "1000 3.3333333333333335");
  EXPECT_EQ(Render("{{ \"it's\" }} {{ ['it\\'s', \"a\\\"b\", 'a\\nb', 'é'] }} {{ 'a' 'b' }} {{ "
                   "'\\u00e9\\t|' }}",
                   "{}"),
            "it's [\"it's\", 'a\"b', 'a\\nb', 'é'] ab é\t|");
}

// Python str methods.
TEST(ChatTemplateFeatures, StringMethods) {
  EXPECT_EQ(Render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n\\na\\n'.lstrip('\\n') "
                   "}}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a "
                   "b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}",
                   "{}"),
            "a b|a|a\n|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']");
  EXPECT_EQ(Render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ "
                   "'aaa'.replace('a', 'b', 2) }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'hello "
                   "world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ '-'.join(['a', 'b']) }}|{{ "
                   "'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}{{ 'abcb'.count('b') }}|{{ '{} "
                   "{}'.format(1, 'x') }}{{ '{0}{name}'.format(1, name='n') }}",
                   "{}"),
            "TrueTrue|bba|ABab|Hello World|Hello|a-b|132|1 x1n");
  EXPECT_EQ(Render("{{ 'héllo wörld'.upper() }}|{{ 'ÉCOLE'.lower() }}|{{ 'ÉcOle'.swapcase() }}|{{ "
                   "'12'.isdigit() }}{{ 'é'.isalpha() }}{{ 'aBc'.islower() }}",
                   "{}"),
            "HÉLLO WÖRLD|école|éCoLE|TrueTrueFalse");
  EXPECT_EQ(Render("{{ message.content.split('</think>')[-1].lstrip('\\n') }}|{{ "
                   "message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1] }}",
                   R"({"message": {"content": "<think>r</think>\n\nanswer"}})"),
            "answer|r");
}

// items(), keys(), values(), get().
TEST(ChatTemplateFeatures, DictMethods) {
  EXPECT_EQ(Render("{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 'dflt') }}{{ d.keys() | list "
                   "}}{{ d.values() | list }}{{ d.items() | list }}",
                   R"({"d": {"a": 1, "b": 2}})"),
            "1Nonedflt['a', 'b'][1, 2][('a', 1), ('b', 2)]");
}

// jinja2's filters.
TEST(ChatTemplateFeatures, Filters) {
  EXPECT_EQ(
      Render("{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ [1, 2] | length }}{{ 'héllo' | "
             "length }}{{ {'a': 1} | count }}{{ missing | length }}|{{ missing | default('d') }}{{ "
             "'' | default('d', true) }}{{ '' | d('e') }}{{ 0 | default('z') }}",
             "{}"),
      "x|a|2510|dd0");
  EXPECT_EQ(
      Render("{{ [1, 'a'] | join(', ') }}|{{ users | join(',', attribute='n') }}|{{ ['a', 'b'] | "
             "map('upper') | join }}|{{ users | map(attribute='n') | list }}|{{ users | "
             "map(attribute='z', default='D') | list }}|{{ [[1, 2], [3]] | map('length') | list }}",
             R"({"users": [{"n": 1}, {"n": 2}]})"),
      "1, a|1,2|AB|[1, 2]|['D', 'D']|[2, 1]");
  EXPECT_EQ(
      Render(
          "{{ [1, 2, 3] | select('odd') | list }}{{ [1, 2, 3] | reject('odd') | list }}{{ [1, 0, "
          "2] | select | list }}{{ users | selectattr('active') | map(attribute='name') | list "
          "}}{{ users | rejectattr('active') | map(attribute='name') | join(',') }}{{ users | "
          "selectattr('age', 'gt', 20) | map(attribute='name') | first }}{{ users | "
          "selectattr('name', 'equalto', 'b') | list | length }}",
          R"({"users": [{"name": "a", "active": true, "age": 30}, {"name": "b", "active": false, "age": 10}]})"),
      "[1, 3][2][1, 2]['a']ba1");
  EXPECT_EQ(Render("{{ [1, 2] | first }}{{ [1, 2] | last }}{{ 'ab' | first }}{{ [] | first }}|{{ "
                   "'abc' | list }}{{ 'abc' | reverse }}{{ [1, 2] | reverse | list }}|{{ 'ab' | "
                   "upper }}{{ 'AB' | lower }}{{ 'aXbX' | replace('X', '-') }}{{ x | safe }}{{ 5 | "
                   "string }}{{ none | string }}",
                   R"({"x": "<b>"})"),
            "12a|['a', 'b', 'c']cba[2, 1]|ABaba-b-<b>5None");
  EXPECT_EQ(Render("{{ '3' | int + 1 }}{{ '3.7' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | "
                   "int }}{{ '0x1f' | int(0, 16) }}|{{ '2.5' | float }}{{ 'x' | float }}{{ 3 | "
                   "float }}|{{ -3 | abs }}{{ 2.567 | round(2) }}{{ 2.5 | round }}{{ 3.5 | round "
                   "}}{{ 2.1 | round(method='ceil') }}{{ 5 | round }}",
                   "{}"),
            "4307331|2.50.03.0|32.572.04.03.05");
  EXPECT_EQ(
      Render("{{ d | items | list }}{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}{{ "
             "[1, 2, 1, 'a', 'A'] | unique | list }}{{ [1, 2, 3] | sum }}{{ [1.5, 2] | sum }}{{ "
             "users | sum(attribute='n') }}{{ [3, 1, 2] | min }}{{ [3, 1, 2] | max }}",
             R"({"d": {"b": 1, "a": 2, "C": 3}, "users": [{"n": 1}, {"n": 2}]})"),
      "[('b', 1), ('a', 2), ('C', 3)]a=2;b=1;C=3;[1, 2, 'a']63.5313");
  EXPECT_EQ(Render("{{ [3, 1, 2] | sort }}{{ [3, 1, 2] | sort(reverse=true) }}{{ ['b', 'A', 'c'] | "
                   "sort }}{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}{{ users | "
                   "sort(attribute='n', reverse=true) | map(attribute='n') | list }}",
                   R"({"users": [{"n": 1}, {"n": 2}]})"),
            "[1, 2, 3][3, 2, 1]['A', 'b', 'c']['A', 'b', 'c'][2, 1]");
  EXPECT_EQ(Render("{{ 'hello world-foo' | title }}|{{ 'hELLO' | capitalize }}|{{ 'a b  c' | "
                   "wordcount }}|{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) "
                   "}}|{{ '%s-%d' | format('a', 3) }}|{{ 'a<b>&\"' | escape }}|{{ x | attr('a') }}",
                   R"({"x": {"a": 5}})"),
            "Hello World-Foo|Hello|3|a\n  b\n\n  c|  a\n  b|a-3|a&lt;b&gt;&amp;&#34;|");
}

// transformers' tojson: json.dumps(ensure_ascii=False) with indent, separators, sort_keys.
TEST(ChatTemplateFeatures, ToJson) {
  EXPECT_EQ(Render("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}|{{ {} "
                   "| tojson }}",
                   R"({"d": {"b": [1, {"x": null}], "a": "s"}})"),
            "{\"b\": [1, {\"x\": null}], \"a\": \"s\"}|{\n  \"b\": [\n    1,\n    {\n      \"x\": "
            "null\n    }\n  ],\n  \"a\": \"s\"\n}|[]|{}");
  EXPECT_EQ(Render("{{ 'é\"\\n\\u2028<' | tojson }}|{{ 'é😀' | tojson(ensure_ascii=true) }}|{{ "
                   "[1.0, 1e20, none, true, 2] | tojson }}|{{ d | tojson(sort_keys=true) }}|{{ d | "
                   "tojson(separators=(',', ':')) }}|{{ (1, 2) | tojson }}",
                   R"({"d": {"b": 1, "a": "s"}})"),
            "\"é\\\"\\n\342\200\250<\"|\"\\u00e9\\ud83d\\ude00\"|[1.0, 1e+20, null, true, "
            "2]|{\"a\": \"s\", \"b\": 1}|{\"b\":1,\"a\":\"s\"}|[1, 2]");
}

// `-` markers, trim_blocks, lstrip_blocks, `+`, comments, CRLF and the dropped trailing newline.
TEST(ChatTemplateFeatures, WhitespaceControl) {
  EXPECT_EQ(Render("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", "{}"), "a\n  b\nc");
  EXPECT_EQ(Render("a  {%- if true -%}  b  {%- endif -%}  c", "{}"), "abc");
  EXPECT_EQ(Render("a  {{- 'x' -}}  c\n{{ 'y' }}\n  {{ 'z' }}", "{}"), "axc\ny\n  z");
  EXPECT_EQ(Render("  {#- comment -#}  x\n  {# c #}\ny", "{}"), "x\ny");
  EXPECT_EQ(Render("{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", "{}"), "  1\n  2\n");
  EXPECT_EQ(Render("{%+ if true %}x{% endif +%}\n  y", "{}"), "x\n  y");
  EXPECT_EQ(Render("a\r\nb\r\n{% if true %}\r\nc{% endif %}\r\n", "{}"), "a\nb\nc");
  EXPECT_EQ(Render("{% raw %}{{ not rendered }}{% endraw %} {{ 1 }}", "{}"),
            "{{ not rendered }} 1");
}

// jinja2's default Undefined: prints as '', falsy, iterates as empty, is an error when used.
TEST(ChatTemplateFeatures, UndefinedValues) {
  EXPECT_EQ(
      Render("{{ missing }}|{{ missing | default('d') }}|{{ missing | length }}|{% for x in "
             "missing %}x{% endfor %}|{{ missing ~ 'a' }}|{{ missing == none }}|{{ not missing "
             "}}|{{ missing | string }}|{{ missing | list }}|{{ d.missing is defined }}",
             R"({"d": {}})"),
      "|d|0||a|False|True||[]|False");
}

// Errors are InvalidArgument with jinja2's message and the line of the tag.
TEST(ChatTemplateFeatures, ErrorsNameTheProblemLikeJinja2) {
  ExpectError("{{ missing.attr }}", "{}",
              "'missing' is undefined");  // jinja2: UndefinedError: 'missing' is undefined
  ExpectError("{{ missing['k'] }}", "{}",
              "'missing' is undefined");  // jinja2: UndefinedError: 'missing' is undefined
  ExpectError("{{ d.missing.x }}", R"({"d": {}})",
              "'dict object' has no attribute 'missing'");  // jinja2: UndefinedError: 'dict object'
                                                            // has no attribute 'missing'
  ExpectError("{{ missing + 1 }}", "{}",
              "'missing' is undefined");  // jinja2: UndefinedError: 'missing' is undefined
  ExpectError("{{ missing() }}", "{}",
              "'missing' is undefined");  // jinja2: UndefinedError: 'missing' is undefined
  ExpectError("\n\n{{ raise_exception('boom: ' ~ 1) }}", "{}",
              "line 3: boom: 1");  // jinja2: TemplateError: boom: 1
  ExpectError("{{ 1 + 'a' }}", "{}",
              "unsupported operand type(s) for +: 'int' and 'str'");  // jinja2: TypeError:
                                                                      // unsupported operand type(s)
                                                                      // for +: 'int' and 'str
  ExpectError(
      "{{ missing | tojson }}", "{}",
      "Object of type Undefined is not JSON serializable");  // jinja2: TypeError: Object of type
                                                             // Undefined is not JSON serializable
  ExpectError(
      "{% for x in none %}{% endfor %}", "{}",
      "'NoneType' object is not iterable");  // jinja2: TypeError: 'NoneType' object is not iterable
  ExpectError("{{ 'x'.split('') }}", "{}",
              "empty separator");  // jinja2: ValueError: empty separator
  ExpectError("{{ 1 // 0 }}", "{}",
              "division by zero");  // jinja2: ZeroDivisionError: integer division or modulo by zero
  ExpectError("{{ [1, 2][::0] }}", "{}",
              "slice step cannot be zero");  // jinja2: ValueError: slice step cannot be zero
  ExpectError("{{ 'a' < 1 }}", "{}",
              "'<' not supported between instances of 'str' and 'int'");  // jinja2: TypeError: '<'
                                                                          // not supported between
                                                                          // instances of 'str' and
  ExpectError(
      "{% set a, b = [1] %}", "{}",
      "not enough values to unpack (expected 2, got 1)");  // jinja2: ValueError: not enough values
                                                           // to unpack (expected 2, got 1)
  ExpectError(
      "{% set x = 1 %}{% set x.y = 2 %}", "{}",
      "not a namespace()");  // jinja2: TemplateRuntimeError: cannot assign attribute on non-namespa
}

// A tag ends only outside brackets (jinja2's lexer), and integers beyond int64 keep their
// digits (Python ints are unbounded).
TEST(ChatTemplateFeatures, BracketsInTagsAndBigIntegers) {
  EXPECT_EQ(
      Render("{{ {'a': {'b': 1}}['a'].b }}{% set d = {'k': [1, {'x': 2}]} %}{{ d.k[1].x }}", "{}"),
      "12");
  EXPECT_EQ(Render("{{ n }} {{ n | tojson }} {{ n is integer }}", R"({"n": 12345678901234567890})"),
            "12345678901234567890 12345678901234567890 True");
}

// transformers' strftime_now(format) is datetime.now().strftime(format).
TEST(ChatTemplateFeatures, StrftimeNow) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char year[16];
  std::strftime(year, sizeof(year), "%Y", &tm);
  EXPECT_EQ(Render("{{ strftime_now('%Y') }}|{{ strftime_now is defined }}", "{}"),
            std::string(year) + "|True");
}

// transformers' {% generation %} (AssistantTracker) renders its body.
TEST(ChatTemplateFeatures, GenerationBlock) {
  EXPECT_EQ(Render("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                   "{{ m.content }}{% endgeneration %}{% else %}[{{ m.content }}]{% endif %}"
                   "{% endfor %}",
                   R"({"messages": [{"role": "user", "content": "q"},
                                     {"role": "assistant", "content": "a"}]})"),
            "[q]a");
}

// tojson keeps the key order of an ordered_json context (a plain nlohmann::json sorts keys).
TEST(ChatTemplateFeatures, ToJsonKeepsTheContextsKeyOrder) {
  const char* context =
      R"({"tool": {"name": "f", "description": "d", "arguments": {"z": 1, "a": 2}}})";
  EXPECT_EQ(Render("{{ tool | tojson }}", context),
            R"({"name": "f", "description": "d", "arguments": {"z": 1, "a": 2}})");
  auto t = ChatTemplate::Parse("{{ tool | tojson }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render(nlohmann::json::parse(context)),
            R"({"arguments": {"a": 2, "z": 1}, "description": "d", "name": "f"})");
}

// What the engine does not have is a kUnimplemented parse error naming it and the line.
TEST(ChatTemplateFeatures, UnsupportedSyntaxIsAParseError) {
  for (const char* source :
       {"{% include 'x.jinja' %}", "{% extends 'base' %}", "{% import 'm' as m %}",
        "{% for x in y recursive %}{% endfor %}", "{{ x | no_such_filter }}",
        "{{ x is no_such_test }}", "{% block b %}{% endblock %}"}) {
    auto t = ChatTemplate::Parse(std::string("\n") + source);
    ASSERT_FALSE(t.ok()) << source;
    EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented) << source;
    EXPECT_NE(t.status().message().find("line 2"), std::string::npos) << t.status().message();
  }
  for (const char* source : {"{% break %}",
                             "{% for x in y %}{% macro m() %}{% continue %}"
                             "{% endmacro %}{% endfor %}",
                             "{% macro m(a=1, b) %}{% endmacro %}", "{{ f(a=1, 2) }}", "{% if x %}",
                             "{{ 1 +  }}", "{% set %}", "{% endmacro %}"}) {
    auto t = ChatTemplate::Parse(source);
    ASSERT_FALSE(t.ok()) << source;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << source;
  }
}

}  // namespace
}  // namespace llm
