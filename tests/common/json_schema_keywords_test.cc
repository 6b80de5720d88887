// The JSON Schema keywords built on the regex compiler and the integer ranges: "pattern" and
// "format" on strings (the text inside the quotes, JSON-escaped, matches), and integer
// minimum / maximum / exclusiveMinimum / exclusiveMaximum (every integer in range accepted,
// its neighbours rejected, big ranges sampled).
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <functional>
#include <random>
#include <regex>
#include <set>
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
  EXPECT_EQ(SchemaError(R"({"type":"string","format":"date","maxLength":9})"),
            "'format': no text matching the pattern has a length between the bounds (at #)");
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

// Draws `count` texts from g (RandomText); each complete one must parse as JSON and goes to
// `check` with its text. Returns how many were complete.
int CheckRandomTexts(const Grammar& g, std::mt19937_64& rng, int count,
                     const std::function<void(const ojson&, const std::string&)>& check) {
  int complete = 0;
  for (int i = 0; i < count; ++i) {
    const std::string out = RandomText(g, rng);
    if (out.empty()) continue;
    ++complete;
    const ojson v = ojson::parse(out, nullptr, false);
    EXPECT_FALSE(v.is_discarded()) << "not JSON: " << out;
    if (!v.is_discarded()) check(v, out);
  }
  return complete;
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
  const int complete = CheckRandomTexts(*g, rng, 200, [&](const ojson& v, const std::string& out) {
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
  });
  EXPECT_GE(complete, 150);
}

// Whether the grammar accepts `text`, on a matcher shared by many texts (Advance is memoized,
// so exhaustive checks stay fast).
bool Accepts(GrammarMatcher& m, const std::string& text) {
  GrammarMatcher::State st = m.state();
  for (char c : text) st = m.Advance(st, static_cast<uint8_t>(c));
  return m.Accepting(st);
}

// A value in thousandths written with `k` (0..3) fraction digits ("" when that needs more).
std::string Thousandths(int64_t v, int k) {
  const int64_t a = v < 0 ? -v : v;
  const std::string frac = std::to_string(1000 + a % 1000).substr(1);
  if (frac.find_first_not_of('0', static_cast<size_t>(k)) != std::string::npos) return "";
  std::string out = v < 0 ? "-" : "";
  out += std::to_string(a / 1000);
  if (k > 0) {
    out += '.';
    out += frac.substr(0, static_cast<size_t>(k));
  }
  return out;
}

constexpr int64_t kNone = INT64_MIN;

// Every number in -3..3 with up to 3 fraction digits, in each spelling (1, 1.0, 1.00, 1.000):
// accepted exactly when in range (thousandths compared as integers) and with at most
// `fraction_digits` digits after the point; negative zero never.
TEST(JsonSchemaNumberRange, EveryThousandthExactly) {
  struct Case {
    const char* schema;
    int64_t lo;
    bool lo_excl;
    int64_t hi;
    bool hi_excl;
    int fraction_digits;
  };
  const std::vector<Case> cases = {
      {R"({"type":"number","minimum":-1.25,"exclusiveMaximum":0.75})", -1250, false, 750, true, 15},
      {R"({"type":"number","exclusiveMinimum":-2.5,"maximum":-0.125})", -2500, true, -125, false,
       15},
      {R"({"type":"number","minimum":0.001,"maximum":2.999})", 1, false, 2999, false, 15},
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", 0, true, 1000, true, 15},
      {R"({"type":"number","minimum":-0.5,"maximum":0.5,"multipleOf":0.01})", -500, false, 500,
       false, 2},
      {R"({"type":"number","minimum":0.1,"exclusiveMinimum":true,"maximum":1.5,
           "exclusiveMaximum":true,"multipleOf":0.1})",
       100, true, 1500, true, 1},
      {R"({"type":"number","maximum":1.5})", kNone, false, 1500, false, 15},
      {R"({"type":"number","exclusiveMinimum":-1})", -1000, true, kNone, false, 15},
      {R"({"type":"number","minimum":1e-3,"maximum":1e0})", 1, false, 1000, false, 15},
      {R"({"type":"number","minimum":-2.0,"maximum":-2})", -2000, false, -2000, false, 15},
      {R"({"type":"number","exclusiveMaximum":0,"multipleOf":0.001})", kNone, false, 0, true, 3},
      {R"({"type":"number","minimum":0,"multipleOf":1e-2,"exclusiveMaximum":2.005})", 0, false,
       2005, true, 2},
  };
  for (const Case& c : cases) {
    const Grammar g = SchemaGrammar(c.schema);
    GrammarMatcher m(std::make_shared<Grammar>(g));
    int accepted = 0;
    for (int64_t v = -3000; v <= 3000; ++v) {
      const bool in_range = (c.lo == kNone || (c.lo_excl ? v > c.lo : v >= c.lo)) &&
                            (c.hi == kNone || (c.hi_excl ? v < c.hi : v <= c.hi));
      for (int k = 0; k <= 3; ++k) {
        const std::string text = Thousandths(v, k);
        if (text.empty()) continue;
        const bool expected = in_range && k <= c.fraction_digits;
        ASSERT_EQ(Accepts(m, text), expected) << c.schema << " " << text;
        accepted += expected;
      }
    }
    EXPECT_GT(accepted, 0) << c.schema;
    for (const char* bad : {"-0", "-0.0", "-0.000", "+1", "01", "00.5", ".5", "1.", "1e0", "0.5e1",
                            "1E-1", "--1", ""}) {
      EXPECT_FALSE(Accepts(m, bad)) << c.schema << " " << bad;
    }
  }
}

