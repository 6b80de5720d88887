// An independent validator for the JSON Schema subset structured output supports
// (common/json_schema_grammar.h), written from the JSON Schema spec for tests: what the grammar
// generates must pass it. Not the engine's code.
#pragma once

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace llm::test {

using ojson = nlohmann::ordered_json;

// Exact decimal arithmetic on number texts ("-12.5e-3"), for minimum / maximum / multipleOf:
// sign, integer digits (no leading zeros), fraction digits (no trailing zeros).
struct TestDecimal {
  bool negative = false;
  std::string integer, fraction;
};

inline TestDecimal ParseTestDecimal(const std::string& text) {
  size_t i = 0;
  TestDecimal d;
  d.negative = !text.empty() && text[0] == '-';
  if (d.negative) ++i;
  std::string digits;
  long point = -1;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      point = static_cast<long>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (point < 0) point = static_cast<long>(digits.size());
  if (i < text.size()) point += std::stol(text.substr(i + 1));
  // Pad so the point falls inside the digits.
  if (point < 0) {
    digits.insert(0, static_cast<size_t>(-point), '0');
    point = 0;
  }
  if (point > static_cast<long>(digits.size())) digits.append(point - digits.size(), '0');
  d.integer = digits.substr(0, static_cast<size_t>(point));
  d.fraction = digits.substr(static_cast<size_t>(point));
  d.integer.erase(0, d.integer.find_first_not_of('0') == std::string::npos
                         ? d.integer.size()
                         : d.integer.find_first_not_of('0'));
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.integer.empty() && d.fraction.empty()) d.negative = false;
  return d;
}

// -1, 0, 1 as a < b, a == b, a > b.
inline int CompareTestDecimal(const TestDecimal& a, const TestDecimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int m = 0;
  if (a.integer.size() != b.integer.size()) {
    m = a.integer.size() < b.integer.size() ? -1 : 1;
  } else if (a.integer != b.integer) {
    m = a.integer < b.integer ? -1 : 1;
  } else {
    const size_t n = std::max(a.fraction.size(), b.fraction.size());
    std::string x = a.fraction, y = b.fraction;
    x.resize(n, '0');
    y.resize(n, '0');
    m = x == y ? 0 : (x < y ? -1 : 1);
  }
  return a.negative ? -m : m;
}

// Whether the number is an integer multiple of `step` (both scaled to integers; the scaled step
// must fit in 64 bits, as in the tests).
inline bool MultipleOfTestDecimal(const TestDecimal& v, const TestDecimal& step) {
  const size_t scale = std::max(v.fraction.size(), step.fraction.size());
  std::string vs = v.integer + v.fraction, ss = step.integer + step.fraction;
  vs.append(scale - v.fraction.size(), '0');
  ss.append(scale - step.fraction.size(), '0');
  const unsigned long long m = std::stoull(ss);
  unsigned long long r = 0;
  for (char c : vs) r = (r * 10 + static_cast<unsigned long long>(c - '0')) % m;
  return r == 0;
}

// The numeric keywords on a number given as its JSON text (exact).
inline bool NumberTextValid(const std::string& text, const ojson& s) {
  const TestDecimal v = ParseTestDecimal(text);
  auto bound = [&](const char* key) { return ParseTestDecimal(s[key].dump()); };
  const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                          s["exclusiveMinimum"].get<bool>();
  const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                          s["exclusiveMaximum"].get<bool>();
  if (s.contains("minimum")) {
    const int c = CompareTestDecimal(v, bound("minimum"));
    if (c < 0 || (c == 0 && draft4_min)) return false;
  }
  if (s.contains("maximum")) {
    const int c = CompareTestDecimal(v, bound("maximum"));
    if (c > 0 || (c == 0 && draft4_max)) return false;
  }
  if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
      CompareTestDecimal(v, bound("exclusiveMinimum")) <= 0) {
    return false;
  }
  if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
      CompareTestDecimal(v, bound("exclusiveMaximum")) >= 0) {
    return false;
  }
  if (s.contains("multipleOf") && !MultipleOfTestDecimal(v, bound("multipleOf"))) return false;
  return true;
}

inline bool ValidateJson(const ojson& v, const ojson& s, const ojson& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    return ValidateJson(v, r == "#" ? root : root.at(ojson::json_pointer(r.substr(1))), root);
  }
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const auto& e : s["enum"]) {
      if (v == e) return true;
    }
    return false;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (s.contains(key)) {
      for (const auto& sub : s[key]) {
        if (ValidateJson(v, sub, root)) return true;
      }
      return false;
    }
  }
  if (s.contains("allOf")) return ValidateJson(v, s["allOf"][0], root);
  if (!s.contains("type")) return true;
  std::vector<std::string> types;
  if (s["type"].is_string()) {
    types.push_back(s["type"]);
  } else {
    for (const auto& t : s["type"]) types.push_back(t);
  }
  for (const std::string& t : types) {
    if (t == "null" && v.is_null()) return true;
    if (t == "boolean" && v.is_boolean()) return true;
    // Numbers by their text (a double's shortest text: exact for up to 15 significant digits).
    if (t == "integer" && v.is_number_integer() && NumberTextValid(v.dump(), s)) return true;
    if (t == "number" && v.is_number() && NumberTextValid(v.dump(), s)) return true;
    if (t == "string" && v.is_string()) {
      const std::string str = v;
      size_t chars = 0;
      for (unsigned char c : str) chars += (c & 0xC0) != 0x80;
      if (chars < s.value("minLength", size_t{0})) continue;
      if (s.contains("maxLength") && chars > s["maxLength"].get<size_t>()) continue;
      // std::regex reads bytes: fine for the ASCII patterns the tests use. The generated string
      // matches as a whole (the grammar's reading of "pattern").
      if (s.contains("pattern") &&
          !std::regex_match(str, std::regex(s["pattern"].get<std::string>()))) {
        continue;
      }
      return true;
    }
    if (t == "array" && v.is_array()) {
      if (v.size() < s.value("minItems", size_t{0})) continue;
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) continue;
      bool ok = true;
      for (const auto& item : v)
        ok = ok && (!s.contains("items") || ValidateJson(item, s["items"], root));
      if (ok) return true;
    }
    if (t == "object" && v.is_object()) {
      bool ok = true;
      for (const auto& req : s.value("required", ojson::array())) ok = ok && v.contains(req);
      for (const auto& [k, item] : v.items()) {
        if (s.contains("properties") && s["properties"].contains(k)) {
          ok = ok && ValidateJson(item, s["properties"][k], root);
        } else if (s.contains("properties")) {
          ok = false;  // the grammar never adds properties
        } else if (s.contains("additionalProperties")) {
          ok = ok && ValidateJson(item, s["additionalProperties"], root);
        }
      }
      if (ok) return true;
    }
  }
  return false;
}

inline bool ValidateJson(const ojson& v, const ojson& schema) {
  return ValidateJson(v, schema, schema);
}

}  // namespace llm::test
