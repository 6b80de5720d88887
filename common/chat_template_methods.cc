// Chat template engine: attribute and item access, and the Python methods of str, dict and the
// loop variable that templates call (`s.strip('\n')`, `d.items()`, `loop.cycle(a, b)`).
#include <algorithm>
#include <cstdio>
#include <set>

#include "common/chat_template.h"
#include "common/chat_template_ast.h"
#include "common/utf8.h"

namespace llm::chat_template_internal {
namespace {

// jinja2's object_type_repr, quoted: "'dict object'", "'None'".
std::string ObjectRepr(const Value& v) {
  if (v.is_none()) return "'None'";
  std::string out = "'";
  out += v.TypeName();
  out += " object'";
  return out;
}

Value NoAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(ObjectRepr(obj) + " has no attribute '" + name + "'");
}

const std::set<std::string>& StrMethods() {
  static const std::set<std::string> kNames = {
      "strip",   "lstrip",     "rstrip",  "split",   "rsplit",     "startswith", "endswith",
      "replace", "upper",      "lower",   "title",   "capitalize", "join",       "find",
      "rfind",   "count",      "isdigit", "isalpha", "isalnum",    "isspace",    "islower",
      "isupper", "splitlines", "format",  "index",   "swapcase"};
  return kNames;
}
const std::set<std::string>& DictMethods() {
  static const std::set<std::string> kNames = {"items", "keys", "values", "get"};
  return kNames;
}

// A method looked up but not called (`{% set f = s.upper %}`): calls back into CallMethod.
class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  Value Call(CallArgs args) const override {
    Budget budget;  // work is bounded by the caller's own steps
    bool found = false;
    return CallMethod(self_, name_, args, budget, &found);
  }
  std::string Name() const override { return self_.TypeName() + "." + name_; }

 private:
  Value self_;
  std::string name_;
};

Value Method(const Value& self, const std::string& name) {
  return Value::Function(std::make_shared<BoundMethod>(self, name));
}

Value LoopAttr(const LoopData& loop, const std::string& name) {
  const int64_t n = static_cast<int64_t>(loop.items->size());
  const int64_t i = loop.index0;
  if (name == "index0") return Value::Int(i);
  if (name == "index") return Value::Int(i + 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i + 1 == n);
  if (name == "length") return Value::Int(n);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "depth") return Value::Int(1);
  if (name == "depth0") return Value::Int(0);
  if (name == "previtem") {
    return i > 0 ? (*loop.items)[static_cast<size_t>(i - 1)]
                 : Value::Undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? (*loop.items)[static_cast<size_t>(i + 1)]
                     : Value::Undefined("there is no next item");
  }
  return Value::Undefined("'loop' has no attribute '" + name + "'");
}

}  // namespace

bool HasMethod(const Value& self, const std::string& name) {
  if (self.is_string()) return StrMethods().count(name) > 0;
  if (self.is_dict()) return DictMethods().count(name) > 0;
  if (self.kind() == Value::Kind::kLoop) return name == "cycle";
  return false;
}

Value GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      Fail(obj.str().empty() ? "undefined value" : obj.str());
    case Value::Kind::kDict: {
      if (HasMethod(obj, name)) return Method(obj, name);
      const Value* v = obj.dict().Find(name);
      return v ? *v : NoAttribute(obj, name);
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.dict().Find(name);
      return v ? *v : NoAttribute(obj, name);
    }
    case Value::Kind::kLoop:
      if (name == "cycle") return Method(obj, name);
      return LoopAttr(obj.loop(), name);
    default:
      if (HasMethod(obj, name)) return Method(obj, name);
      return NoAttribute(obj, name);
  }
}

