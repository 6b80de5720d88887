// Chat template engine: jinja2's filters (with transformers' tojson) and tests.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/chat_template.h"
#include "common/chat_template_ast.h"
#include "common/utf8.h"

namespace llm::chat_template_internal {
namespace {

const std::set<std::string>& FilterNames() {
  static const std::set<std::string> kNames = {
      "abs",    "attr",   "capitalize", "count",      "d",        "default", "dictsort",
      "e",      "escape", "first",      "float",      "format",   "indent",  "int",
      "items",  "join",   "last",       "length",     "list",     "lower",   "map",
      "max",    "min",    "reject",     "rejectattr", "replace",  "reverse", "round",
      "safe",   "select", "selectattr", "sort",       "string",   "sum",     "title",
      "tojson", "trim",   "unique",     "upper",      "wordcount"};
  return kNames;
}

const std::set<std::string>& TestNames() {
  static const std::set<std::string> kNames = {
      "boolean", "callable", "defined",  "divisibleby", "eq",       "equalto", "escaped",
      "even",    "false",    "filter",   "float",       "ge",       "gt",      "greaterthan",
      "in",      "integer",  "iterable", "le",          "lessthan", "lower",   "lt",
      "mapping", "ne",       "none",     "number",      "odd",      "sameas",  "sequence",
      "string",  "test",     "true",     "undefined",   "upper",    "==",      "!=",
      ">",       ">=",       "<",        "<="};
  return kNames;
}

bool IsTrue(const Value& v, bool fallback) {
  return v.is_undefined() ? fallback : Truthy(v);
}

// jinja2's make_attrgetter: "a.b.0" looks up items (then attributes) one part at a time.
Value AttrPath(const Value& v, const Value& path) {
  if (path.is_int()) return GetItem(v, path);
  if (!path.is_string()) Fail("attribute must be a string or an integer");
  Value cur = v;
  size_t from = 0;
  const std::string& p = path.str();
  while (true) {
    const size_t dot = p.find('.', from);
    const std::string part =
        p.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = GetItem(cur, digits ? Value::Int(std::atoll(part.c_str())) : Value::Str(part));
    if (dot == std::string::npos) return cur;
    from = dot + 1;
  }
}

// The sort key of jinja2's case-insensitive filters: strings lower-cased.
Value SortKey(const Value& v, bool case_sensitive, Budget& budget) {
  if (!case_sensitive && v.is_string()) {
    budget.Built(v.str().size());
    return Value::Str(Lower(v.str()));
  }
  return v;
}

CallArgs Rest(const CallArgs& args, size_t from) {
  CallArgs rest;
  for (size_t i = from; i < args.positional.size(); ++i)
    rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Indent(const std::string& s, const Value& width, bool first, bool blank,
                   Budget& budget) {
  if (width.is_int()) budget.Built(static_cast<size_t>(std::max<int64_t>(0, width.int_value())));
  const std::string pad =
      width.is_string()
          ? width.str()
          : std::string(
                width.is_int() ? static_cast<size_t>(std::max<int64_t>(0, width.int_value())) : 4,
                ' ');
  std::vector<std::string> lines;
  const std::string text = s + "\n";
  size_t from = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') continue;
    lines.push_back(text.substr(from, i - from));
    from = i + 1;
  }
  std::string out = lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += "\n";
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
    Budget::CheckSize(out.size());
  }
  return first ? pad + out : out;
}

int64_t WordCount(const std::string& s) {
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    const bool word = std::isalnum(c) || c == '_' || c >= 0x80;
    if (word && !in_word) ++n;
    in_word = word;
  }
  return n;
}

Value ToInt(const Value& v, const Value& fallback, const Value& base_arg) {
  const Value dflt = fallback.is_undefined() ? Value::Int(0) : fallback;
  if (v.is_int()) return Value::Int(v.int_value());
  if (v.kind() == Value::Kind::kFloat) {
    const double d = v.float_value();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return dflt;
    return Value::Int(static_cast<int64_t>(d));
  }
  if (!v.is_string()) return dflt;
  std::string s = Strip(v.str(), nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return dflt;
  const int base = base_arg.is_int() ? static_cast<int>(base_arg.int_value()) : 10;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, base);
  if (errno == 0 && *end == '\0') return Value::Int(x);
  const double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
    return Value::Int(static_cast<int64_t>(d));
  }
  return dflt;
}