TEST(JsonSchemaNumberRange, BoundsAreDecimalsNotDoubles) {
  // 0.1 is 0.1 (the double 0.1 is 0.1000000000000000055...).
  const Grammar tenth = SchemaGrammar(R"({"type":"number","maximum":0.1})");
  for (const char* ok : {"0.1", "0.100000000000000", "0.099999999999999", "0", "-5.5"}) {
    EXPECT_TRUE(GrammarAccepts(tenth, ok)) << ok;
  }
  for (const char* bad : {"0.100000000000001", "0.11", "1"}) {
    EXPECT_FALSE(GrammarAccepts(tenth, bad)) << bad;
  }
  // Up to 15 fraction digits, just inside and just outside.
  const Grammar g = SchemaGrammar(R"({"type":"number","exclusiveMinimum":-2.25,"maximum":1e3})");
  for (const char* ok : {"-2.249999999999999", "-2.24", "-0.5", "0", "0.0", "999.999999999999999",
                         "1000", "1000.000000000000000"}) {
    EXPECT_TRUE(GrammarAccepts(g, ok)) << ok;
  }
  for (const char* bad : {"-2.25", "-2.250", "-2.26", "1000.000000000000001", "1000.1", "1001",
                          "-0", "-0.0", "0.1234567890123456" /* 16 fraction digits */}) {
    EXPECT_FALSE(GrammarAccepts(g, bad)) << bad;
  }
  // Without an upper bound, integer parts up to 16 digits (as plain numbers).
  const Grammar at_least = SchemaGrammar(R"({"type":"number","minimum":0.5})");
  EXPECT_TRUE(GrammarAccepts(at_least, "9999999999999999.999999999999999"));
  EXPECT_FALSE(GrammarAccepts(at_least, "10000000000000000"));
  EXPECT_FALSE(GrammarAccepts(at_least, "0.499999999999999"));
  EXPECT_TRUE(GrammarAccepts(at_least, "0.500000000000001"));
  // Big bounds, exactly.
  const Grammar big = SchemaGrammar(
      R"({"type":"number","minimum":-1000000000000000000,"maximum":123456789012.375})");
  EXPECT_TRUE(GrammarAccepts(big, "-1000000000000000000"));
  EXPECT_TRUE(GrammarAccepts(big, "-999999999999999999.999999999999999"));
  EXPECT_FALSE(GrammarAccepts(big, "-1000000000000000000.000000000000001"));
  EXPECT_TRUE(GrammarAccepts(big, "123456789012.375"));
  EXPECT_TRUE(GrammarAccepts(big, "123456789012.374999999999999"));
  EXPECT_FALSE(GrammarAccepts(big, "123456789012.375000000000001"));
  EXPECT_FALSE(GrammarAccepts(big, "123456789013"));
  EXPECT_LT(big.elements.size(), 20000u);
  // In a type list the bounds apply to each numeric type.
  const Grammar either = SchemaGrammar(R"({"type":["number","string"],"maximum":2.5})");
  EXPECT_TRUE(GrammarAccepts(either, "2.5"));
  EXPECT_TRUE(GrammarAccepts(either, R"("7")"));
  EXPECT_FALSE(GrammarAccepts(either, "2.6"));
}

