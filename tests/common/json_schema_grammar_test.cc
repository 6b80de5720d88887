// The JSON / JSON Schema grammars: what they accept and reject, the errors for schemas they
// cannot enforce, and (the main check) random texts drawn from each grammar byte by byte parse
// with nlohmann::json and validate against the schema with the small independent validator
// below, and the walk never reaches a dead end.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "common/grammar_matcher.h"
#include "common/json_schema_grammar.h"
#include "tests/common/json_schema_validator.h"

namespace llm {
namespace {

using ojson = nlohmann::ordered_json;

Grammar SchemaGrammar(const std::string& schema) {
  auto g = JsonSchemaGrammar(ojson::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : Grammar{};
}

std::string SchemaError(const std::string& schema) {
  auto g = JsonSchemaGrammar(ojson::parse(schema));
  return g.ok() ? std::string("ok") : g.status().message();
}

TEST(JsonObjectGrammar, AcceptsObjects) {
  auto g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  for (const char* text : {
           R"({})",
           R"({"a":1})",
           R"({ "a" : [1, 2.5, -3e10, true, false, null, "x"], "b": {"c": {}} })",
           "{\n  \"k\": \"caf\xC3\xA9 \\u00e9 \\n \\\" \xF0\x9F\x98\x80\"\n}",
           R"({"n": 0, "m": -0.5, "e": 1E+5})",
           R"({"":[[],[{}]]})",
       }) {
    EXPECT_TRUE(GrammarAccepts(*g, text)) << text;
  }
}

TEST(JsonObjectGrammar, RejectsWhatIsNotAJsonObject) {
  auto g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  for (const char* text : {
           "",
           "[]",
           "\"x\"",
           "{",
           R"({"a":1,})",
           R"({a:1})",
           R"({'a':1})",
           R"({"a":01})",
           R"({"a":1.})",
           R"({"a":.5})",
           R"({"a":+1})",
           R"({"a":tru})",
           R"({"a":1} )",  // nothing after the value
           R"({"a":1}{})",
           "{\"a\":\"\x01\"}",              // control character in a string
           "{\"a\":\"\xC0\xAF\"}",          // overlong UTF-8
           "{\"a\":\"\xED\xA0\x80\"}",      // a UTF-16 surrogate in UTF-8
           "{\"a\":\"\xF5\x80\x80\x80\"}",  // past U+10FFFF
           R"({"a":"\x"})",
           R"({"a":12345678901234567})",  // 17 integer digits: past the bound
           R"({"a":"\ud800"})",           // an unpaired surrogate escape
           R"({"a":1e100})",              // 3 exponent digits: past the bound
           "{\"a\":1,  \n\n}",
       }) {
    EXPECT_FALSE(GrammarAccepts(*g, text)) << text;
  }
}

TEST(JsonSchemaGrammar, PropertiesInSchemaOrderOptionalOnesMayBeLeftOut) {
  const Grammar g = SchemaGrammar(R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
      "required":["age"]})");
  EXPECT_TRUE(GrammarAccepts(g, R"({"age":3})"));
  EXPECT_TRUE(GrammarAccepts(g, R"({"name":"x","age":3})"));
  EXPECT_TRUE(GrammarAccepts(g, R"({"age":3,"tags":["a","b"]})"));
  EXPECT_TRUE(GrammarAccepts(g, R"({ "name": "x", "age": 3, "tags": [] })"));
  EXPECT_FALSE(GrammarAccepts(g, R"({})"));                    // age is required
  EXPECT_FALSE(GrammarAccepts(g, R"({"age":3,"name":"x"})"));  // schema order
  EXPECT_FALSE(GrammarAccepts(g, R"({"age":3.5})"));           // integer
  EXPECT_FALSE(GrammarAccepts(g, R"({"age":3,"other":1})"));   // no extra properties
  EXPECT_FALSE(GrammarAccepts(g, R"({"age":3,"tags":[1]})"));
  EXPECT_FALSE(GrammarAccepts(g, R"({,"age":3})"));
}

TEST(JsonSchemaGrammar, OnlyOptionalProperties) {
  const Grammar g = SchemaGrammar(
      R"({"properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})");
  for (const char* ok : {"{}", R"({"a":1})", R"({"b":1})", R"({"c":1})", R"({"a":1,"c":2})",
                         R"({"a":1,"b":2,"c":3})", R"({"b":1,"c":2})"}) {
    EXPECT_TRUE(GrammarAccepts(g, ok)) << ok;
  }
  for (const char* bad : {R"({,"b":1})", R"({"a":1,})", R"({"a":1"b":2})", R"({"c":1,"a":1})"}) {
    EXPECT_FALSE(GrammarAccepts(g, bad)) << bad;
  }
}

TEST(JsonSchemaGrammar, EnumConstAnyOfTypeLists) {
  const Grammar e = SchemaGrammar(R"({"enum":["red","green",3,null,{"k":[1]}]})");
  for (const char* ok : {R"("red")", R"("green")", "3", "null", R"({"k":[1]})"}) {
    EXPECT_TRUE(GrammarAccepts(e, ok)) << ok;
  }
  EXPECT_FALSE(GrammarAccepts(e, R"("blue")"));
  EXPECT_FALSE(GrammarAccepts(e, "4"));
  const Grammar c = SchemaGrammar(R"({"const":"only"})");
  EXPECT_TRUE(GrammarAccepts(c, R"("only")"));
  EXPECT_FALSE(GrammarAccepts(c, R"("other")"));
  const Grammar a = SchemaGrammar(R"({"anyOf":[{"type":"integer"},{"type":"boolean"}]})");
  EXPECT_TRUE(GrammarAccepts(a, "12"));
  EXPECT_TRUE(GrammarAccepts(a, "false"));
  EXPECT_FALSE(GrammarAccepts(a, R"("12")"));
  const Grammar t = SchemaGrammar(R"({"type":["string","null"]})");
  EXPECT_TRUE(GrammarAccepts(t, "null"));
  EXPECT_TRUE(GrammarAccepts(t, R"("s")"));
  EXPECT_FALSE(GrammarAccepts(t, "1"));
}

TEST(JsonSchemaGrammar, LengthAndItemBounds) {
  const Grammar s = SchemaGrammar(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(GrammarAccepts(s, R"("a")"));
  EXPECT_TRUE(GrammarAccepts(s, R"("ab")"));
  EXPECT_TRUE(GrammarAccepts(s, "\"a\xC3\xA9\""));  // characters, not bytes
  EXPECT_TRUE(GrammarAccepts(s, R"("a\nb")"));      // an escape is one character
  EXPECT_FALSE(GrammarAccepts(s, R"("abcd")"));
  const Grammar a =
      SchemaGrammar(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})");
  EXPECT_FALSE(GrammarAccepts(a, "[]"));
  EXPECT_TRUE(GrammarAccepts(a, "[1]"));
  EXPECT_TRUE(GrammarAccepts(a, "[1, 2]"));
  EXPECT_FALSE(GrammarAccepts(a, "[1,2,3]"));
}

TEST(JsonSchemaGrammar, RefsAndRecursion) {
  const Grammar g = SchemaGrammar(R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"]}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(GrammarAccepts(g, R"({"v":1})"));
  EXPECT_TRUE(GrammarAccepts(g, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"));
  EXPECT_FALSE(GrammarAccepts(g, R"({"v":1,"kids":[{}]})"));
  // pydantic's allOf-wrapped reference
  const Grammar p = SchemaGrammar(R"({"definitions":{"E":{"enum":["a","b"]}},"type":"object",
      "properties":{"e":{"allOf":[{"$ref":"#/definitions/E"}],"description":"x"}},"required":["e"]})");
  EXPECT_TRUE(GrammarAccepts(p, R"({"e":"b"})"));
  EXPECT_FALSE(GrammarAccepts(p, R"({"e":"c"})"));
}

TEST(JsonSchemaGrammar, FreeFormObjectsFollowAdditionalProperties) {
  const Grammar g = SchemaGrammar(R"({"type":"object","additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(GrammarAccepts(g, R"({"x":1,"y":2.5})"));
  EXPECT_FALSE(GrammarAccepts(g, R"({"x":"1"})"));
  const Grammar listed = SchemaGrammar(R"({"type":"object","properties":{}})");
  EXPECT_TRUE(GrammarAccepts(listed, "{ }"));
  EXPECT_FALSE(GrammarAccepts(listed, R"({"x":1})"));
  const Grammar none = SchemaGrammar(R"({"type":"object","additionalProperties":false})");
  EXPECT_TRUE(GrammarAccepts(none, "{}"));
  EXPECT_FALSE(GrammarAccepts(none, R"({"x":1})"));
}

TEST(JsonSchemaGrammar, UnsupportedOrBrokenSchemasNameTheKeywordAndPlace) {
  EXPECT_EQ(SchemaError(R"js({"type":"object","properties":{"a":{"pattern":"(?=x)"}}})js"),
            "'pattern': lookahead '(?=' is not supported (at offset 0) (at #/properties/a)");
  EXPECT_EQ(SchemaError(R"({"type":"array","uniqueItems":true})"),
            "'uniqueItems' is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":0.1001})"),
            "'multipleOf' is supported as an integer up to 1000 times a power of ten 10^-k, "
            "k <= 15 (such as 7, 0.01, 0.25 or 2.5) (at #)");
  EXPECT_EQ(SchemaError(R"({"maximum":3})"),
            "'maximum' is supported with \"type\": \"integer\" or \"number\" (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"strng"})"), "unknown type 'strng' (at #)");
  EXPECT_EQ(SchemaError(R"({"properties":{"a":{}},"required":["b"]})"),
            "required property 'b' is not in 'properties' (at #)");
  EXPECT_EQ(SchemaError(R"({"$ref":"http://x/y.json"})"),
            "'$ref' to another document ('http://x/y.json') is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"$ref":"#/$defs/missing"})"),
            "'$ref' #/$defs/missing points at nothing (at #)");
  EXPECT_EQ(SchemaError("false"), "the schema false accepts nothing (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"array","minItems":5000})"),
            "'minItems' above 1024 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"string","minLength":3,"maxLength":2})"),
            "'maxLength' is below 'minLength' (at #)");
  EXPECT_EQ(SchemaError("[1]"), "a schema must be an object or a boolean (at #)");
  EXPECT_EQ(SchemaError(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"),
            "the schema accepts no value (at #)");
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 70; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(SchemaError(deep).find("nest deeper than 64"), std::string::npos);
}

// Trim keeps only the committed state: the parse goes on exactly as without it.
TEST(GrammarMatcher, TrimKeepsTheCommittedParse) {
  auto g = JsonSchemaGrammar(ojson::parse(
      R"({"type":"array","items":{"type":"object","properties":{"a":{"type":"integer"},
          "b":{"type":"array","items":{"type":"string"}}},"required":["a"]}})"));
  ASSERT_TRUE(g.ok());
  const std::string text = R"([{"a": 1, "b": ["x", "y"]}, {"a": -20}, {"a": 3, "b": []}])";
  for (size_t cut = 0; cut <= text.size(); cut += 7) {
    GrammarMatcher m(std::make_shared<Grammar>(*g));
    ASSERT_TRUE(m.Consume(text.substr(0, cut)));
    const uint64_t before = m.generation();
    m.Trim(/*force=*/true);
    EXPECT_EQ(m.generation(), before + 1);
    EXPECT_TRUE(m.Consume(text.substr(cut))) << cut;
    EXPECT_TRUE(m.Finished(m.state())) << cut;
    GrammarMatcher bad(std::make_shared<Grammar>(*g));
    ASSERT_TRUE(bad.Consume(text.substr(0, cut)));
    bad.Trim(true);
    EXPECT_FALSE(bad.Consume("}}}")) << cut;  // still rejects what it rejected
  }
}

