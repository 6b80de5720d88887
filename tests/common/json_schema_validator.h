// An independent validator for the JSON Schema subset structured output supports
// (common/json_schema_grammar.h), written from the JSON Schema spec for tests: what the grammar
// generates must pass it. Not the engine's code.
#pragma once

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace llm::test {

using ojson = nlohmann::ordered_json;

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
    if (t == "integer" && v.is_number_integer()) {
      const double d = v.get<double>();
      if (s.contains("minimum") && d < s["minimum"].get<double>()) continue;
      if (s.contains("maximum") && d > s["maximum"].get<double>()) continue;
      if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) continue;
      if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) continue;
      return true;
    }
    if (t == "number" && v.is_number()) return true;
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