TEST(JsonSchemaNumberRange, BoundErrorsAreFastAndClear) {
  EXPECT_EQ(SchemaError(R"({"type":"number","minimum":1e19})"),
            "'minimum' beyond 10^18 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","maximum":1e308})"),
            "'maximum' beyond 10^18 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","minimum":1e-300})"),
            "'minimum' with more than 30 digits after the decimal point is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","minimum":2,"maximum":1.5})"),
            "no number with at most 15 digits after the decimal point lies between the bounds "
            "(at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","exclusiveMinimum":1,"maximum":1})"),
            "no number with at most 15 digits after the decimal point lies between the bounds "
            "(at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","minimum":0.001,"maximum":0.009,"multipleOf":0.01})"),
            "no number with at most 2 digits after the decimal point lies between the bounds "
            "(at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","minimum":"1"})"), "'minimum' must be a number (at #)");
  // A bound with many digits (but at most 30 after the point) is compared exactly.
  const Grammar fine = SchemaGrammar(R"({"type":"number","minimum":0.0000000000000000001})");
  EXPECT_FALSE(GrammarAccepts(fine, "0"));
  EXPECT_TRUE(GrammarAccepts(fine, "0.000000000000001"));
}

// Every integer in -3000..3000 checked against each multipleOf and bounds.
TEST(JsonSchemaMultipleOf, IntegersExactly) {
  const std::vector<std::tuple<std::string, int64_t, int64_t>> bounds = {
      {"", -1000000, 1000000},
      {R"(,"minimum":-50,"maximum":50)", -50, 50},
      {R"(,"minimum":5,"maximum":1234)", 5, 1234},
      {R"(,"minimum":-1234,"maximum":-5)", -1234, -5},
      {R"(,"exclusiveMinimum":-100,"exclusiveMaximum":2000)", -99, 1999},
      {R"(,"minimum":0.5,"maximum":999.5)", 1, 999},
  };
  for (int64_t n : {1, 2, 3, 7, 10, 12, 25, 100, 997, 1000}) {
    for (const auto& [extra, lo, hi] : bounds) {
      const std::string schema =
          R"({"type":"integer","multipleOf":)" + std::to_string(n) + extra + "}";
      auto g = JsonSchemaGrammar(ojson::parse(schema));
      const int64_t first = lo % n == 0 ? lo : (lo > 0 ? (lo / n + 1) * n : (lo / n) * n);
      if (first > hi) {
        EXPECT_EQ(g.status().message(),
                  "no multiple of " + std::to_string(n) + " lies between the bounds (at #)");
        continue;
      }
      ASSERT_TRUE(g.ok()) << schema << " " << g.status().ToString();
      GrammarMatcher m(std::make_shared<Grammar>(*g));
      for (int64_t v = -3000; v <= 3000; ++v) {
        const bool expected = v % n == 0 && v >= lo && v <= hi;
        ASSERT_EQ(Accepts(m, std::to_string(v)), expected) << schema << " " << v;
      }
      for (const char* bad : {"-0", "00", "010", "+10", "10.0", "1e3", ""}) {
        EXPECT_FALSE(Accepts(m, bad)) << schema << " " << bad;
      }
    }
  }
  // As a number: an integer multipleOf means integers.
  const Grammar five = SchemaGrammar(R"({"type":"number","multipleOf":5,"maximum":12.5})");
  for (const char* ok : {"10", "0", "-5", "-1000000"}) EXPECT_TRUE(GrammarAccepts(five, ok)) << ok;
  for (const char* bad : {"15", "12.5", "7", "-0"}) EXPECT_FALSE(GrammarAccepts(five, bad)) << bad;
  // On integers a power of ten below 1 divides every integer.
  const Grammar any = SchemaGrammar(R"({"type":"integer","multipleOf":0.01,"minimum":-3})");
  EXPECT_TRUE(GrammarAccepts(any, "-3"));
  EXPECT_TRUE(GrammarAccepts(any, "17"));
  EXPECT_FALSE(GrammarAccepts(any, "-4"));
}