TEST(JsonSchemaGrammar, TextNestingCheck) {
  EXPECT_TRUE(JsonTextNestingAtMost(R"({"a":[{"b":"[[[[["}]})", 3));
  EXPECT_FALSE(JsonTextNestingAtMost(R"({"a":[{"b":[]}]})", 3));
  EXPECT_TRUE(JsonTextNestingAtMost(R"("\"[[[[")", 1));
  EXPECT_FALSE(JsonTextNestingAtMost(std::string(65, '['), kMaxSchemaTextDepth));
}

TEST(JsonSchemaGrammar, HugeBoundsAreCapsNotAllocations) {
  // maxLength / maxItems past the caps mean "unbounded": no million-rule grammar.
  const Grammar g = SchemaGrammar(
      R"({"type":"array","maxItems":2000000000,"items":{"type":"string","maxLength":2000000000}})");
  EXPECT_TRUE(GrammarAccepts(g, R"(["x","y"])"));
  EXPECT_LT(g.elements.size(), 10000u);
}

// Draws a text from the grammar: at each step one byte uniformly among those the matcher takes
// (stopping with probability 1/4 where the text is complete). Returns "" for texts past 4 KiB.
std::string RandomText(const Grammar& g, std::mt19937_64& rng, bool* dead_end) {
  GrammarMatcher m(std::make_shared<Grammar>(g));
  std::string text;
  while (text.size() < 4096) {
    const bool accepting = m.Accepting(m.state());
    if (accepting && (m.Finished(m.state()) || rng() % 4 == 0)) return text;
    std::vector<uint8_t> next;
    for (int b = 0; b < 256; ++b) {
      if (m.Advance(m.state(), static_cast<uint8_t>(b)) != GrammarMatcher::kDead) {
        next.push_back(static_cast<uint8_t>(b));
      }
    }
    if (next.empty()) {
      *dead_end = true;
      return text;
    }
    const char c = static_cast<char>(next[rng() % next.size()]);
    EXPECT_TRUE(m.Consume(std::string_view(&c, 1)));
    text += c;
  }
  return "";
}

TEST(JsonSchemaGrammar, RandomTextsParseAndValidate) {
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
         "age":{"type":"integer"},"ok":{"type":"boolean"},
         "kind":{"enum":["cat","dog"]},"score":{"type":["number","null"]}},
         "required":["name","kind"]})",
      R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"const":"x"},
         {"type":"object","properties":{"a":{"type":"null"}}}]},"minItems":1,"maxItems":4})",
      R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},
         "kids":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["v"]}},
         "$ref":"#/$defs/t"})",
      R"({"type":"object","additionalProperties":{"type":"string","maxLength":3}})",
      R"({})",
  };
  std::mt19937_64 rng(7);
  for (const std::string& text : schemas) {
    const ojson schema = ojson::parse(text);
    auto g = JsonSchemaGrammar(schema);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    int complete = 0;
    for (int i = 0; i < 200; ++i) {
      bool dead_end = false;
      const std::string out = RandomText(*g, rng, &dead_end);
      ASSERT_FALSE(dead_end) << "no byte continues " << out;
      if (out.empty()) continue;  // too long
      ++complete;
      const ojson value = ojson::parse(out, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << "not JSON: " << out;
      EXPECT_TRUE(test::ValidateJson(value, schema)) << out << "\nschema: " << text;
    }
    EXPECT_GE(complete, 100) << text;
  }
}

TEST(JsonObjectGrammar, RandomTextsAreJsonObjects) {
  auto g = JsonObjectGrammar();
  ASSERT_TRUE(g.ok());
  std::mt19937_64 rng(11);
  int complete = 0;
  for (int i = 0; i < 300; ++i) {
    bool dead_end = false;
    const std::string out = RandomText(*g, rng, &dead_end);
    ASSERT_FALSE(dead_end) << out;
    if (out.empty()) continue;
    ++complete;
    const ojson value = ojson::parse(out, nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << out;
    EXPECT_TRUE(value.is_object()) << out;
  }
  EXPECT_GE(complete, 100);
}

}  // namespace
}  // namespace llm
