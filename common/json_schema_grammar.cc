#include "common/json_schema_grammar.h"

#include "common/grammar_matcher.h"
#include "common/integer_range_grammar.h"
#include "common/number_range_grammar.h"
#include "common/regex_grammar.h"

#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <variant>

namespace llm {
namespace {

using ojson = nlohmann::ordered_json;
using Seq = GrammarBuilder::Sequence;

// Keywords that only describe: they change nothing in what is valid.
const std::set<std::string>& IgnoredKeywords() {
  static const std::set<std::string> k = {
      "title",           "description",   "default",  "examples",    "format",
      "$schema",         "$id",           "$comment", "deprecated",  "readOnly",
      "writeOnly",       "strict",        "$defs",    "definitions", "contentMediaType",
      "contentEncoding", "discriminator", "nullable", "$anchor",     "name"};
  return k;
}

const std::set<std::string>& SupportedKeywords() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "pattern",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "multipleOf"};
  return k;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const ojson& document) : doc_(document) {
    space_ = MakeSpace();
    chars_ = MakeChar();
  }

  GrammarBuilder& b() { return b_; }

  // The generic JSON grammar rules (built on first use).
  uint32_t AnyValue() {
    if (any_value_) return *any_value_;
    any_value_ = b_.NewRule();
    any_object_ = b_.NewRule();
    const uint32_t array = b_.NewRule();
    const uint32_t member = b_.Rule({Cat(
        {Ref(String(0, -1)), Ref(space_), B(":"), Ref(space_), Ref(*any_value_), Ref(space_)})});
    const uint32_t more_members = b_.Repeat(Cat({B(","), Ref(space_), Ref(member)}), 0, -1);
    b_.AddAlternative(*any_object_, Cat({B("{"), Ref(space_), B("}")}));
    b_.AddAlternative(*any_object_,
                      Cat({B("{"), Ref(space_), Ref(member), Ref(more_members), B("}")}));
    const uint32_t item = b_.Rule({Cat({Ref(*any_value_), Ref(space_)})});
    const uint32_t more_items = b_.Repeat(Cat({B(","), Ref(space_), Ref(item)}), 0, -1);
    b_.AddAlternative(array, Cat({B("["), Ref(space_), B("]")}));
    b_.AddAlternative(array, Cat({B("["), Ref(space_), Ref(item), Ref(more_items), B("]")}));
    for (uint32_t r : {*any_object_, array, String(0, -1), Number(), Boolean(), Null()}) {
      b_.AddAlternative(*any_value_, {GrammarBuilder::Ref(r)});
    }
    return *any_value_;
  }
  uint32_t AnyObject() {
    AnyValue();
    return *any_object_;
  }

  StatusOr<uint32_t> Compile(const ojson& s, const std::string& at, int depth) {
    if (depth > kMaxSchemaDepth) {
      return Fail("schemas nest deeper than " + std::to_string(kMaxSchemaDepth), at);
    }
    // Past the grammar's limits (many big parts, e.g. a multipleOf or a length-bounded pattern
    // per property): stop now rather than compile the rest for nothing.
    if (b_.too_large()) return TooLarge(at);
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      return Fail("the schema false accepts nothing", at);
    }
    if (!s.is_object()) return Fail("a schema must be an object or a boolean", at);
    for (const auto& [key, value] : s.items()) {
      if (!SupportedKeywords().count(key) && !IgnoredKeywords().count(key)) {
        return Fail("'" + key + "' is not supported", at);
      }
    }
    if (const auto it = s.find("$ref"); it != s.end()) return CompileRef(*it, at, depth);
    if (const auto it = s.find("const"); it != s.end()) return LiteralRule({*it});
    if (const auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) return Fail("'enum' must be a non-empty array", at);
      if (it->size() > kMaxSchemaEnumValues) {
        return Fail("'enum' has more than " + std::to_string(kMaxSchemaEnumValues) + " values", at);
      }
      return LiteralRule(std::vector<ojson>(it->begin(), it->end()));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const auto it = s.find(key); it != s.end()) return CompileAnyOf(*it, key, at, depth);
    }
    if (const auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1) {
        return Fail("'allOf' is supported with exactly one schema", at);
      }
      return Compile((*it)[0], at + "/allOf/0", depth + 1);
    }
    std::vector<std::string> types;
    if (const auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const auto& t : *it) {
          if (!t.is_string()) return Fail("'type' entries must be strings", at);
          types.push_back(t.get<std::string>());
        }
      } else {
        return Fail("'type' must be a string or a non-empty array of strings", at);
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern")) {
      types.push_back("string");
    } else if (const char* bound = BoundKeyword(s)) {
      return Fail(
          std::string("'") + bound + "' is supported with \"type\": \"integer\" or \"number\"", at);
    } else {
      return AnyValue();
    }
    const uint32_t rule = b_.NewRule();
    for (const std::string& t : types) {
      LLM_ASSIGN_OR_RETURN(uint32_t r, CompileType(s, t, at, depth));
      b_.AddAlternative(rule, {GrammarBuilder::Ref(r)});
    }
    return rule;
  }

 private:
  static Status Fail(const std::string& what, const std::string& at) {
    return InvalidArgument(what + " (at " + at + ")");
  }
  static Status TooLarge(const std::string& at) {
    return Fail("the schema needs more than " + std::to_string(kMaxGrammarElements) +
                    " grammar elements or " + std::to_string(kMaxGrammarRules) + " rules",
                at);
  }
  GrammarBuilder::Symbol Ref(uint32_t r) { return GrammarBuilder::Ref(r); }
  Seq B(std::string_view text) { return b_.Literal(text); }
  // Concatenates symbols and literal sequences.
  Seq Cat(std::initializer_list<std::variant<GrammarBuilder::Symbol, Seq>> parts) {
    Seq out;
    for (const auto& p : parts) {
      if (const auto* sym = std::get_if<GrammarBuilder::Symbol>(&p)) {
        out.push_back(*sym);
      } else {
        const Seq& seq = std::get<Seq>(p);
        out.insert(out.end(), seq.begin(), seq.end());
      }
    }
    return out;
  }

  // "" | " " | "\n" [ \t]{0,20}
  uint32_t MakeSpace() {
    ByteSet indent;
    indent.Add(' ');
    indent.Add('\t');
    const uint32_t tabs = b_.Repeat({b_.Bytes(indent)}, 0, 20);
    return b_.Rule({{}, B(" "), Cat({B("\n"), Ref(tabs)})});
  }

  // One character of a JSON string: printable ASCII but '"' and '\', an escape, or a
  // well-formed UTF-8 sequence (no overlongs, no surrogates, nothing past U+10FFFF).
  uint32_t MakeChar() {
    ByteSet ascii;
    ascii.AddRange(0x20, 0x7F);
    ascii.bits['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
    ascii.bits['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
    ByteSet escaped;
    for (char c : std::string_view("\"\\/bfnrt")) escaped.Add(static_cast<uint8_t>(c));
    ByteSet hex;
    hex.AddRange('0', '9');
    hex.AddRange('a', 'f');
    hex.AddRange('A', 'F');
    const auto h = b_.Bytes(hex);
    ByteSet hex_0c, hex_d, hex_ef;
    hex_0c.AddRange('0', '9');
    hex_0c.AddRange('a', 'c');
    hex_0c.AddRange('A', 'C');
    hex_d.Add('d');
    hex_d.Add('D');
    hex_ef.AddRange('e', 'f');
    hex_ef.AddRange('E', 'F');
    const auto cont = b_.Range(0x80, 0xBF);
    ByteSet e1;  // E1-EC, EE-EF
    e1.AddRange(0xE1, 0xEC);
    e1.AddRange(0xEE, 0xEF);
    return b_.Rule({
        {b_.Bytes(ascii)},
        Cat({B("\\"), b_.Bytes(escaped)}),
        // \u escapes outside the UTF-16 surrogates (D800-DFFF), which many parsers refuse
        // unpaired; characters past U+FFFF come as UTF-8.
        Cat({B("\\u"), b_.Bytes(hex_0c), h, h, h}),
        Cat({B("\\u"), b_.Bytes(hex_d), b_.Range('0', '7'), h, h}),
        Cat({B("\\u"), b_.Bytes(hex_ef), h, h, h}),
        {b_.Range(0xC2, 0xDF), cont},
        {b_.Byte(0xE0), b_.Range(0xA0, 0xBF), cont},
        {b_.Bytes(e1), cont, cont},
        {b_.Byte(0xED), b_.Range(0x80, 0x9F), cont},
        {b_.Byte(0xF0), b_.Range(0x90, 0xBF), cont, cont},
        {b_.Range(0xF1, 0xF3), cont, cont, cont},
        {b_.Byte(0xF4), b_.Range(0x80, 0x8F), cont, cont},
    });
  }

  uint32_t String(int min, int max) {
    const auto key = std::make_pair(min, max);
    if (const auto it = strings_.find(key); it != strings_.end()) return it->second;
    const uint32_t body = b_.Repeat({Ref(chars_)}, min, max);
    const uint32_t r = b_.Rule({Cat({B("\""), Ref(body), B("\"")})});
    strings_.emplace(key, r);
    return r;
  }

  uint32_t IntegerPart() {
    if (int_part_) return *int_part_;
    const uint32_t digits = b_.Repeat({b_.Range('0', '9')}, 0, 15);
    int_part_ = b_.Rule({B("0"), {b_.Range('1', '9'), Ref(digits)}});
    return *int_part_;
  }
  uint32_t Integer() {
    if (integer_) return *integer_;
    const uint32_t sign = b_.Rule({{}, B("-")});
    integer_ = b_.Rule({{Ref(sign), Ref(IntegerPart())}});
    return *integer_;
  }
  uint32_t Number() {
    if (number_) return *number_;
    const uint32_t fraction =
        b_.Rule({{}, Cat({B("."), Ref(b_.Repeat({b_.Range('0', '9')}, 1, 16))})});
    ByteSet e, sign;
    e.Add('e');
    e.Add('E');
    sign.Add('-');
    sign.Add('+');
    const uint32_t exp_sign = b_.Rule({{}, {b_.Bytes(sign)}});
    const uint32_t exponent =
        b_.Rule({{}, {b_.Bytes(e), Ref(exp_sign), Ref(b_.Repeat({b_.Range('0', '9')}, 1, 2))}});
    number_ = b_.Rule({{Ref(Integer()), Ref(fraction), Ref(exponent)}});
    return *number_;
  }
  uint32_t Boolean() { return b_.Rule({B("true"), B("false")}); }
  uint32_t Null() { return b_.Rule({B("null")}); }

  // Alternatives of exact JSON texts (const, enum).
  StatusOr<uint32_t> LiteralRule(const std::vector<ojson>& values) {
    std::vector<Seq> alts;
    for (const ojson& v : values)
      alts.push_back(B(v.dump(-1, ' ', false, ojson::error_handler_t::replace)));
    return b_.Rule(alts);
  }

  StatusOr<uint32_t> CompileRef(const ojson& ref, const std::string& at, int depth) {
    if (!ref.is_string()) return Fail("'$ref' must be a string", at);
    const std::string r = ref.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    if (r.empty() || r[0] != '#') {
      return Fail("'$ref' to another document ('" + r + "') is not supported", at);
    }
    const ojson* target = &doc_;
    if (r.size() > 1) {
      try {
        const ojson::json_pointer pointer(r.substr(1));
        if (!doc_.contains(pointer)) return Fail("'$ref' " + r + " points at nothing", at);
        target = &doc_.at(pointer);
      } catch (const std::exception&) {
        return Fail("'$ref' " + r + " is not a JSON pointer", at);
      }
    }
    // The rule exists before its body is compiled, so recursive schemas refer back to it.
    const uint32_t rule = b_.NewRule();
    refs_.emplace(r, rule);
    LLM_ASSIGN_OR_RETURN(uint32_t body, Compile(*target, r, depth + 1));
    b_.AddAlternative(rule, {Ref(body)});
    return rule;
  }

  StatusOr<uint32_t> CompileAnyOf(const ojson& list, const char* key, const std::string& at,
                                  int depth) {
    if (!list.is_array() || list.empty()) {
      return Fail(std::string("'") + key + "' must be a non-empty array", at);
    }
    if (list.size() > kMaxSchemaEnumValues) {
      return Fail(std::string("'") + key + "' has too many schemas", at);
    }
    const uint32_t rule = b_.NewRule();
    for (size_t i = 0; i < list.size(); ++i) {
      LLM_ASSIGN_OR_RETURN(uint32_t r,
                           Compile(list[i], at + "/" + key + "/" + std::to_string(i), depth + 1));
      b_.AddAlternative(rule, {Ref(r)});
    }
    return rule;
  }

  // Reads a non-negative integer keyword; `cap`: values above it mean "no bound" for maxima and
  // are an error for minima.
  Status Bound(const ojson& s, const char* key, const std::string& at, int* out) {
    const auto it = s.find(key);
    if (it == s.end()) return Status::Ok();
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return Fail(std::string("'") + key + "' must be a non-negative integer", at);
    }
    const int64_t v = it->get<int64_t>();
    *out = static_cast<int>(std::min<int64_t>(v, INT32_MAX));
    return Status::Ok();
  }

  Status MinMax(const ojson& s, const char* min_key, const char* max_key, int cap,
                const std::string& at, int* min, int* max) {
    *min = 0;
    *max = -1;
    LLM_RETURN_IF_ERROR(Bound(s, min_key, at, min));
    LLM_RETURN_IF_ERROR(Bound(s, max_key, at, max));
    if (*min > cap) {
      return Fail(
          std::string("'") + min_key + "' above " + std::to_string(cap) + " is not supported", at);
    }
    if (*max > cap) *max = -1;
    if (*max >= 0 && *max < *min) {
      return Fail(std::string("'") + max_key + "' is below '" + min_key + "'", at);
    }
    return Status::Ok();
  }

  StatusOr<uint32_t> CompileType(const ojson& s, const std::string& type, const std::string& at,
                                 int depth) {
    if (type == "string") {
      int min = 0, max = -1;
      LLM_RETURN_IF_ERROR(MinMax(s, "minLength", "maxLength", kMaxSchemaLength, at, &min, &max));
      LLM_ASSIGN_OR_RETURN(std::optional<uint32_t> shaped, PatternOrFormat(s, at, min, max));
      if (shaped) return *shaped;
      return String(min, max);
    }
    if (type == "integer") return BoundedInteger(s, at);
    if (type == "number") return BoundedNumber(s, at);
    if (type == "boolean") return Boolean();
    if (type == "null") return Null();
    if (type == "array") return CompileArray(s, at, depth);
    if (type == "object") return CompileObject(s, at, depth);
    return Fail("unknown type '" + type + "'", at);
  }

  StatusOr<uint32_t> CompileArray(const ojson& s, const std::string& at, int depth) {
    int min = 0, max = -1;
    LLM_RETURN_IF_ERROR(MinMax(s, "minItems", "maxItems", kMaxSchemaItems, at, &min, &max));
    uint32_t value = 0;
    if (const auto it = s.find("items"); it != s.end()) {
      LLM_ASSIGN_OR_RETURN(value, Compile(*it, at + "/items", depth + 1));
    } else {
      value = AnyValue();
    }
    const uint32_t item = b_.Rule({{Ref(value), Ref(space_)}});
    const uint32_t rule = b_.NewRule();
    if (min == 0) b_.AddAlternative(rule, Cat({B("["), Ref(space_), B("]")}));
    if (max != 0) {
      const uint32_t more = b_.Repeat(Cat({B(","), Ref(space_), Ref(item)}), std::max(min - 1, 0),
                                      max < 0 ? -1 : max - 1);
      b_.AddAlternative(rule, Cat({B("["), Ref(space_), Ref(item), Ref(more), B("]")}));
    }
    return rule;
  }

  StatusOr<uint32_t> CompileObject(const ojson& s, const std::string& at, int depth) {
    const auto props = s.find("properties");
    std::set<std::string> required;
    if (const auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) return Fail("'required' must be an array of names", at);
      for (const auto& name : *it) {
        if (!name.is_string()) return Fail("'required' must be an array of names", at);
        if (props == s.end() || !props->is_object() || !props->contains(name.get<std::string>())) {
          return Fail("required property '" + name.get<std::string>() + "' is not in 'properties'",
                      at);
        }
        required.insert(name.get<std::string>());
      }
    }
    if (props != s.end() && props->is_object() && props->empty()) {
      // "properties": {} names none, and no others are generated.
      return b_.Rule({Cat({B("{"), Ref(space_), B("}")})});
    }
    if (props == s.end()) {
      // No properties keyword: a free-form object whose values follow additionalProperties.
      const auto extra = s.find("additionalProperties");
      if (extra == s.end() || (extra->is_boolean() && extra->get<bool>())) return AnyObject();
      if (extra->is_boolean()) return b_.Rule({Cat({B("{"), Ref(space_), B("}")})});
      LLM_ASSIGN_OR_RETURN(uint32_t value,
                           Compile(*extra, at + "/additionalProperties", depth + 1));
      const uint32_t member = b_.Rule(
          {Cat({Ref(String(0, -1)), Ref(space_), B(":"), Ref(space_), Ref(value), Ref(space_)})});
      const uint32_t more = b_.Repeat(Cat({B(","), Ref(space_), Ref(member)}), 0, -1);
      return b_.Rule({Cat({B("{"), Ref(space_), B("}")}),
                      Cat({B("{"), Ref(space_), Ref(member), Ref(more), B("}")})});
    }
    if (!props->is_object()) return Fail("'properties' must be an object", at);
    if (props->size() > kMaxSchemaProperties) {
      return Fail("more than " + std::to_string(kMaxSchemaProperties) + " properties", at);
    }
    std::vector<uint32_t> members;
    std::vector<bool> needed;
    for (const auto& [name, sub] : props->items()) {
      LLM_ASSIGN_OR_RETURN(uint32_t value, Compile(sub, at + "/properties/" + name, depth + 1));
      members.push_back(
          b_.Rule({Cat({B(ojson(name).dump(-1, ' ', false, ojson::error_handler_t::replace)),
                        Ref(space_), B(":"), Ref(space_), Ref(value), Ref(space_)})}));
      needed.push_back(required.count(name) > 0);
    }
    // From the last property back: after(i) = the rest when a member was already written
    // (each needs a comma), first(i) = the rest when none was. Optional members may be skipped.
    const uint32_t empty = b_.Rule({{}});
    uint32_t after = empty, first = empty;
    for (size_t i = members.size(); i-- > 0;) {
      const Seq with_comma = Cat({B(","), Ref(space_), Ref(members[i]), Ref(after)});
      const Seq plain = {Ref(members[i]), Ref(after)};
      const uint32_t new_after =
          needed[i] ? b_.Rule({with_comma}) : b_.Rule({with_comma, {Ref(after)}});
      const uint32_t new_first = needed[i] ? b_.Rule({plain}) : b_.Rule({plain, {Ref(first)}});
      after = new_after;
      first = new_first;
    }
    return b_.Rule({Cat({B("{"), Ref(space_), Ref(first), B("}")})});
  }

  // The first numeric keyword of `s` (bounds, multipleOf; nullptr: none).
  static const char* BoundKeyword(const ojson& s) {
    for (const char* key :
         {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
      if (s.contains(key)) return key;
    }
    return nullptr;
  }

  // A string with a "pattern" (full match, as llama.cpp and xgrammar) or a known "format"
  // (nullopt: neither; other formats are annotations, as vLLM / xgrammar treat them), of
  // min..max characters (max < 0: no bound).
  StatusOr<std::optional<uint32_t>> PatternOrFormat(const ojson& s, const std::string& at, int min,
                                                    int max) {
    std::string regex;
    const char* key = "pattern";
    if (const auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return Fail("'pattern' must be a string", at);
      regex = it->get<std::string>();
    } else if (const auto f = s.find("format"); f != s.end() && f->is_string()) {
      const auto known = FormatPatterns().find(f->get<std::string>());
      if (known == FormatPatterns().end()) return std::optional<uint32_t>();
      regex = known->second;
      key = "format";
    } else {
      return std::optional<uint32_t>();
    }
    StatusOr<uint32_t> body = min == 0 && max < 0
                                  ? RegexRule(regex, RegexTarget::kJsonString, &b_)
                                  : RegexLengthRule(regex, RegexTarget::kJsonString, min, max, &b_);
    if (!body.ok()) return Fail(std::string("'") + key + "': " + body.status().message(), at);
    return std::optional<uint32_t>(b_.Rule({Cat({B("\""), Ref(*body), B("\"")})}));
  }

  static const std::map<std::string, std::string>& FormatPatterns() {
    static const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
    static const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?"
        "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    static const std::string atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
    static const std::string label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    static const std::map<std::string, std::string> k = {
        {"date", date},
        {"time", time},
        {"date-time", date + "T" + time},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"email", atom + "(\\." + atom + ")*@" + label + "(\\." + label + ")+"},
    };
    return k;
  }

  // Reads the integer bound `key` into *out (the tighter one wins): a lower or an upper one,
  // exclusive or not; fractional bounds round inwards.
  Status ReadBound(const ojson& s, const char* key, bool lower, bool exclusive,
                   const std::string& at, std::optional<int64_t>* out) {
    const auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return Status::Ok();  // draft 4's booleans: below
    if (!it->is_number()) return Fail(std::string("'") + key + "' must be a number", at);
    const double d = it->get<double>();
    if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(kMaxIntegerBound)) {
      return Fail(std::string("'") + key + "' beyond 10^18 is not supported", at);
    }
    int64_t v = 0;
    if (it->is_number_integer()) {
      v = it->get<int64_t>();
      if (exclusive) v += lower ? 1 : -1;
    } else {
      v = static_cast<int64_t>(lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d))
                                     : (exclusive ? std::ceil(d) - 1 : std::floor(d)));
    }
    if (!*out || (lower ? v > **out : v < **out)) *out = v;
    return Status::Ok();
  }

  // multipleOf: m = N·10^-k, an integer N (1..kMaxMultipleOf) and k (0..15) fraction digits:
  // an integer (k = 0), a power of ten (N = 1: 0.01), or any other such decimal (0.25, 2.5 =
  // 25·10^-1, 0.075).
  struct Multiple {
    int64_t integer = 1;       // N; 1 when none
    int fraction_digits = -1;  // k; -1 for an integer m (or none)
    std::string text;          // m as a plain decimal ("2.5"), for errors
  };
  StatusOr<Multiple> ReadMultipleOf(const ojson& s, const std::string& at) {
    Multiple m;
    const auto it = s.find("multipleOf");
    if (it == s.end()) return m;
    if (!it->is_number()) return Fail("'multipleOf' must be a number", at);
    StatusOr<Decimal> d = ParseDecimal(it->dump());
    if (!d.ok()) return Fail("'multipleOf' " + d.status().message(), at);
    if (d->negative || (d->integer == 0 && d->fraction.empty())) {
      return Fail("'multipleOf' must be above 0", at);
    }
    if (d->integer > static_cast<uint64_t>(kMaxMultipleOf)) {
      return Fail("'multipleOf' above " + std::to_string(kMaxMultipleOf) + " is not supported", at);
    }
    m.text = std::to_string(d->integer);
    if (d->fraction.empty()) {
      m.integer = static_cast<int64_t>(d->integer);
      return m;
    }
    const std::string& f = d->fraction;  // no trailing zeros
    m.text += "." + f;
    if (f.size() > static_cast<size_t>(kMaxNumberFractionDigits)) {
      if (d->integer == 0 && f.back() == '1' && f.find_first_not_of('0') == f.size() - 1) {
        return Fail("'multipleOf' below 1e-" + std::to_string(kMaxNumberFractionDigits) +
                        " is not supported",
                    at);
      }
      return Fail("'multipleOf' with more than " + std::to_string(kMaxNumberFractionDigits) +
                      " digits after the decimal point is not supported",
                  at);
    }
    // N = the digits without the point (integer <= 1000 and at most 15 fraction digits: no
    // overflow).
    uint64_t n = d->integer;
    for (char c : f) n = n * 10 + static_cast<uint64_t>(c - '0');
    if (n > static_cast<uint64_t>(kMaxMultipleOf)) {
      return Fail("'multipleOf' is supported as an integer up to " +
                      std::to_string(kMaxMultipleOf) + " times a power of ten 10^-k, k <= " +
                      std::to_string(kMaxNumberFractionDigits) + " (such as 7, 0.01, 0.25 or 2.5)",
                  at);
    }
    m.integer = static_cast<int64_t>(n);
    m.fraction_digits = static_cast<int>(f.size());
    return m;
  }

  // The integer bounds (fractional ones rounded inwards).
  Status IntegerBounds(const ojson& s, const std::string& at, std::optional<int64_t>* lo,
                       std::optional<int64_t>* hi) {
    // Draft 4: "exclusiveMinimum": true makes "minimum" exclusive.
    const bool ex_min = s.value("exclusiveMinimum", ojson()) == true;
    const bool ex_max = s.value("exclusiveMaximum", ojson()) == true;
    LLM_RETURN_IF_ERROR(ReadBound(s, "minimum", true, ex_min, at, lo));
    LLM_RETURN_IF_ERROR(ReadBound(s, "exclusiveMinimum", true, true, at, lo));
    LLM_RETURN_IF_ERROR(ReadBound(s, "maximum", false, ex_max, at, hi));
    LLM_RETURN_IF_ERROR(ReadBound(s, "exclusiveMaximum", false, true, at, hi));
    return Status::Ok();
  }

  // The integers between the bounds that are multiples of `multiple` (named `name` in errors).
  StatusOr<uint32_t> IntegersOf(const ojson& s, const std::string& at, int64_t multiple,
                                const std::string& name) {
    std::optional<int64_t> lo, hi;
    LLM_RETURN_IF_ERROR(IntegerBounds(s, at, &lo, &hi));
    if (lo && hi && *lo > *hi) return Fail("no integer lies between the bounds", at);
    if (multiple <= 1) return IntegerRangeRule(lo, hi, &b_);
    const std::optional<uint32_t> r = IntegerMultipleRule(lo, hi, multiple, &b_);
    if (b_.too_large()) return TooLarge(at);
    if (!r) {
      return Fail("no multiple of " + name + " lies between the bounds", at);
    }
    return *r;
  }

  StatusOr<uint32_t> BoundedInteger(const ojson& s, const std::string& at) {
    if (!BoundKeyword(s)) return Integer();
    LLM_ASSIGN_OR_RETURN(Multiple m, ReadMultipleOf(s, at));
    if (m.fraction_digits < 0) return IntegersOf(s, at, m.integer, m.text);
    // An integer x is a multiple of N·10^-k when N divides x·10^k, i.e. when N / gcd(N, 10^k)
    // divides x (every integer is a multiple of 10^-k; those of 2.5 are those of 5).
    int64_t pow10 = 1;
    for (int i = 0; i < m.fraction_digits; ++i) pow10 *= 10;
    return IntegersOf(s, at, m.integer / std::gcd(m.integer, pow10), m.text);
  }

  // Reads the decimal bound `key` into *out (the tighter one wins; at equal values the exclusive
  // one).
  Status ReadDecimalBound(const ojson& s, const char* key, bool lower, bool exclusive,
                          const std::string& at, std::optional<DecimalBound>* out) {
    const auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return Status::Ok();  // draft 4's booleans
    if (!it->is_number()) return Fail(std::string("'") + key + "' must be a number", at);
    StatusOr<Decimal> d = ParseDecimal(it->dump());
    if (!d.ok()) return Fail(std::string("'") + key + "' " + d.status().message(), at);
    const DecimalBound bound{*d, exclusive};
    if (!*out) {
      *out = bound;
      return Status::Ok();
    }
    const int c = CompareDecimal(bound.value, (*out)->value);
    if ((lower ? c > 0 : c < 0) || (c == 0 && exclusive)) *out = bound;
    return Status::Ok();
  }

  StatusOr<uint32_t> BoundedNumber(const ojson& s, const std::string& at) {
    if (!BoundKeyword(s)) return Number();
    LLM_ASSIGN_OR_RETURN(Multiple m, ReadMultipleOf(s, at));
    if (m.fraction_digits < 0 && s.contains("multipleOf")) {
      return IntegersOf(s, at, m.integer, m.text);
    }
    const bool ex_min = s.value("exclusiveMinimum", ojson()) == true;
    const bool ex_max = s.value("exclusiveMaximum", ojson()) == true;
    std::optional<DecimalBound> lo, hi;
    LLM_RETURN_IF_ERROR(ReadDecimalBound(s, "minimum", true, ex_min, at, &lo));
    LLM_RETURN_IF_ERROR(ReadDecimalBound(s, "exclusiveMinimum", true, true, at, &lo));
    LLM_RETURN_IF_ERROR(ReadDecimalBound(s, "maximum", false, ex_max, at, &hi));
    LLM_RETURN_IF_ERROR(ReadDecimalBound(s, "exclusiveMaximum", false, true, at, &hi));
    const int digits = m.fraction_digits >= 0 ? m.fraction_digits : kMaxNumberFractionDigits;
    // multipleOf N·10^-k: the numbers with at most k fraction digits whose digits, the fraction
    // padded with zeros to k, spell a multiple of N (exact: every such number in range is
    // accepted with 0..k fraction digits; never more, so "0.500" is not written for 0.5).
    const std::optional<uint32_t> r = DecimalMultipleRule(lo, hi, digits, m.integer, &b_);
    if (b_.too_large()) return TooLarge(at);
    if (!r && m.integer > 1) {
      return Fail("no multiple of " + m.text + " lies between the bounds", at);
    }
    if (!r) {
      return Fail("no number with at most " + std::to_string(digits) +
                      " digits after the decimal point lies between the bounds",
                  at);
    }
    return *r;
  }

  const ojson& doc_;
  GrammarBuilder b_;
  uint32_t space_ = 0, chars_ = 0;
  std::optional<uint32_t> any_value_, any_object_, int_part_, integer_, number_;
  std::map<std::pair<int, int>, uint32_t> strings_;
  std::map<std::string, uint32_t> refs_;
};

}  // namespace