TEST(JsonSchemaMultipleOf, BigIntegersAndSizes) {
  const auto start = std::chrono::steady_clock::now();
  const Grammar g = SchemaGrammar(R"({"type":"integer","multipleOf":997})");
  EXPECT_LT(g.elements.size(), 700000u);
  std::mt19937_64 rng(5);
  GrammarMatcher m(std::make_shared<Grammar>(g));
  for (int i = 0; i < 2000; ++i) {
    const int64_t q = static_cast<int64_t>(rng() % 10030090270812ULL);  // 997 q < 10^16
    const int64_t v = (i % 2 ? -q : q) * 997;
    ASSERT_TRUE(Accepts(m, std::to_string(v))) << v;
    ASSERT_FALSE(Accepts(m, std::to_string(v + 1))) << v + 1;
  }
  EXPECT_FALSE(Accepts(m, "99999999999999990"));  // 17 digits, past the bound on digits
  const Grammar wide = SchemaGrammar(
      R"({"type":"integer","multipleOf":7,"minimum":-1000000000000000000,"maximum":1000000000000000000})");
  GrammarMatcher w(std::make_shared<Grammar>(wide));
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = static_cast<int64_t>(rng() % 2000000000000000001ULL) - 1000000000000000000;
    ASSERT_EQ(Accepts(w, std::to_string(v)), v % 7 == 0) << v;
  }
  EXPECT_TRUE(Accepts(w, "999999999999999999"));  // 7 * 142857142857142857
  EXPECT_FALSE(Accepts(w, "999999999999999996"));
  EXPECT_TRUE(Accepts(w, "-999999999999999999"));
  EXPECT_FALSE(Accepts(w, "1000000000000000001"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Many big parts (a multipleOf automaton, a length-bounded pattern per property) stop at the
// grammar's limits, quickly and with a clear error, not after building them all.
TEST(JsonSchemaMultipleOf, ManyBigPartsAreAFastError) {
  for (const std::string& part :
       {std::string(R"({"type":"integer","multipleOf":997})"),
        std::string(R"({"type":"number","multipleOf":0.997})"),
        std::string(R"({"type":"string","pattern":"[a-z]*[0-9]*","maxLength":4096})")}) {
    std::string schema = R"({"type":"object","properties":{)";
    for (int i = 0; i < 1000; ++i) {
      if (i > 0) schema += ',';
      schema += "\"p";
      schema += std::to_string(i);
      schema += "\":";
      schema += part;
    }
    schema += "}}";
    const auto start = std::chrono::steady_clock::now();
    const std::string e = SchemaError(schema);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_NE(e.find("grammar"), std::string::npos) << e;
  }
}

TEST(JsonSchemaMultipleOf, UnsupportedValuesAreClearErrors) {
  const std::string kept =
      "'multipleOf' is supported as an integer up to 1000 times a power of ten 10^-k, k <= 15 "
      "(such as 7, 0.01, 0.25 or 2.5) (at #)";
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":0.1001})"), kept);
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":3.333})"), kept);
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":0.001234})"), kept);
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":1001})"),
            "'multipleOf' above 1000 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":1000.5})"), kept);  // 10005·10^-1
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":1234.5})"),
            "'multipleOf' above 1000 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":2.5e-16})"),
            "'multipleOf' with more than 15 digits after the decimal point is not supported "
            "(at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":1e-300})"),
            "'multipleOf' with more than 30 digits after the decimal point is not supported "
            "(at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":1e-20})"),
            "'multipleOf' below 1e-15 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":1e300})"),
            "'multipleOf' beyond 10^18 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":0})"),
            "'multipleOf' must be above 0 (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":-3})"),
            "'multipleOf' must be above 0 (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":"3"})"),
            "'multipleOf' must be a number (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":10,"minimum":1,"maximum":9})"),
            "no multiple of 10 lies between the bounds (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"number","multipleOf":0.25,"minimum":0.3,"maximum":0.45})"),
            "no multiple of 0.25 lies between the bounds (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"integer","multipleOf":2.5,"minimum":1,"maximum":4})"),
            "no multiple of 2.5 lies between the bounds (at #)");
  EXPECT_EQ(SchemaError(R"({"multipleOf":3})"),
            "'multipleOf' is supported with \"type\": \"integer\" or \"number\" (at #)");
  // On other types a numeric keyword means nothing.
  const Grammar s = SchemaGrammar(R"({"type":["string","integer"],"multipleOf":3})");
  EXPECT_TRUE(GrammarAccepts(s, R"("x")"));
  EXPECT_TRUE(GrammarAccepts(s, "9"));
  EXPECT_FALSE(GrammarAccepts(s, "10"));
}

// The value v · 10^-scale written with `digits` digits after the point ("" when that needs more),
// as the grammar writes numbers: "-" only below zero, no leading zeros.
std::string ScaledText(int64_t v, int scale, int digits) {
  int64_t unit = 1;
  for (int i = 0; i < scale; ++i) unit *= 10;
  const int64_t a = v < 0 ? -v : v;
  const std::string frac = std::to_string(unit + a % unit).substr(1);
  if (frac.find_first_not_of('0', static_cast<size_t>(digits)) != std::string::npos) return "";
  std::string out = v < 0 ? "-" : "";
  out += std::to_string(a / unit);
  if (digits > 0) {
    out += '.';
    out += frac.substr(0, static_cast<size_t>(digits));
  }
  return out;
}