Value GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      Fail(obj.str().empty() ? "undefined value" : obj.str());
    case Value::Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = obj.dict().Find(key.str())) return *v;
        if (HasMethod(obj, key.str())) return Method(obj, key.str());
      }
      break;
    case Value::Kind::kList:
      if (key.is_int()) {
        const auto& items = obj.list().items;
        const int64_t n = static_cast<int64_t>(items.size());
        const int64_t i = key.int_value() < 0 ? key.int_value() + n : key.int_value();
        if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
        return Value::Undefined(ObjectRepr(obj) + " has no element " + ToStr(key));
      }
      break;
    case Value::Kind::kString:
      if (key.is_int()) {
        const std::string& s = obj.str();
        const int64_t n = static_cast<int64_t>(utf8::CountChars(s));
        const int64_t i = key.int_value() < 0 ? key.int_value() + n : key.int_value();
        if (i >= 0 && i < n) {
          size_t pos = 0;
          for (int64_t k = 0; k < i; ++k) utf8::Next(s, &pos);
          const size_t from = pos;
          utf8::Next(s, &pos);
          return Value::Str(s.substr(from, pos - from));
        }
        return Value::Undefined(ObjectRepr(obj) + " has no element " + ToStr(key));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(ObjectRepr(obj) + " has no element " + Repr(key));
}

// ---- str methods -----------------------------------------------------------------------------

namespace {

const std::string* OptionalChars(const Value& v, const char* method) {
  if (v.is_undefined() || v.is_none()) return nullptr;
  if (!v.is_string()) Fail(std::string(method) + " arg must be None or str");
  return &v.str();
}

// str.split(sep=None, maxsplit=-1) and rsplit.
std::vector<Value> Split(const std::string& s, const Value& sep, int64_t maxsplit, bool right,
                         Budget& budget) {
  std::vector<std::string> parts;
  if (sep.is_undefined() || sep.is_none()) {
    // Runs of whitespace; no empty strings.
    std::vector<std::pair<size_t, size_t>> words;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t next = pos;
      if (IsPySpace(utf8::Next(s, &next))) {
        pos = next;
        continue;
      }
      const size_t from = pos;
      while (pos < s.size()) {
        next = pos;
        if (IsPySpace(utf8::Next(s, &next))) break;
        pos = next;
      }
      budget.Items(1);
      words.emplace_back(from, pos);
    }
    const size_t n = words.size();
    const size_t limit = maxsplit < 0 ? n : std::min<size_t>(n, static_cast<size_t>(maxsplit) + 1);
    if (limit == n) {
      for (const auto& [b, e] : words) parts.push_back(s.substr(b, e - b));
    } else if (!right) {
      for (size_t i = 0; i + 1 < limit; ++i) {
        parts.push_back(s.substr(words[i].first, words[i].second - words[i].first));
      }
      parts.push_back(s.substr(words[limit - 1].first));  // the rest keeps its trailing space
    } else {
      parts.push_back(s.substr(0, words[n - limit].second));  // keeps its leading space
      for (size_t i = n - limit + 1; i < n; ++i) {
        parts.push_back(s.substr(words[i].first, words[i].second - words[i].first));
      }
    }
  } else {
    if (!sep.is_string()) Fail("must be str or None, not " + sep.TypeName());
    const std::string& d = sep.str();
    if (d.empty()) Fail("empty separator");
    if (!right) {
      size_t pos = 0;
      int64_t splits = 0;
      while (maxsplit < 0 || splits < maxsplit) {
        const size_t at = s.find(d, pos);
        if (at == std::string::npos) break;
        budget.Items(1);
        parts.push_back(s.substr(pos, at - pos));
        pos = at + d.size();
        ++splits;
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      int64_t splits = 0;
      std::vector<std::string> rev;
      while (maxsplit < 0 || splits < maxsplit) {
        if (end < d.size()) break;
        const size_t at = s.rfind(d, end - d.size());
        if (at == std::string::npos) break;
        budget.Items(1);
        rev.push_back(s.substr(at + d.size(), end - at - d.size()));
        end = at;
        ++splits;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  std::vector<Value> out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.push_back(Value::Str(std::move(p)));
  return out;
}

bool AllChars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t pos = 0; pos < s.size();) {
    if (!pred(utf8::Next(s, &pos))) return false;
  }
  return true;
}

bool MatchesAffix(const std::string& s, const Value& affix, bool prefix, const char* method) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) Fail(std::string(method) + " first arg must be str or a tuple of str");
    const std::string& t = a.str();
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0
                  : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_list()) {
    return std::any_of(affix.list().items.begin(), affix.list().items.end(), one);
  }
  return one(affix);
}