Value ToFloat(const Value& v, const Value& fallback) {
  const Value dflt = fallback.is_undefined() ? Value::Float(0.0) : fallback;
  if (v.is_number()) return Value::Float(v.float_value());
  if (!v.is_string()) return dflt;
  const std::string s = Strip(v.str(), nullptr, true, true);
  if (s.empty()) return dflt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  return *end == '\0' ? Value::Float(d) : dflt;
}

Value Round(const Value& v, const Value& precision_arg, const Value& method_arg) {
  if (!v.is_number()) Fail("round() needs a number, not " + v.TypeName());
  const int64_t precision = precision_arg.is_int() ? precision_arg.int_value() : 0;
  const std::string method = method_arg.is_string() ? method_arg.str() : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    Fail("method must be common, ceil or floor");
  }
  if (method == "common" && v.is_int()) return Value::Int(v.int_value());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.float_value() * scale;
  const double r = method == "ceil"    ? std::ceil(x)
                   : method == "floor" ? std::floor(x)
                                       : std::nearbyint(x);
  return Value::Float(r / scale);
}

// `items` in the order of `keys` (stable; reversed comparisons when `reverse`, like Python).
Value SortedByKey(const std::vector<Value>& items, const std::vector<Value>& keys, bool reverse,
                  Budget& budget) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  budget.Step(static_cast<int64_t>(items.size()) * 20);  // ~n log n comparisons
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? Less(keys[y], keys[x]) : Less(keys[x], keys[y]);
  });
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(items[i]);
  return Value::List(std::move(out));
}

Value SortFilter(const Value& v, const CallArgs& args, bool unique, Budget& budget) {
  const auto a = unique ? args.Bind("unique", {"case_sensitive", "attribute"})
                        : args.Bind("sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = unique ? false : IsTrue(a[0], false);
  const bool case_sensitive = IsTrue(a[unique ? 0 : 1], false);
  const Value& attribute = a[unique ? 1 : 2];
  std::vector<Value> items = Iterate(v, budget);
  auto key = [&](const Value& x) {
    return SortKey(attribute.is_undefined() ? x : AttrPath(x, attribute), case_sensitive, budget);
  };
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& x : items) keys.push_back(key(x));
  if (unique) {
    std::vector<Value> out;
    std::vector<Value> seen;
    for (size_t i = 0; i < items.size(); ++i) {
      budget.Step(static_cast<int64_t>(seen.size()));
      if (std::none_of(seen.begin(), seen.end(),
                       [&](const Value& k) { return Equal(k, keys[i]); })) {
        seen.push_back(keys[i]);
        out.push_back(items[i]);
      }
    }
    return Value::List(std::move(out));
  }
  return SortedByKey(items, keys, reverse, budget);
}

