// The JSON Schema keywords built on the regex compiler and the integer ranges: "pattern" and
// "format" on strings (the text inside the quotes, JSON-escaped, matches), and integer
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (every integer in range accepted,
// its neighbours rejected, big ranges sampled).
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/grammar_matcher.h"
#include "common/integer_range_grammar.h"
#include "common/json_schema_grammar.h"
#include "tests/common/json_schema_validator.h"

namespace llm {
namespace {

using ojson = nlohmann::ordered_json;

Grammar SchemaGrammar(const std::string& schema) {
  auto g = JsonSchemaGrammar(ojson::parse(schema));
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  return g.ok() ? *g : Grammar{};
}

std::string SchemaError(const std::string& schema) {
  auto g = JsonSchemaGrammar(ojson::parse(schema));
  return g.ok() ? std::string("ok") : g.status().message();
}

// The JSON text of `s` as a string value.
std::string Quoted(const std::string& s) {
  return ojson(s).dump();
}

TEST(JsonSchemaPattern, TheWholeStringMatches) {
  const Grammar g = SchemaGrammar(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3,4}$"})");
  for (const char* ok : {"AB-123", "ZZ-0000"}) EXPECT_TRUE(GrammarAccepts(g, Quoted(ok))) << ok;
  for (const char* bad : {"AB-12", "ab-123", "AB-12345", "xAB-123", "AB-123 "}) {
    EXPECT_FALSE(GrammarAccepts(g, Quoted(bad))) << bad;
  }
  EXPECT_FALSE(GrammarAccepts(g, "AB-123"));  // a string: quoted
  // Without a type, a pattern means a string.
  const Grammar untyped = SchemaGrammar(R"({"pattern":"a+"})");
  EXPECT_TRUE(GrammarAccepts(untyped, R"("aaa")"));
  EXPECT_FALSE(GrammarAccepts(untyped, "1"));
}

TEST(JsonSchemaPattern, CharactersJsonMustEscapeComeOutEscaped) {
  const Grammar g = SchemaGrammar(R"({"type":"string","pattern":"say \"[^\"]{1,4}\"\\\\.*"})");
  EXPECT_TRUE(GrammarAccepts(g, R"("say \"hi\"\\")"));
  EXPECT_TRUE(GrammarAccepts(g, R"("say \"h\\i\"\\tail\t")"));
  EXPECT_TRUE(GrammarAccepts(g, "\"say \\\"\xC3\xA9\\\"\\\\\\u0001\""));
  EXPECT_FALSE(GrammarAccepts(g, R"("say "hi"\\")"));           // a raw quote ends the string
  EXPECT_FALSE(GrammarAccepts(g, "\"say \\\"hi\\\"\\\\\t\""));  // a raw tab
  // What it accepts parses as JSON to a string the pattern matches.
  const std::string text = R"("say \"a\nb\"\\ \"")";
  ASSERT_TRUE(GrammarAccepts(g, text));
  EXPECT_TRUE(std::regex_match(ojson::parse(text).get<std::string>(),
                               std::regex("say \"[^\"]{1,4}\"\\\\.*")));
}

TEST(JsonSchemaFormat, KnownFormats) {
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>>
      cases = {
          {"date",
           {"2024-02-29", "1999-12-31", "0001-01-01"},
           {"2024-13-01", "2024-00-10", "2024-1-1", "24-01-01", "2024-01-32", "2024-01-01T"}},
          {"time",
           {"23:59:59Z", "00:00:00+05:30", "12:30:15.123-08:00"},
           {"24:00:00Z", "12:60:00Z", "12:00:00", "12:00Z", "12:00:00.Z"}},
          {"date-time",
           {"2024-06-01T12:00:00Z", "2024-06-01T12:00:00.5+01:00"},
           {"2024-06-01 12:00:00Z", "2024-06-01T12:00:00", "2024-06-01"}},
          {"uuid",
           {"123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-6789-abcd-ef0123456789"},
           {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
            "g23e4567-e89b-12d3-a456-426614174000"}},
          {"email",
           {"a@b.co", "first.last+tag@mail.example.org", "x_y@a-b.c"},
           {"a@b", "@b.co", "a b@c.de", "a@-b.co", "a..b@c.de", "a@b.co."}},
      };
  for (const auto& [format, ok, bad] : cases) {
    const Grammar g = SchemaGrammar(R"({"type":"string","format":")" + format + R"("})");
    for (const std::string& s : ok) EXPECT_TRUE(GrammarAccepts(g, Quoted(s))) << format << " " << s;
    for (const std::string& s : bad) {
      EXPECT_FALSE(GrammarAccepts(g, Quoted(s))) << format << " " << s;
    }
  }
  // Other formats are annotations: any string.
  const Grammar uri = SchemaGrammar(R"({"type":"string","format":"uri"})");
  EXPECT_TRUE(GrammarAccepts(uri, R"("not a uri")"));
  EXPECT_EQ(SchemaError(R"({"type":"string","format":"date","maxLength":20})"),
            "'minLength' / 'maxLength' together with a pattern or format are not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"string","pattern":3})"), "'pattern' must be a string (at #)");
}

// Every integer in [lo, hi] accepted, the neighbours and other spellings rejected.
void ExpectExactRange(const Grammar& g, int64_t lo, int64_t hi, const std::string& what) {
  for (int64_t v = lo; v <= hi; ++v) {
    ASSERT_TRUE(GrammarAccepts(g, std::to_string(v))) << what << ": " << v;
  }
  EXPECT_FALSE(GrammarAccepts(g, std::to_string(lo - 1))) << what;
  EXPECT_FALSE(GrammarAccepts(g, std::to_string(hi + 1))) << what;
}

TEST(JsonSchemaIntegerRange, SmallRangesExactly) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 0},       {0, 9},      {1, 10},   {-5, 5},    {-10, -1},   {7, 7},
      {-1, 0},      {10, 99},    {0, 100},  {5, 1234},  {-1234, -5}, {95, 105},
      {-305, 1001}, {199, 2001}, {-99, 99}, {990, 1010}};
  for (const auto& [lo, hi] : ranges) {
    const std::string schema = R"({"type":"integer","minimum":)" + std::to_string(lo) +
                               R"(,"maximum":)" + std::to_string(hi) + "}";
    const Grammar g = SchemaGrammar(schema);
    ExpectExactRange(g, lo, hi, schema);
    for (const char* bad : {"-0", "+1", "01", "00", "1.0", "1e1", ""}) {
      EXPECT_FALSE(GrammarAccepts(g, bad)) << schema << " " << bad;
    }
  }
}