// str.format with `{}`, `{0}` and `{name}` fields (no format specs).
std::string StrFormat(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) Fail("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      Fail("str.format: format specs and conversions are not supported");
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size()) Fail("Replacement index out of range for format");
      v = &args.positional[index];
    } else {
      for (const auto& [k, x] : args.keyword) {
        if (k == field) v = &x;
      }
      if (!v) Fail("KeyError: '" + field + "'");
    }
    out += ToStr(*v);
    i = close;
  }
  return out;
}

Value StrMethod(const std::string& s, const std::string& name, const CallArgs& args,
                Budget& budget) {
  auto str = [&](std::string r) {
    budget.Built(r.size());
    return Value::Str(std::move(r));
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = args.Bind(name, {"chars"});
    return str(Strip(s, OptionalChars(a[0], name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const auto a = args.Bind(name, {"sep", "maxsplit"});
    const int64_t maxsplit = a[1].is_int() ? a[1].int_value() : -1;
    std::vector<Value> parts = Split(s, a[0], maxsplit, name == "rsplit", budget);
    return Value::List(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = args.Bind(name, {"prefix"});
    return Value::Bool(MatchesAffix(s, a[0], name == "startswith", name.c_str()));
  }
  if (name == "replace") {
    const auto a = args.Bind(name, {"old", "new", "count"});
    if (!a[0].is_string() || !a[1].is_string()) Fail("replace() arguments must be str");
    return str(
        ReplaceAll(s, a[0].str(), a[1].str(), a[2].is_int() ? a[2].int_value() : -1, budget));
  }
  if (name == "upper") return str(Upper(s));
  if (name == "lower") return str(Lower(s));
  if (name == "title") return str(PyTitle(s));
  if (name == "capitalize") return str(PyCapitalize(s));
  if (name == "swapcase") return str(SwapCase(s));
  if (name == "join") {
    const auto a = args.Bind(name, {"iterable"});
    std::string out;
    const std::vector<Value> items = Iterate(a[0], budget);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        Fail("sequence item " + std::to_string(i) + ": expected str instance, " +
             items[i].TypeName() + " found");
      }
      if (i) out += s;
      out += items[i].str();
      budget.Built(s.size() + items[i].str().size());
    }
    return Value::Str(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const auto a = args.Bind(name, {"sub"});
    if (!a[0].is_string()) Fail("must be str, not " + a[0].TypeName());
    const std::string& sub = a[0].str();
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(utf8::CountChars(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) {
        ++n;
      }
      return Value::Int(n);
    }
    const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") Fail("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(utf8::CountChars(std::string_view(s).substr(0, at))));
  }
  if (name == "isdigit")
    return Value::Bool(AllChars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value::Bool(AllChars(s, IsAlphaCp));
  if (name == "isalnum") return Value::Bool(AllChars(s, IsAlnumCp));
  if (name == "isspace") return Value::Bool(AllChars(s, IsPySpace));
  if (name == "islower") return Value::Bool(CaseOf(s) < 0);
  if (name == "isupper") return Value::Bool(CaseOf(s) > 0);
  if (name == "splitlines") {
    std::vector<Value> lines;
    size_t from = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\n' && s[i] != '\r') continue;
      lines.push_back(Value::Str(s.substr(from, i - from)));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      from = i + 1;
    }
    if (from < s.size()) lines.push_back(Value::Str(s.substr(from)));
    budget.Items(lines.size());
    return Value::List(std::move(lines));
  }
  if (name == "format") return str(StrFormat(s, args));
  Fail("'str' object has no attribute '" + name + "'");
}

Value DictMethod(const Value& self, const std::string& name, const CallArgs& args, Budget& budget) {
  const DictData& d = self.dict();
  budget.Items(d.items.size());
  if (name == "get") {
    const auto a = args.Bind("get", {"key", "default"});
    const Value* v = a[0].is_string() ? d.Find(a[0].str()) : nullptr;
    if (v) return *v;
    return a[1].is_undefined() ? Value::None() : a[1];
  }
  args.Bind(name, {});
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    if (name == "keys") {
      out.push_back(Value::Str(k));
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::List({Value::Str(k), v}, /*tuple=*/true));
    }
  }
  return Value::List(std::move(out));
}

}  // namespace