Value MinMax(const Value& v, const CallArgs& args, bool max, Budget& budget) {
  const auto a = args.Bind(max ? "max" : "min", {"case_sensitive", "attribute"});
  const std::vector<Value> items = Iterate(v, budget);
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = IsTrue(a[0], false);
  auto key = [&](const Value& x) {
    return SortKey(a[1].is_undefined() ? x : AttrPath(x, a[1]), case_sensitive, budget);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (max ? Less(best_key, k) : Less(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value ToJsonFilter(const Value& v, const CallArgs& args, Budget& budget) {
  // transformers: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
  // sort_keys=sort_keys) with ensure_ascii=False by default.
  const auto a = args.Bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = IsTrue(a[0], false);
  if (a[1].is_int()) {
    o.pretty = true;
    o.indent =
        std::string(static_cast<size_t>(std::clamp<int64_t>(a[1].int_value(), 0, 1024)), ' ');
  } else if (a[1].is_string()) {
    o.pretty = true;
    o.indent = a[1].str();
  } else if (!a[1].is_undefined() && !a[1].is_none()) {
    Fail("tojson: indent must be an integer or a string");
  }
  if (o.pretty) o.item_separator = ",";
  if (a[2].is_list() && a[2].list().items.size() == 2 && a[2].list().items[0].is_string() &&
      a[2].list().items[1].is_string()) {
    o.item_separator = a[2].list().items[0].str();
    o.key_separator = a[2].list().items[1].str();
  } else if (!a[2].is_undefined() && !a[2].is_none()) {
    Fail("tojson: separators must be a pair of strings");
  }
  o.sort_keys = IsTrue(a[3], false);
  std::string s = ToJson(v, o);
  budget.Built(s.size());
  return Value::Str(std::move(s));
}

Value Join(const Value& v, const CallArgs& args, Budget& budget) {
  const auto a = args.Bind("join", {"d", "attribute"});
  const std::string sep = a[0].is_undefined() ? "" : ToStr(a[0]);
  std::string out;
  const std::vector<Value> items = Iterate(v, budget);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string s = ToStr(a[1].is_undefined() ? items[i] : AttrPath(items[i], a[1]));
    if (i) out += sep;
    out += s;
    budget.Built(sep.size() + s.size());
  }
  return Value::Str(std::move(out));
}

Value Map(const Value& v, const CallArgs& args, Budget& budget) {
  const std::vector<Value> items = Iterate(v, budget);
  std::vector<Value> out;
  out.reserve(items.size());
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [k, x] : args.keyword) {
    if (k == "attribute") attribute = &x;
    if (k == "default") fallback = &x;
  }
  if (attribute) {
    for (const Value& x : items) {
      Value r = AttrPath(x, *attribute);
      out.push_back(r.is_undefined() && fallback ? *fallback : r);
    }
  } else {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      Fail("map() needs a filter name or attribute=");
    }
    const std::string& name = args.positional[0].str();
    if (!IsKnownFilter(name)) Fail("No filter named '" + name + "'");
    const CallArgs rest = Rest(args, 1);
    for (const Value& x : items) out.push_back(ApplyFilter(name, x, rest, budget));
  }
  return Value::List(std::move(out));
}

Value Select(const Value& v, const CallArgs& args, bool attr, bool keep, Budget& budget) {
  const std::vector<Value> items = Iterate(v, budget);
  size_t at = 0;
  Value attribute;
  if (attr) {
    if (args.positional.empty()) Fail("selectattr/rejectattr need an attribute");
    attribute = args.positional[at++];
  }
  std::string test;
  if (at < args.positional.size()) {
    if (!args.positional[at].is_string()) Fail("the test name must be a string");
    test = args.positional[at++].str();
    if (!IsKnownTest(test)) Fail("No test named '" + test + "'");
  }
  const CallArgs rest = Rest(args, at);
  std::vector<Value> out;
  for (const Value& x : items) {
    budget.Step();
    const Value subject = attr ? AttrPath(x, attribute) : x;
    const bool pass = test.empty() ? Truthy(subject) : ApplyTest(test, subject, rest, budget);
    if (pass == keep) out.push_back(x);
  }
  return Value::List(std::move(out));
}

Value Items(const Value& v) {
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict()) Fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().items) out.push_back(Value::List({Value::Str(k), x}, true));
  return Value::List(std::move(out));
}