// multipleOf N·10^-k: every number in a window, in steps of 10^-(k+1), in each spelling with 0
// to k+1 digits after the point (2, 2.0, 2.00 for k = 1): accepted exactly when the exact
// validator finds it in range and a multiple and it has at most k digits after the point (so
// "0.50" is accepted for 0.05 but "0.500" never for 0.5); negative zero never.
TEST(JsonSchemaMultipleOf, DecimalsExactly) {
  struct Case {
    const char* schema;
    int k;             // digits after the point of multipleOf
    int64_t from, to;  // the window, whole numbers
  };
  const std::vector<Case> cases = {
      {R"({"type":"number","multipleOf":0.5,"minimum":-10,"maximum":10})", 1, -12, 12},
      {R"({"type":"number","multipleOf":0.25,"minimum":0,"maximum":3})", 2, -1, 4},
      {R"({"type":"number","multipleOf":2.5,"minimum":-50,"maximum":50})", 1, -53, 53},
      {R"({"type":"number","multipleOf":0.05,"exclusiveMaximum":1})", 2, -3, 2},
      {R"({"type":"number","multipleOf":1.5,"minimum":0,"maximum":30})", 1, -2, 32},
      {R"({"type":"number","multipleOf":0.075,"minimum":0,"maximum":1})", 3, -1, 2},
      {R"({"type":"number","multipleOf":12.5,"minimum":-100,"exclusiveMaximum":250})", 1, -110,
       260},
      // Bounds off the grid, exclusive ones, draft 4's booleans, and none at all.
      {R"({"type":"number","multipleOf":0.25,"exclusiveMinimum":-1.3,"maximum":2.6})", 2, -3, 4},
      {R"({"type":"number","multipleOf":0.75,"minimum":-2.25,"exclusiveMinimum":true,
           "maximum":3.0,"exclusiveMaximum":true})",
       2, -4, 4},
      {R"({"type":"number","multipleOf":0.35,"exclusiveMinimum":-3.5,"exclusiveMaximum":0})", 2, -5,
       1},
      {R"({"type":"number","multipleOf":0.25})", 2, -4, 4},
      {R"({"type":"number","multipleOf":0.125,"minimum":1.0625})", 3, -1, 3},
      {R"({"type":"number","multipleOf":0.997,"minimum":-2,"maximum":2.5})", 3, -3, 3},
      {R"({"type":"number","multipleOf":0.3,"minimum":-0.9,"maximum":-0.3})", 1, -2, 1},
      {R"({"type":"number","multipleOf":0.2,"minimum":1.3,"maximum":1.7})", 1, 0, 3},
  };
  for (const Case& c : cases) {
    const ojson schema = ojson::parse(c.schema);
    const Grammar g = SchemaGrammar(c.schema);
    GrammarMatcher m(std::make_shared<Grammar>(g));
    const int scale = c.k + 1;
    int64_t unit = 1;
    for (int i = 0; i < scale; ++i) unit *= 10;
    int accepted = 0, refused_multiples = 0;
    for (int64_t v = c.from * unit; v <= c.to * unit; ++v) {
      for (int digits = 0; digits <= scale; ++digits) {
        const std::string text = ScaledText(v, scale, digits);
        if (text.empty()) continue;
        const bool valid = test::NumberTextValid(text, schema);
        const bool expected = valid && digits <= c.k;  // no "-0" here: a sign only below 0
        ASSERT_EQ(Accepts(m, text), expected) << c.schema << " " << text;
        accepted += expected;
        refused_multiples += valid && digits > c.k;
      }
    }
    EXPECT_GT(accepted, 0) << c.schema;
    EXPECT_GT(refused_multiples, 0) << c.schema;  // "1.50" for 0.5: valid, too many digits
    for (const char* bad : {"-0", "-0.0", "+0.5", "00.5", ".5", "1.", "0.5e0", "5E-1", "--1", ""}) {
      EXPECT_FALSE(Accepts(m, bad)) << c.schema << " " << bad;
    }
  }
}