std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count, Budget& budget) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    int64_t n = 0;
    for (const std::string& c : Chars(s)) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += c;
      budget.Built(to.size() + c.size());
    }
    if (count < 0 || n < count) out += to;
    budget.Built(to.size());
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += to;
    budget.Built(at - pos + to.size());
    pos = at + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  budget.Built(s.size() - pos);
  return out;
}

Value CallMethod(const Value& self, const std::string& name, const CallArgs& args, Budget& budget,
                 bool* found) {
  *found = HasMethod(self, name);
  if (!*found) return Value();
  if (self.is_string()) return StrMethod(self.str(), name, args, budget);
  if (self.is_dict()) return DictMethod(self, name, args, budget);
  // loop.cycle(a, b, ...)
  if (args.positional.empty()) Fail("no items for cycling given");
  const LoopData& loop = self.loop();
  return args.positional[static_cast<size_t>(loop.index0) % args.positional.size()];
}

// ---- printf-style formatting -----------------------------------------------------------------

std::string PercentFormat(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  const bool mapping = args.is_dict();
  if (args.is_list() && args.list().tuple) {
    positional = args.list().items;
  } else if (!mapping) {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) Fail("incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos || !mapping) Fail("format requires a mapping");
      arg = args.dict().Find(format.substr(i + 1, close - i - 1));
      if (!arg) Fail("KeyError: '" + format.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    const size_t spec_begin = i;
    while (i < format.size() &&
           std::string_view("-+ #0123456789.").find(format[i]) != std::string_view::npos) {
      ++i;
    }
    if (i >= format.size()) Fail("incomplete format");
    const char conv = format[i];
    const std::string spec = format.substr(spec_begin, i - spec_begin);
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) Fail("not enough arguments for format string");
      arg = &positional[next++];
    }
    char buf[512];
    if (spec.size() > 16) Fail("format spec too long");
    if (conv == 's' || conv == 'r') {
      const std::string s = conv == 's' ? ToStr(*arg) : Repr(*arg);
      const bool left = !spec.empty() && spec[0] == '-';
      const size_t width =
          static_cast<size_t>(std::max(0, std::atoi(spec.c_str() + (left ? 1 : 0))));
      const size_t len = utf8::CountChars(s);
      const std::string pad = width > len ? std::string(width - len, ' ') : "";
      out += left ? s + pad : pad + s;
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!arg->is_number()) Fail("%d format: a number is required, not " + arg->TypeName());
      const long long v =
          arg->is_int() ? arg->int_value() : static_cast<long long>(arg->float_value());
      std::string f = "%";
      f += spec;
      f += "ll";
      f += conv == 'i' ? 'd' : conv;
      std::snprintf(buf, sizeof(buf), f.c_str(), v);
      out += buf;
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' ||
               conv == 'G') {
      if (!arg->is_number()) Fail("must be real number, not " + arg->TypeName());
      std::string f = "%";
      f += spec;
      f += conv;
      std::snprintf(buf, sizeof(buf), f.c_str(), arg->float_value());
      out += buf;
    } else {
      Fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (!mapping && next < positional.size()) {
    Fail("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace llm::chat_template_internal