Value DictSort(const Value& v, const CallArgs& args, Budget& budget) {
  const auto a = args.Bind("dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) Fail("dictsort needs a mapping");
  const bool by_value = a[1].is_string() && a[1].str() == "value";
  const bool case_sensitive = IsTrue(a[0], false);
  const bool reverse = IsTrue(a[2], false);
  const std::vector<Value> pairs = Items(v).list().items;
  std::vector<Value> keys;
  keys.reserve(pairs.size());
  for (const Value& p : pairs)
    keys.push_back(SortKey(p.list().items[by_value ? 1 : 0], case_sensitive, budget));
  return SortedByKey(pairs, keys, reverse, budget);
}

Value Reverse(const Value& v, Budget& budget) {
  if (v.is_string()) {
    budget.Items(v.str().size());
    std::vector<std::string> chars = Chars(v.str());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::Str(std::move(out));
  }
  std::vector<Value> items = Iterate(v, budget);
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Value Sum(const Value& v, const CallArgs& args, Budget& budget) {
  const auto a = args.Bind("sum", {"attribute", "start"});
  Value total = a[1].is_undefined() ? Value::Int(0) : a[1];
  for (const Value& x : Iterate(v, budget)) {
    const Value item = a[0].is_undefined() ? x : AttrPath(x, a[0]);
    if (!total.is_number() || !item.is_number()) {
      Fail("unsupported operand type(s) for +: '" + total.TypeName() + "' and '" + item.TypeName() +
           "'");
    }
    if (total.is_int() && item.is_int()) {
      int64_t r = 0;
      if (__builtin_add_overflow(total.int_value(), item.int_value(), &r))
        Fail("integer overflow in sum");
      total = Value::Int(r);
    } else {
      total = Value::Float(total.float_value() + item.float_value());
    }
    budget.Step();
  }
  return total;
}

}  // namespace

bool IsKnownFilter(const std::string& name) {
  return FilterNames().count(name) > 0;
}
bool IsKnownTest(const std::string& name) {
  return TestNames().count(name) > 0;
}

Value ApplyFilter(const std::string& name, const Value& v, const CallArgs& args, Budget& budget) {
  budget.Step();
  auto str = [&](std::string s) {
    budget.Built(s.size());
    return Value::Str(std::move(s));
  };
  if (name == "trim") {
    const auto a = args.Bind("trim", {"chars"});
    const std::string* chars = a[0].is_string() ? &a[0].str() : nullptr;
    return str(Strip(ToStr(v), chars, true, true));
  }
  if (name == "tojson") return ToJsonFilter(v, args, budget);
  if (name == "length" || name == "count") return Value::Int(Length(v));
  if (name == "default" || name == "d") {
    const auto a = args.Bind("default", {"default_value", "boolean"});
    if (v.is_undefined() || (IsTrue(a[1], false) && !Truthy(v))) {
      return a[0].is_undefined() ? Value::Str("") : a[0];
    }
    return v;
  }
  if (name == "join") return Join(v, args, budget);
  if (name == "list") {
    std::vector<Value> items = Iterate(v, budget);
    budget.Items(items.size());
    return Value::List(std::move(items));
  }
  if (name == "map") return Map(v, args, budget);
  if (name == "select" || name == "reject") return Select(v, args, false, name == "select", budget);
  if (name == "selectattr" || name == "rejectattr") {
    return Select(v, args, true, name == "selectattr", budget);
  }
  if (name == "first") {
    if (v.is_list()) {
      return v.list().items.empty() ? Value::Undefined("No first item, sequence was empty.")
                                    : v.list().items.front();
    }
    std::vector<Value> items = Iterate(v, budget);
    return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    if (v.is_list()) {
      return v.list().items.empty() ? Value::Undefined("No last item, sequence was empty.")
                                    : v.list().items.back();
    }
    std::vector<Value> items = Iterate(v, budget);
    return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "upper") return str(Upper(ToStr(v)));
  if (name == "lower") return str(Lower(ToStr(v)));
  if (name == "capitalize") return str(PyCapitalize(ToStr(v)));
  if (name == "title") return str(JinjaTitle(ToStr(v)));
  if (name == "replace") {
    const auto a = args.Bind("replace", {"old", "new", "count"});
    return str(ReplaceAll(ToStr(v), ToStr(a[0]), ToStr(a[1]), a[2].is_int() ? a[2].int_value() : -1,
                          budget));
  }
  if (name == "int") {
    const auto a = args.Bind("int", {"default", "base"});
    return ToInt(v, a[0], a[1]);
  }
  if (name == "float") return ToFloat(v, args.Bind("float", {"default"})[0]);
  if (name == "string" || name == "safe") return v.is_string() ? v : str(ToStr(v));
  if (name == "items") return Items(v);
  if (name == "dictsort") return DictSort(v, args, budget);
  if (name == "unique" || name == "sort") {
    budget.Step(Length(v));
    return SortFilter(v, args, name == "unique", budget);
  }
  if (name == "min" || name == "max") return MinMax(v, args, name == "max", budget);
  if (name == "sum") return Sum(v, args, budget);
  if (name == "abs") {
    if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.float_value()));
    if (!v.is_int()) Fail("bad operand type for abs(): '" + v.TypeName() + "'");
    if (v.int_value() == INT64_MIN) Fail("integer overflow in abs");
    return Value::Int(std::llabs(v.int_value()));
  }
  if (name == "round") {
    const auto a = args.Bind("round", {"precision", "method"});
    return Round(v, a[0], a[1]);
  }
  if (name == "wordcount") return Value::Int(WordCount(ToStr(v)));
  if (name == "reverse") return Reverse(v, budget);
  if (name == "attr") {  // getattr only: the keys of a dict are not its attributes
    const std::string attr = ToStr(args.Bind("attr", {"name"})[0]);
    if (v.is_dict() && !HasMethod(v, attr)) {
      return Value::Undefined("'dict object' has no attribute '" + attr + "'");
    }
    return GetAttr(v, attr);
  }
  if (name == "indent") {
    const auto a = args.Bind("indent", {"width", "first", "blank"});
    return str(Indent(ToStr(v), a[0], IsTrue(a[1], false), IsTrue(a[2], false), budget));
  }
  if (name == "escape" || name == "e") return str(HtmlEscape(ToStr(v)));
  if (name == "format") {
    if (!args.keyword.empty()) {
      DictData d;
      for (const auto& [k, x] : args.keyword) d.Set(k, x);
      return str(PercentFormat(ToStr(v), Value::Dict(std::move(d))));
    }
    return str(PercentFormat(ToStr(v), Value::List(args.positional, /*tuple=*/true)));
  }
  Fail("No filter named '" + name + "'");
}

