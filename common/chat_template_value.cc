// Chat template engine: values (see chat_template_value.h).
#include "common/chat_template_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/chat_template.h"
#include "common/utf8.h"

namespace llm::chat_template_internal {

void Fail(std::string message) {
  throw RenderError{std::move(message), 0};
}

// ---- Value -----------------------------------------------------------------------------------

Value Value::Undefined(std::string hint) {
  Value v;
  v.p_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::Str(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.p_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

namespace {
int DepthOf(const Value& v) {
  if (v.is_list()) return v.list().depth;
  if (v.is_dict()) return v.dict().depth;
  return 0;
}
void CheckDepth(int depth) {
  if (depth > kMaxValueDepth) {
    Fail("lists and dicts nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
}
}  // namespace

Value Value::List(std::vector<Value> items, bool tuple) {
  auto data = std::make_shared<ListData>();
  for (const Value& x : items) data->depth = std::max(data->depth, DepthOf(x) + 1);
  CheckDepth(data->depth);
  data->items = std::move(items);
  data->tuple = tuple;
  Value v;
  v.kind_ = Kind::kList;
  v.p_ = std::move(data);
  return v;
}
Value Value::Dict(DictData d) {
  d.depth = 1;
  for (const auto& [k, x] : d.items) d.depth = std::max(d.depth, DepthOf(x) + 1);
  CheckDepth(d.depth);
  Value v;
  v.kind_ = Kind::kDict;
  v.p_ = std::make_shared<const DictData>(std::move(d));
  return v;
}
Value Value::Namespace(std::shared_ptr<DictData> d) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.p_ = std::move(d);
  return v;
}
Value Value::Loop(std::shared_ptr<const LoopData> loop) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.p_ = std::move(loop);
  return v;
}
Value Value::Function(std::shared_ptr<const Callable> f) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.p_ = std::move(f);
  return v;
}

const std::string& Value::str() const {
  static const std::string kEmpty;
  return p_ ? *static_cast<const std::string*>(p_.get()) : kEmpty;
}
const ListData& Value::list() const {
  return *static_cast<const ListData*>(p_.get());
}
const DictData& Value::dict() const {
  return *static_cast<const DictData*>(p_.get());
}
DictData& Value::mutable_namespace() const {
  // Only namespaces are made from a non-const DictData (Value::Namespace).
  return *const_cast<DictData*>(static_cast<const DictData*>(p_.get()));
}
const LoopData& Value::loop() const {
  return *static_cast<const LoopData*>(p_.get());
}
const Callable& Value::callable() const {
  return *static_cast<const Callable*>(p_.get());
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return list().tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kLoop:
      return "LoopContext";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

const Value* DictData::Find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::Set(const std::string& key, Value v) {
  if (const Value* existing = Find(key)) {
    *const_cast<Value*>(existing) = std::move(v);
    return;
  }
  items.emplace_back(key, std::move(v));
  constexpr size_t kIndexFrom = 16;
  if (items.size() == kIndexFrom) {
    for (size_t i = 0; i < items.size(); ++i) index_.emplace(items[i].first, i);
  } else if (items.size() > kIndexFrom) {
    index_.emplace(key, items.size() - 1);
  }
}

std::vector<Value> CallArgs::Bind(std::string_view function,
                                  std::initializer_list<const char*> names) const {
  std::vector<Value> out(names.size());
  if (positional.size() > names.size()) {
    Fail(std::string(function) + "() takes at most " + std::to_string(names.size()) +
         " arguments (" + std::to_string(positional.size()) + " given)");
  }
  for (size_t i = 0; i < positional.size(); ++i) out[i] = positional[i];
  for (const auto& [name, value] : keyword) {
    size_t i = 0;
    for (const char* n : names) {
      if (name == n) break;
      ++i;
    }
    if (i == names.size()) {
      Fail(std::string(function) + "() got an unexpected keyword argument '" + name + "'");
    }
    if (i < positional.size()) {
      Fail(std::string(function) + "() got multiple values for argument '" + name + "'");
    }
    out[i] = value;
  }
  return out;
}

// ---- JSON in ---------------------------------------------------------------------------------

namespace {

template <typename Json>
Value FromJsonAt(const Json& j, int depth) {
  if (depth > kMaxValueDepth) CheckDepth(depth);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Int(static_cast<int64_t>(u));
      }
      return Value::Float(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::Str(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(FromJsonAt(x, depth + 1));
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictData d;
      for (auto it = j.begin(); it != j.end(); ++it) d.Set(it.key(), FromJsonAt(*it, depth + 1));
      return Value::Dict(std::move(d));
    }
    default:
      return Value::Undefined("a binary or discarded JSON value");
  }
}

}  // namespace

Value FromJson(const nlohmann::json& j) {
  return FromJsonAt(j, 1);
}
Value FromJson(const nlohmann::ordered_json& j) {
  return FromJsonAt(j, 1);
}

// ---- str / repr ------------------------------------------------------------------------------

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, end);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
            digits.substr(static_cast<size_t>(exp) + 1);
    }
    return sign + out;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return sign + mant + ebuf;
}

namespace {

// Approximates Python's str.isprintable() for repr(): controls, separators other than the
// ASCII space, format characters and private use are escaped.
bool IsPrintable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || c == 0x061C) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) || c >= 0xF0000) return false;
  return true;
}

std::string StrRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    const size_t from = pos;
    const char32_t c = utf8::Next(s, &pos);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!IsPrintable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      out.append(s, from, pos - from);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return StrRepr(v.str());
    case Value::Kind::kUndefined:
      return "Undefined";
    default:
      return ToStr(v);
  }
}