// Texts drawn through the grammar are multiples in range (the exact validator), with at most k
// digits after the point, and many different ones.
TEST(JsonSchemaMultipleOf, RandomDecimalsValidate) {
  const std::vector<std::pair<std::string, int>> schemas = {
      {R"({"type":"number","multipleOf":0.5,"minimum":-10,"maximum":10})", 1},
      {R"({"type":"number","multipleOf":0.25,"minimum":0,"maximum":3})", 2},
      {R"({"type":"number","multipleOf":2.5,"minimum":-50,"maximum":50})", 1},
      {R"({"type":"number","multipleOf":0.05,"exclusiveMaximum":1})", 2},
      {R"({"type":"number","multipleOf":1.5,"minimum":0,"maximum":30})", 1},
      {R"({"type":"number","multipleOf":0.075,"minimum":0,"maximum":1})", 3},
      {R"({"type":"number","multipleOf":12.5})", 1},
      {R"({"type":"number","multipleOf":0.000000000000007,"minimum":-1e15,"maximum":1e15})", 15},
      {R"({"type":"number","multipleOf":0.997,"exclusiveMinimum":-123456.5})", 3},
  };
  std::mt19937_64 rng(31);
  for (const auto& [text, k] : schemas) {
    const ojson schema = ojson::parse(text);
    const Grammar g = SchemaGrammar(text);
    std::set<std::string> distinct;
    const int complete = CheckRandomTexts(g, rng, 300, [&](const ojson& v, const std::string& out) {
      ASSERT_TRUE(v.is_number()) << out;
      EXPECT_TRUE(test::NumberTextValid(out, schema)) << out << "\nschema: " << text;
      const size_t point = out.find('.');
      EXPECT_TRUE(point == std::string::npos || out.size() - point - 1 <= static_cast<size_t>(k))
          << out;
      EXPECT_EQ(out.find_first_of("eE+"), std::string::npos) << out;
      const test::TestDecimal d = test::ParseTestDecimal(out);
      EXPECT_FALSE(out[0] == '-' && d.integer.empty() && d.fraction.empty()) << out;
      distinct.insert(out);
    });
    EXPECT_GE(complete, 250) << text;
    EXPECT_GE(distinct.size(), 20u) << text;
  }
}

// On integers a decimal multipleOf N·10^-k means multiples of N / gcd(N, 10^k).
TEST(JsonSchemaMultipleOf, DecimalsOnIntegers) {
  for (const char* step : {"0.5", "2.5", "0.075", "12.5", "0.35", "1.5"}) {
    const std::string text =
        std::string(R"({"type":"integer","minimum":-500,"multipleOf":)") + step + "}";
    const ojson schema = ojson::parse(text);
    const Grammar g = SchemaGrammar(text);
    GrammarMatcher m(std::make_shared<Grammar>(g));
    int accepted = 0;
    for (int64_t v = -3000; v <= 3000; ++v) {
      const std::string s = std::to_string(v);
      const bool expected = test::NumberTextValid(s, schema);
      ASSERT_EQ(Accepts(m, s), expected) << text << " " << s;
      accepted += expected;
    }
    EXPECT_GT(accepted, 0) << text;
    EXPECT_FALSE(Accepts(m, "5.0")) << text;
  }
}

// Sizes: the automaton has a state per remainder and digit position, integer and fraction.
TEST(JsonSchemaMultipleOf, DecimalSizes) {
  const auto start = std::chrono::steady_clock::now();
  for (const char* small : {R"({"type":"number","multipleOf":0.25})",
                            R"({"type":"number","multipleOf":2.5,"minimum":-1e6,"maximum":1e6})",
                            R"({"type":"number","multipleOf":0.05,"exclusiveMaximum":1})"}) {
    EXPECT_LT(SchemaGrammar(small).elements.size(), 40000u) << small;
  }
  const Grammar big = SchemaGrammar(R"({"type":"number","multipleOf":0.997,"minimum":0})");
  EXPECT_LT(big.elements.size(), 600000u);
  GrammarMatcher m(std::make_shared<Grammar>(big));
  EXPECT_TRUE(Accepts(m, "9969.003"));     // 0.997 * 9999
  EXPECT_TRUE(Accepts(m, "99700000000"));  // 0.997 * 10^11
  EXPECT_FALSE(Accepts(m, "99700000000.001"));
  // Past the grammar's limits: the existing clear error, fast.
  const std::string e = SchemaError(R"({"type":"number","multipleOf":0.000000000000997})");
  EXPECT_NE(e.find("grammar elements"), std::string::npos) << e;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Every string over {a, b, c} up to 6 characters: accepted exactly when the pattern matches
// (std::regex) and the length is in range.
TEST(JsonSchemaPatternLength, EveryShortStringExactly) {
  const std::string pattern = "(ab|a)*c?";
  const std::regex re(pattern);
  std::vector<std::string> all = {""};
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].size() == 6) continue;
    for (char c : {'a', 'b', 'c'}) all.push_back(all[i] + c);
  }
  for (const auto& [min, max] : std::vector<std::pair<int, int>>{
           {2, 4}, {0, 3}, {3, -1}, {5, 5}, {1, 1}, {0, 0}, {6, 4096}}) {
    std::string schema =
        R"({"type":"string","pattern":")" + pattern + R"(","minLength":)" + std::to_string(min);
    if (max >= 0) schema += R"(,"maxLength":)" + std::to_string(max);
    schema += "}";
    const Grammar g = SchemaGrammar(schema);
    GrammarMatcher m(std::make_shared<Grammar>(g));
    for (const std::string& s : all) {
      const int len = static_cast<int>(s.size());
      const bool expected = std::regex_match(s, re) && len >= min && (max < 0 || len <= max);
      ASSERT_EQ(Accepts(m, Quoted(s)), expected) << schema << " " << s;
    }
  }
}