bool ApplyTest(const std::string& name, const Value& v, const CallArgs& args, Budget& budget) {
  auto arg = [&]() -> Value {
    const auto a = args.Bind(name, {"other"});
    return a[0];
  };
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.bool_value();
  if (name == "false") return v.kind() == K::kBool && !v.bool_value();
  if (name == "integer") return v.kind() == K::kInt || v.big_int_digits();
  if (name == "float") return v.kind() == K::kFloat && !v.big_int_digits();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // jinja2's Undefined iterates (as empty) and has a length.
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable")
    return v.kind() == K::kCallable || v.is_undefined();  // Undefined has __call__
  if (name == "escaped") return false;
  if (name == "filter") return v.is_string() && IsKnownFilter(v.str());
  if (name == "test") return v.is_string() && IsKnownTest(v.str());
  if (name == "lower") return CaseOf(ToStr(v)) < 0;
  if (name == "upper") return CaseOf(ToStr(v)) > 0;
  if (name == "odd" || name == "even") {
    if (!v.is_int()) Fail(Quote(name) + " test needs an integer, not " + v.TypeName());
    return (v.int_value() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value n = arg();
    if (!v.is_int() || !n.is_int()) Fail("divisibleby needs integers");
    if (n.int_value() == 0) Fail("integer modulo by zero");
    return n.int_value() == -1 || v.int_value() % n.int_value() == 0;
  }
  if (name == "sameas") {
    const Value o = arg();
    if (v.kind() != o.kind()) return false;
    if (v.is_list() || v.is_dict() || v.kind() == K::kNamespace || v.kind() == K::kCallable ||
        v.kind() == K::kLoop) {
      return v.identity() == o.identity();
    }
    return Equal(v, o);
  }
  if (name == "in") {
    const Value seq = arg();
    if (seq.is_string()) return v.is_string() && seq.str().find(v.str()) != std::string::npos;
    if (seq.is_dict()) return v.is_string() && seq.dict().Find(v.str()) != nullptr;
    for (const Value& x : Iterate(seq, budget)) {
      if (Equal(x, v)) return true;
    }
    return false;
  }
  const Value o = arg();
  if (name == "eq" || name == "equalto" || name == "==") return Equal(v, o);
  if (name == "ne" || name == "!=") return !Equal(v, o);
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, o);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(o, v);
  if (name == "le" || name == "<=") return Less(v, o) || Equal(v, o);
  if (name == "ge" || name == ">=") return Less(o, v) || Equal(v, o);
  Fail("No test named '" + name + "'");
}

}  // namespace llm::chat_template_internal
