// Chat template engine: Python's str(), repr() and transformers' tojson (json.dumps) of values,
// and the str methods' building blocks (code points, whitespace, strip, case).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/chat_template_value.h"
#include "common/utf8.h"

#include <utf8proc.h>

namespace llm::chat_template_internal {

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
      return v.big_int_digits() ? *v.big_int_digits() : FloatRepr(v.float_value());
    case Value::Kind::kString:
      return v.str();
    case Value::Kind::kList: {
      const ListData& l = v.list();
      std::string out = l.tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += Repr(l.items[i]);
        Budget::CheckSize(out.size());
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
        Budget::CheckSize(out.size());
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
      if (v.big_int_digits()) {
        *out += *v.big_int_digits();
      } else if (std::isnan(d)) {
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
        Budget::CheckSize(out->size());
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
        Budget::CheckSize(out->size());
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

namespace {

bool IsUpperCp(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LU;
}
bool IsLowerCp(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LL;
}
// Python's "cased": upper, lower or title case letters.
bool IsCasedCp(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
char32_t ToUpperCp(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t ToLowerCp(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}
char32_t ToTitleCp(char32_t c) {
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c)));
}

// Maps every code point of `s`; `f` gets the code point and its index.
template <typename F>
std::string MapChars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  for (size_t pos = 0; pos < s.size(); ++i) utf8::Append(f(utf8::Next(s, &pos), i), &out);
  return out;
}

}  // namespace

bool IsAlphaCp(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
bool IsAlnumCp(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return IsAlphaCp(c) || (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

std::string Upper(std::string_view s) {
  return MapChars(s, [](char32_t c, size_t) { return ToUpperCp(c); });
}

std::string Lower(std::string_view s) {
  return MapChars(s, [](char32_t c, size_t) { return ToLowerCp(c); });
}

std::string SwapCase(std::string_view s) {
  return MapChars(s, [](char32_t c, size_t) {
    return IsUpperCp(c) ? ToLowerCp(c) : IsLowerCp(c) ? ToUpperCp(c) : c;
  });
}

std::string PyTitle(std::string_view s) {
  bool previous_cased = false;
  return MapChars(s, [&](char32_t c, size_t) {
    const char32_t r = previous_cased ? ToLowerCp(c) : ToTitleCp(c);
    previous_cased = IsCasedCp(c);
    return r;
  });
}

std::string PyCapitalize(std::string_view s) {
  return MapChars(s, [](char32_t c, size_t i) { return i == 0 ? ToTitleCp(c) : ToLowerCp(c); });
}

std::string JinjaTitle(std::string_view s) {
  bool word_start = true;
  return MapChars(s, [&](char32_t c, size_t) {
    if (IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      word_start = true;
      return c;
    }
    const char32_t r = word_start ? ToUpperCp(c) : ToLowerCp(c);
    word_start = false;
    return r;
  });
}

int CaseOf(std::string_view s) {
  bool upper = false;
  bool lower = false;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = utf8::Next(s, &pos);
    if (IsUpperCp(c) ||
        utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LT) {
      upper = true;
    } else if (IsLowerCp(c)) {
      lower = true;
    }
  }
  return upper && !lower ? 1 : lower && !upper ? -1 : 0;
}

}  // namespace llm::chat_template_internal