TEST(JsonSchemaPatternLength, CharactersNotBytesAndFormats) {
  // Lengths count code points: "é" is one character, an escape is one character.
  const Grammar u = SchemaGrammar(R"({"type":"string","pattern":"(é|x)+","maxLength":3})");
  EXPECT_TRUE(GrammarAccepts(u, Quoted("\xC3\xA9\xC3\xA9\xC3\xA9")));
  EXPECT_TRUE(GrammarAccepts(u, Quoted("x\xC3\xA9")));
  EXPECT_FALSE(GrammarAccepts(u, Quoted("\xC3\xA9\xC3\xA9\xC3\xA9x")));
  const Grammar esc =
      SchemaGrammar(R"({"type":"string","pattern":"[a\"\\\\]+","minLength":2,"maxLength":2})");
  EXPECT_TRUE(GrammarAccepts(esc, Quoted("\"\\")));
  EXPECT_TRUE(GrammarAccepts(esc, Quoted("a\"")));
  EXPECT_FALSE(GrammarAccepts(esc, Quoted("\"")));
  EXPECT_FALSE(GrammarAccepts(esc, Quoted("a\"\\")));
  const Grammar dt = SchemaGrammar(R"({"type":"string","format":"date-time","maxLength":20})");
  EXPECT_TRUE(GrammarAccepts(dt, Quoted("2024-01-02T03:04:05Z")));
  EXPECT_FALSE(GrammarAccepts(dt, Quoted("2024-01-02T03:04:05.1Z")));
  EXPECT_FALSE(GrammarAccepts(dt, Quoted("2024-01-02T03:04:05+01:00")));
  const Grammar mail =
      SchemaGrammar(R"({"type":"string","format":"email","minLength":10,"maxLength":12})");
  EXPECT_FALSE(GrammarAccepts(mail, Quoted("a@b.co")));
  EXPECT_TRUE(GrammarAccepts(mail, Quoted("abcd@ef.gh")));
  EXPECT_TRUE(GrammarAccepts(mail, Quoted("abcdef@gh.ij")));
  EXPECT_FALSE(GrammarAccepts(mail, Quoted("abcdefg@hi.jk")));
  // Common real-world combinations compile to moderate grammars.
  for (const char* schema : {
           R"({"type":"string","format":"email","maxLength":254})",
           R"({"type":"string","format":"email","minLength":6,"maxLength":320})",
           R"({"type":"string","format":"date-time","maxLength":64})",
           R"({"type":"string","pattern":"^\\w+$","maxLength":4096})",
           R"({"type":"string","pattern":"[^\"]*","minLength":1,"maxLength":4096})",
           R"({"type":"string","pattern":"^[a-z0-9_-]{3,16}$","minLength":5})",
           R"({"type":"string","pattern":"^\\+?[0-9 ()-]{7,20}$","maxLength":16})",
       }) {
    const Grammar sized = SchemaGrammar(schema);
    EXPECT_LT(sized.elements.size(), 600000u) << schema;
  }
  const Grammar id = SchemaGrammar(R"({"type":"string","format":"uuid","minLength":36})");
  EXPECT_TRUE(GrammarAccepts(id, Quoted("123e4567-e89b-12d3-a456-426614174000")));
  // A pattern longer than the upper bound: only its short texts.
  const Grammar words =
      SchemaGrammar(R"({"type":"string","pattern":"^[a-z]+( [a-z]+)*$","maxLength":4096})");
  EXPECT_TRUE(GrammarAccepts(words, Quoted("ab cd")));
  EXPECT_TRUE(GrammarAccepts(words, Quoted(std::string(4096, 'a'))));
  EXPECT_FALSE(GrammarAccepts(words, Quoted(std::string(4097, 'a'))));
}