bool JsonTextNestingAtMost(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) return InvalidArgument("the choice list is empty");
  if (choices.size() > kMaxChoices) {
    return InvalidArgument("more than " + std::to_string(kMaxChoices) + " choices");
  }
  size_t bytes = 0;
  for (const std::string& c : choices) bytes += c.size();
  if (bytes > kMaxChoiceBytes) {
    return InvalidArgument("the choices are longer than " + std::to_string(kMaxChoiceBytes) +
                           " bytes in all");
  }
  GrammarBuilder b;
  std::vector<GrammarBuilder::Sequence> alts;
  for (const std::string& c : choices) alts.push_back(b.Literal(c));
  const uint32_t root = b.Rule(alts);
  return b.Build(root);
}

StatusOr<Grammar> JsonObjectGrammar() {
  const ojson empty = ojson::object();
  SchemaCompiler c(empty);
  return c.b().Build(c.AnyObject());
}

StatusOr<Grammar> JsonSchemaGrammar(const ojson& schema) {
  SchemaCompiler c(schema);
  LLM_ASSIGN_OR_RETURN(uint32_t root, c.Compile(schema, "#", 0));
  LLM_ASSIGN_OR_RETURN(Grammar g, c.b().Build(root));
  // A schema can be well-formed and still admit nothing the grammar can spell (a $ref loop).
  GrammarMatcher m(std::make_shared<Grammar>(g));
  if (m.state() == GrammarMatcher::kDead)
    return InvalidArgument("the schema accepts no value (at #)");
  return g;
}

}  // namespace llm