TEST(JsonSchemaIntegerRange, ExclusiveAndFractionalBounds) {
  ExpectExactRange(SchemaGrammar(R"({"type":"integer","exclusiveMinimum":3,"exclusiveMaximum":9})"),
                   4, 8, "exclusive");
  ExpectExactRange(SchemaGrammar(R"({"type":"integer","minimum":2.5,"maximum":7.5})"), 3, 7,
                   "fractional");
  ExpectExactRange(
      SchemaGrammar(R"({"type":"integer","exclusiveMinimum":-2.5,"exclusiveMaximum":2.0})"), -2, 1,
      "fractional exclusive");
  // Draft 4: a boolean exclusiveMinimum makes minimum exclusive.
  ExpectExactRange(SchemaGrammar(R"({"type":"integer","minimum":0,"exclusiveMinimum":true,
                                     "maximum":5,"exclusiveMaximum":false})"),
                   1, 5, "draft 4");
  // The tighter of minimum and exclusiveMinimum wins.
  ExpectExactRange(SchemaGrammar(R"({"type":"integer","minimum":0,"exclusiveMinimum":4,
                                     "maximum":6})"),
                   5, 6, "both");
  EXPECT_EQ(SchemaError(R"({"type":"integer","minimum":5,"maximum":4})"),
            "no integer lies between the bounds (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","minimum":1e19})"),
            "'minimum' beyond 10^18 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","minimum":"1"})"),
            "'minimum' must be a number (at #)");
}

TEST(JsonSchemaIntegerRange, HalfOpenAndBigRangesSampled) {
  const Grammar big = SchemaGrammar(R"({"type":"integer","minimum":-1000,"maximum":123456})");
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % 200000) - 50000;
    EXPECT_EQ(GrammarAccepts(big, std::to_string(v)), v >= -1000 && v <= 123456) << v;
  }
  for (int64_t v : {-1000, -999, -1, 0, 9, 10, 99999, 100000, 123455, 123456}) {
    EXPECT_TRUE(GrammarAccepts(big, std::to_string(v))) << v;
  }
  for (int64_t v : {-1001, -10000, 123457, 123460, 200000, 1234560}) {
    EXPECT_FALSE(GrammarAccepts(big, std::to_string(v))) << v;
  }
  const Grammar at_least = SchemaGrammar(R"({"type":"integer","minimum":-20})");
  for (int64_t v : {int64_t{-20}, int64_t{-1}, int64_t{0}, int64_t{5}, int64_t{1000000},
                    int64_t{9999999999999999}}) {
    EXPECT_TRUE(GrammarAccepts(at_least, std::to_string(v))) << v;
  }
  for (int64_t v : {-21, -100, -1000000}) EXPECT_FALSE(GrammarAccepts(at_least, std::to_string(v)));
  const Grammar below = SchemaGrammar(R"({"type":"integer","exclusiveMaximum":0})");
  for (int64_t v : {-1, -9, -10, -123456789}) EXPECT_TRUE(GrammarAccepts(below, std::to_string(v)));
  for (int64_t v : {0, 1, 10}) EXPECT_FALSE(GrammarAccepts(below, std::to_string(v)));
  const Grammar huge = SchemaGrammar(
      R"({"type":"integer","minimum":-1000000000000000000,"maximum":1000000000000000000})");
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % 2000000000000000001ULL) - 1000000000000000000;
    EXPECT_TRUE(GrammarAccepts(huge, std::to_string(v))) << v;
  }
  EXPECT_FALSE(GrammarAccepts(huge, "1000000000000000001"));
  EXPECT_FALSE(GrammarAccepts(huge, "-1000000000000000001"));
  EXPECT_LT(huge.elements.size(), 5000u);
  // In a type list, the bounds apply to the integers only.
  const Grammar either = SchemaGrammar(R"({"type":["integer","string"],"minimum":1,"maximum":3})");
  EXPECT_TRUE(GrammarAccepts(either, "2"));
  EXPECT_TRUE(GrammarAccepts(either, R"("7")"));
  EXPECT_FALSE(GrammarAccepts(either, "7"));
}