TEST(JsonSchemaPatternLength, HostileSchemasAreFastErrors) {
  const auto start = std::chrono::steady_clock::now();
  const std::string big =
      SchemaError(R"({"type":"string","pattern":"(.{0,64}){0,8}","maxLength":4096})");
  EXPECT_NE(big.find("need more than"), std::string::npos) << big;
  EXPECT_NE(big.find("(at #)"), std::string::npos) << big;
  EXPECT_EQ(SchemaError(R"({"type":"string","pattern":"[a-z]{1,3}","minLength":5000})"),
            "'minLength' above 4096 is not supported (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"string","pattern":"[a-z]{1,3}","minLength":1e9})"),
            "'minLength' must be a non-negative integer (at #)");
  EXPECT_EQ(SchemaError(R"({"type":"string","pattern":"[a-z]{1,3}","minLength":4})"),
            "'pattern': no text matching the pattern has a length between the bounds (at #)");
  const std::string wide = SchemaError(
      R"({"type":"string","pattern":"[a-z]{0,4000}[0-9]{0,4000}","minLength":10,"maxLength":4096})");
  EXPECT_NE(wide.find("more than"), std::string::npos) << wide;
  // maxLength past the cap means no upper bound (as without a pattern).
  const Grammar capped =
      SchemaGrammar(R"({"type":"string","pattern":"x+","minLength":2,"maxLength":2000000000})");
  EXPECT_TRUE(GrammarAccepts(capped, Quoted(std::string(5000, 'x'))));
  EXPECT_FALSE(GrammarAccepts(capped, Quoted("x")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Texts drawn from schemas with the numeric keywords and length-bounded patterns parse and
// validate: numbers exactly by their text (the validator's own decimal arithmetic).
TEST(JsonSchemaKeywords, RandomNumbersValidateExactly) {
  const std::vector<std::string> schemas = {
      R"({"type":"number","minimum":0.5,"exclusiveMaximum":1e3,"multipleOf":0.01})",
      R"({"type":"number","exclusiveMinimum":-2.25,"maximum":40})",
      R"({"type":"number","minimum":-0.001})",
      R"({"type":"number","maximum":-7.125})",
      R"({"type":"number","minimum":0.1,"exclusiveMinimum":true,"maximum":0.3,
          "exclusiveMaximum":true})",
      R"({"type":"integer","multipleOf":7,"minimum":-100,"maximum":1000})",
      R"({"type":"integer","multipleOf":12})",
      R"({"type":"number","multipleOf":5,"exclusiveMinimum":-33})",
      R"({"type":"number","multipleOf":0.001})",
  };
  std::mt19937_64 rng(23);
  for (const std::string& text : schemas) {
    const ojson schema = ojson::parse(text);
    const Grammar g = SchemaGrammar(text);
    const int complete = CheckRandomTexts(g, rng, 300, [&](const ojson& v, const std::string& out) {
      ASSERT_TRUE(v.is_number()) << out;
      EXPECT_TRUE(test::NumberTextValid(out, schema)) << out << "\nschema: " << text;
      if (schema["type"] == "integer") {
        EXPECT_TRUE(v.is_number_integer()) << out;
      }
      EXPECT_FALSE(out.rfind("-0", 0) == 0 && test::ParseTestDecimal(out).integer.empty() &&
                   test::ParseTestDecimal(out).fraction.empty())
          << "negative zero: " << out;
    });
    EXPECT_GE(complete, 250) << text;
  }
}

TEST(JsonSchemaKeywords, RandomTextsWithNewKeywordsValidate) {
  const std::string text = R"({"type":"object","properties":{
      "price":{"type":"number","minimum":0.5,"exclusiveMaximum":1e3,"multipleOf":0.01},
      "temp":{"type":"number","exclusiveMinimum":-2.25,"maximum":40},
      "qty":{"type":"integer","multipleOf":7,"minimum":-100,"maximum":1000},
      "even":{"type":"integer","multipleOf":2},
      "step":{"type":"number","multipleOf":5,"maximum":100},
      "code":{"type":"string","pattern":"[A-Z][a-z0-9]*","minLength":3,"maxLength":6},
      "day":{"type":"string","format":"date","maxLength":10},
      "word":{"type":"string","pattern":"(é|[a-c\"])+","minLength":2,"maxLength":4}},
      "required":["price","temp","qty","even","step","code","day","word"]})";
  const ojson schema = ojson::parse(text);
  const Grammar g = SchemaGrammar(text);
  std::mt19937_64 rng(29);
  const int complete = CheckRandomTexts(g, rng, 200, [&](const ojson& v, const std::string& out) {
    EXPECT_TRUE(test::ValidateJson(v, schema)) << out;
    EXPECT_TRUE(ValidDate(v["day"])) << out;
    // The validator counts characters; check the non-ASCII pattern by hand.
    const std::string word = v["word"];
    EXPECT_TRUE(std::regex_match(word, std::regex("((\xC3\xA9)|[a-c\"]){2,4}"))) << out;
  });
  EXPECT_GE(complete, 150);
}

}  // namespace
}  // namespace llm