std::string ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.bool_value() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.int_value());
    case Value::Kind::kFloat:
      return FloatRepr(v.float_value());
    case Value::Kind::kString:
      return v.str();
    case Value::Kind::kList: {
      const ListData& l = v.list();
      std::string out = l.tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += Repr(l.items[i]);
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      return out + (l.tuple ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += StrRepr(k) + ": " + Repr(x);
      }
      return out + "}";
    }
    case Value::Kind::kNamespace:
      return "<Namespace>";  // its attributes are not printed: a namespace may contain itself
    case Value::Kind::kLoop:
      return "<LoopContext>";
    case Value::Kind::kCallable:
      return "<function " + v.callable().Name() + ">";
  }
  return "";
}

// ---- tojson ----------------------------------------------------------------------------------

namespace {

void JsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (size_t pos = 0; pos < s.size();) {
    const size_t from = pos;
    const char32_t c = utf8::Next(s, &pos);
    char buf[16];
    switch (c) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {
        const char32_t u = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (u >> 10)),
                      static_cast<unsigned>(0xDC00 + (u & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      }
      *out += buf;
    } else {
      out->append(s, from, pos - from);
    }
  }
  *out += '"';
}

void JsonValue(const Value& v, const JsonOptions& o, int level, std::string* out) {
  auto newline = [&](int lvl) {
    if (!o.pretty) return;
    *out += '\n';
    for (int i = 0; i < lvl; ++i) *out += o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.bool_value() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.int_value());
      return;
    case Value::Kind::kFloat: {
      const double d = v.float_value();
      if (std::isnan(d)) {
        *out += "NaN";
      } else if (std::isinf(d)) {
        *out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        *out += FloatRepr(d);
      }
      return;
    }
    case Value::Kind::kString:
      JsonString(v.str(), o.ensure_ascii, out);
      return;
    case Value::Kind::kList: {
      const auto& items = v.list().items;
      if (items.empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += o.item_separator;
        newline(level + 1);
        JsonValue(items[i], o, level + 1, out);
      }
      newline(level);
      *out += ']';
      return;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (items.empty()) {
        *out += "{}";
        return;
      }
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += o.item_separator;
        newline(level + 1);
        JsonString(items[i]->first, o.ensure_ascii, out);
        *out += o.key_separator;
        JsonValue(items[i]->second, o, level + 1, out);
      }
      newline(level);
      *out += '}';
      return;
    }
    default:
      Fail("Object of type " + v.TypeName() + " is not JSON serializable");
  }
}

}  // namespace

std::string ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  JsonValue(v, options, 0, &out);
  return out;
}

// ---- truth, equality, order ------------------------------------------------------------------

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.bool_value();
    case Value::Kind::kInt:
      return v.int_value() != 0;
    case Value::Kind::kFloat:
      return v.float_value() != 0.0;
    case Value::Kind::kString:
      return !v.str().empty();
    case Value::Kind::kList:
      return !v.list().items.empty();
    case Value::Kind::kDict:
      return !v.dict().items.empty();
    default:
      return true;
  }
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.int_value() == b.int_value();
    return a.float_value() == b.float_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      const ListData& x = a.list();
      const ListData& y = b.list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equal(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.Find(k);
        if (!w || !Equal(v, *w)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

bool Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.int_value() < b.int_value();
    return a.float_value() < b.float_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list() && a.list().tuple == b.list().tuple) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equal(x[i], y[i])) return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) Fail(a.is_undefined() ? a.str() : b.str());
  Fail("'<' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(utf8::CountChars(v.str()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().items.size());
    default:
      Fail("object of type '" + v.TypeName() + "' has no len()");
  }
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.push_back(Value::Str(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (std::string& c : Chars(v.str())) chars.push_back(Value::Str(std::move(c)));
      return chars;
    }
    default:
      Fail("'" + v.TypeName() + "' object is not iterable");
  }
}

// ---- strings ---------------------------------------------------------------------------------

std::vector<std::string> Chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t from = pos;
    utf8::Next(s, &pos);
    out.emplace_back(s.substr(from, pos - from));
  }
  return out;
}

bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string Strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) {
    for (size_t pos = 0; pos < chars->size();) set.push_back(utf8::Next(*chars, &pos));
  }
  auto strip = [&](char32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPySpace(c);
  };
  size_t b = 0;
  size_t e = s.size();
  if (left) {
    while (b < e) {
      size_t next = b;
      if (!strip(utf8::Next(s, &next))) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;  // back up to the first byte of the last character
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      if (!strip(utf8::Next(s, &pos)) || pos != e) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// ---- budget ----------------------------------------------------------------------------------

void Budget::Step(int64_t n) {
  steps_ += n;
  if (steps_ > kMaxChatTemplateSteps) {
    Fail("rendering takes more than " + std::to_string(kMaxChatTemplateSteps) +
         " steps (kMaxChatTemplateSteps; loops nested over long lists?)");
  }
}

void Budget::Iteration() {
  if (++iterations_ > kMaxChatTemplateLoopIterations) {
    Fail("more than " + std::to_string(kMaxChatTemplateLoopIterations) +
         " loop iterations and macro calls (kMaxChatTemplateLoopIterations)");
  }
  Step();
}

void Budget::Built(size_t bytes) {
  if (bytes > kMaxChatTemplateOutputBytes) {
    Fail("a string longer than " + std::to_string(kMaxChatTemplateOutputBytes >> 20) +
         " MiB (kMaxChatTemplateOutputBytes)");
  }
  built_bytes_ += bytes;
  if (built_bytes_ > kMaxChatTemplateBuiltBytes) {
    Fail("the template builds more than " + std::to_string(kMaxChatTemplateBuiltBytes >> 20) +
         " MiB of strings (kMaxChatTemplateBuiltBytes)");
  }
}

}  // namespace llm::chat_template_internal