// Draws a text from the grammar byte by byte (uniformly among the bytes the matcher takes,
// stopping with probability 1/4 where complete); "" past 4 KiB.
std::string RandomText(const Grammar& g, std::mt19937_64& rng) {
  GrammarMatcher m(std::make_shared<Grammar>(g));
  std::string text;
  while (text.size() < 4096) {
    if (m.Accepting(m.state()) && (m.Finished(m.state()) || rng() % 4 == 0)) return text;
    std::vector<uint8_t> next;
    for (int b = 0; b < 256; ++b) {
      if (m.Advance(m.state(), static_cast<uint8_t>(b)) != GrammarMatcher::kDead) {
        next.push_back(static_cast<uint8_t>(b));
      }
    }
    if (next.empty()) {
      ADD_FAILURE() << "no byte continues " << text;
      return "";
    }
    const char c = static_cast<char>(next[rng() % next.size()]);
    EXPECT_TRUE(m.Consume(std::string_view(&c, 1)));
    text += c;
  }
  return "";
}

// A date / time checked field by field (not by the grammar's own regexes).
bool ValidDate(const std::string& d) {
  if (!std::regex_match(d, std::regex("\\d{4}-\\d{2}-\\d{2}"))) return false;
  const int month = std::stoi(d.substr(5, 2)), day = std::stoi(d.substr(8, 2));
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}
bool ValidTime(const std::string& t) {
  std::smatch m;
  if (!std::regex_match(t, m,
                        std::regex("(\\d\\d):(\\d\\d):(\\d\\d)(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)"))) {
    return false;
  }
  return std::stoi(m[1]) < 24 && std::stoi(m[2]) < 60 && std::stoi(m[3]) < 60;
}

// Texts drawn from schemas with these keywords parse and validate (the test validator checks
// pattern with std::regex and the integer bounds numerically; formats are checked here).
TEST(JsonSchemaKeywords, RandomTextsParseAndValidate) {
  const std::string text = R"({"type":"object","properties":{
      "code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}(/[a-z\"]{1,3})?$"},
      "n":{"type":"integer","minimum":-1000,"maximum":123456},
      "small":{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":12},
      "big":{"type":"integer","minimum":999999},
      "day":{"type":"string","format":"date"},
      "at":{"type":"string","format":"date-time"},
      "id":{"type":"string","format":"uuid"},
      "mail":{"type":"string","format":"email"}},
      "required":["code","n","small","big","day","at","id","mail"]})";
  const ojson schema = ojson::parse(text);
  auto g = JsonSchemaGrammar(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::mt19937_64 rng(17);
  int complete = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string out = RandomText(*g, rng);
    if (out.empty()) continue;
    ++complete;
    const ojson v = ojson::parse(out, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << "not JSON: " << out;
    EXPECT_TRUE(test::ValidateJson(v, schema)) << out;
    EXPECT_TRUE(ValidDate(v["day"])) << out;
    const std::string at = v["at"];
    EXPECT_TRUE(at.size() > 11 && at[10] == 'T' && ValidDate(at.substr(0, 10)) &&
                ValidTime(at.substr(11)))
        << out;
    EXPECT_TRUE(
        std::regex_match(v["id"].get<std::string>(),
                         std::regex("[[:xdigit:]]{8}(-[[:xdigit:]]{4}){3}-[[:xdigit:]]{12}")))
        << out;
    const std::string mail = v["mail"];
    const size_t atsign = mail.find('@');
    EXPECT_TRUE(atsign != std::string::npos && atsign > 0 &&
                mail.find('@', atsign + 1) == std::string::npos &&
                mail.find('.', atsign) != std::string::npos)
        << out;
  }
  EXPECT_GE(complete, 150);
}

}  // namespace
}  // namespace llm
