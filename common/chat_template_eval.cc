// Chat template engine, part 2: evaluating a parsed Program over JSON values.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "common/chat_template_ast.h"
#include "common/utf8.h"

namespace llm::chat_template_internal {
namespace {

using nlohmann::json;

// Thrown inside the evaluator only; converted to a Status by RenderProgram.
struct RenderError {
  std::string message;
};

[[noreturn]] void Fail(int line, const std::string& what) {
  throw RenderError{"chat template line " + std::to_string(line) + ": " + what};
}

json Undefined() {
  return json(json::value_t::discarded);
}
bool IsUndefined(const json& v) {
  return v.is_discarded();
}

bool Truthy(const json& v) {
  if (v.is_discarded() || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

std::string Str(const json& v) {
  if (v.is_discarded()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  return v.dump();
}

// Python's str.isspace() for one code point.
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Python's str.strip() / Jinja's trim: Unicode whitespace at either end.
std::string Trim(const std::string& s, bool left, bool right) {
  size_t b = 0;
  size_t e = s.size();
  if (left) {
    while (b < e) {
      size_t next = b;
      if (!IsPySpace(utf8::Next(s, &next))) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;  // back up to the first byte of the last character
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      if (!IsPySpace(utf8::Next(s, &pos)) || pos != e) break;
      e = start;
    }
  }
  return s.substr(b, e - b);
}

std::string ChangeCase(std::string s, bool upper) {
  for (char& c : s) {
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

int64_t Length(const json& v, int line) {
  if (v.is_string()) {
    int64_t n = 0;  // code points, like Python's len()
    for (unsigned char c : v.get_ref<const std::string&>()) n += (c & 0xC0) != 0x80;
    return n;
  }
  if (v.is_array() || v.is_object()) return static_cast<int64_t>(v.size());
  Fail(line, "length of a value that is not a string, list or mapping");
}

// Python-style index normalisation for items and slices.
int64_t Normalize(int64_t i, int64_t n) {
  return i < 0 ? std::max<int64_t>(0, i + n) : i;
}

// Work bounds of one render: a template (from the operator's files) or a request (its messages
// and kwargs drive the loops) must not hang the router or grow its output without end.
constexpr int64_t kMaxRenderSteps = 1'000'000;  // nodes rendered + expressions evaluated (~1 s)
constexpr size_t kMaxRenderOutputBytes = 64u << 20;  // 64 MiB of text

class Renderer {
 public:
  explicit Renderer(const json& context) { scopes_.push_back(context); }

  void RenderNodes(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) RenderNode(n);
  }
  std::string TakeOutput() { return std::move(out_); }

 private:
  void RenderNode(const Node& n);
  void RenderFor(const Node& n);
  json Eval(const Expr& e, int line);
  json EvalItem(const Expr& e, int line);
  json EvalSlice(const Expr& e, int line);
  json EvalTest(const Expr& e, int line);
  json EvalBinary(const Expr& e, int line);
  json EvalCall(const Expr& e, int line);
  json Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (it->is_object() && it->contains(name)) return (*it)[name];
    }
    return Undefined();
  }

  void Step(int line) {
    if (++steps_ > kMaxRenderSteps) {
      Fail(line, "rendering takes more than " + std::to_string(kMaxRenderSteps) +
                     " steps (loops nested over long lists?)");
    }
    if (out_.size() > kMaxRenderOutputBytes) {
      Fail(line,
           "the rendered text exceeds " + std::to_string(kMaxRenderOutputBytes >> 20) + " MiB");
    }
  }

  std::vector<json> scopes_;
  std::string out_;
  int64_t steps_ = 0;
};

void Renderer::RenderNode(const Node& n) {
  Step(n.line);
  switch (n.kind) {
    case Node::Kind::kText:
      out_ += n.text;
      break;
    case Node::Kind::kOutput:
      out_ += Str(Eval(*n.expr, n.line));
      break;
    case Node::Kind::kSet:
      scopes_.back()[n.var] = Eval(*n.expr, n.line);
      break;
    case Node::Kind::kIf:
      for (const Node::Branch& b : n.branches) {
        if (Truthy(Eval(*b.condition, n.line))) {
          RenderNodes(b.body);
          return;
        }
      }
      RenderNodes(n.else_body);
      break;
    case Node::Kind::kFor:
      RenderFor(n);
      break;
  }
}

void Renderer::RenderFor(const Node& n) {
  json list = Eval(*n.expr, n.line);
  if (IsUndefined(list) || list.is_null()) list = json::array();
  if (list.is_string()) {
    json chars = json::array();
    const std::string& str = list.get_ref<const std::string&>();
    for (size_t pos = 0; pos < str.size();) {
      const size_t from = pos;
      utf8::Next(str, &pos);
      chars.push_back(str.substr(from, pos - from));
    }
    list = std::move(chars);
  } else if (list.is_object()) {
    json keys = json::array();
    for (auto it = list.begin(); it != list.end(); ++it) keys.push_back(it.key());
    list = std::move(keys);
  } else if (!list.is_array()) {
    Fail(n.line, "for loop over a value that is not a list");
  }
  if (list.empty()) {
    RenderNodes(n.else_body);
    return;
  }
  const int64_t size = static_cast<int64_t>(list.size());
  for (int64_t i = 0; i < size; ++i) {
    json scope = json::object();
    scope[n.var] = list[static_cast<size_t>(i)];
    scope["loop"] = {{"index0", i},
                     {"index", i + 1},
                     {"first", i == 0},
                     {"last", i + 1 == size},
                     {"length", size},
                     {"revindex", size - i},
                     {"revindex0", size - i - 1}};
    scopes_.push_back(std::move(scope));
    RenderNodes(n.body);
    scopes_.pop_back();
  }
}

json Renderer::Eval(const Expr& e, int line) {
  Step(line);
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kVariable:
      return Lookup(e.name);
    case Expr::Kind::kList: {
      json list = json::array();
      for (const auto& a : e.args) list.push_back(Eval(*a, line));
      return list;
    }
    case Expr::Kind::kAttribute:
    case Expr::Kind::kItem:
      return EvalItem(e, line);
    case Expr::Kind::kSlice:
      return EvalSlice(e, line);
    case Expr::Kind::kUnary: {
      const json v = Eval(*e.args[0], line);
      if (e.op == "not") return !Truthy(v);
      if (v.is_number_integer()) {
        const int64_t x = v.get<int64_t>();
        if (x == std::numeric_limits<int64_t>::min()) Fail(line, "integer overflow in '-'");
        return -x;
      }
      if (v.is_number()) return -v.get<double>();
      Fail(line, "unary '-' on a value that is not a number");
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, line);
    case Expr::Kind::kFilter: {
      const json v = Eval(*e.args[0], line);
      if (e.name == "trim") return Trim(Str(v), true, true);
      if (e.name == "length" || e.name == "count") return Length(v, line);
      if (e.name == "lower") return ChangeCase(Str(v), false);
      if (e.name == "upper") return ChangeCase(Str(v), true);
      return Str(v);  // "string"
    }
    case Expr::Kind::kTest:
      return EvalTest(e, line);
    case Expr::Kind::kCall:
      return EvalCall(e, line);
    case Expr::Kind::kCondition:
      if (Truthy(Eval(*e.args[0], line))) return Eval(*e.args[1], line);
      return e.args[2] ? Eval(*e.args[2], line) : Undefined();
  }
  Fail(line, "unknown expression");
}

json Renderer::EvalItem(const Expr& e, int line) {
  const json base = Eval(*e.args[0], line);
  const json key = e.kind == Expr::Kind::kAttribute ? json(e.name) : Eval(*e.args[1], line);
  if (IsUndefined(base)) Fail(line, "'" + Str(key) + "' of an undefined value");
  if (base.is_object() && key.is_string()) {
    auto it = base.find(key.get<std::string>());
    return it == base.end() ? Undefined() : *it;
  }
  if ((base.is_array() || base.is_string()) && key.is_number_integer()) {
    const int64_t n = base.is_array() ? static_cast<int64_t>(base.size())
                                      : static_cast<int64_t>(base.get<std::string>().size());
    int64_t i = key.get<int64_t>();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Undefined();
    if (base.is_array()) return base[static_cast<size_t>(i)];
    return std::string(1, base.get<std::string>()[static_cast<size_t>(i)]);
  }
  return Undefined();
}

json Renderer::EvalSlice(const Expr& e, int line) {
  const json base = Eval(*e.args[0], line);
  if (!base.is_array() && !base.is_string()) Fail(line, "slice of a value that is not a list");
  const int64_t n = base.is_array() ? static_cast<int64_t>(base.size())
                                    : static_cast<int64_t>(base.get<std::string>().size());
  auto bound = [&](const std::unique_ptr<Expr>& x, int64_t fallback) {
    if (!x) return fallback;
    const json v = Eval(*x, line);
    if (!v.is_number_integer()) Fail(line, "slice bounds must be integers");
    return std::min(Normalize(v.get<int64_t>(), n), n);
  };
  const int64_t b = bound(e.args[1], 0);
  const int64_t end = std::max(b, bound(e.args[2], n));
  if (base.is_string()) return base.get<std::string>().substr(b, end - b);
  return json(base.begin() + b, base.begin() + end);
}

json Renderer::EvalTest(const Expr& e, int line) {
  const json v = Eval(*e.args[0], line);
  bool r = false;
  if (e.name == "defined") {
    r = !IsUndefined(v);
  } else if (e.name == "undefined") {
    r = IsUndefined(v);
  } else if (e.name == "none") {
    r = v.is_null();
  } else if (e.name == "string") {
    r = v.is_string();
  } else if (e.name == "number") {
    r = v.is_number();
  } else if (e.name == "mapping") {
    r = v.is_object();
  } else if (e.name == "boolean") {
    r = v.is_boolean();
  } else if (e.name == "iterable" || e.name == "sequence") {
    r = v.is_array() || v.is_string() || (e.name == "iterable" && v.is_object());
  } else {
    Fail(line, "unsupported test '" + e.name + "'");
  }
  return e.op == "is" ? r : !r;
}

bool Equal(const json& a, const json& b) {
  if (IsUndefined(a) || IsUndefined(b)) return IsUndefined(a) && IsUndefined(b);
  return a == b;
}

json Renderer::EvalBinary(const Expr& e, int line) {
  const std::string& op = e.op;
  const json a = Eval(*e.args[0], line);
  if (op == "and") return Truthy(a) ? Eval(*e.args[1], line) : a;
  if (op == "or") return Truthy(a) ? a : Eval(*e.args[1], line);
  const json b = Eval(*e.args[1], line);
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "~") return Str(a) + Str(b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string() && a.is_string()) {
      found = b.get<std::string>().find(a.get<std::string>()) != std::string::npos;
    } else if (b.is_array()) {
      found = std::any_of(b.begin(), b.end(), [&](const json& x) { return Equal(x, a); });
    } else if (b.is_object() && a.is_string()) {
      found = b.contains(a.get<std::string>());
    } else if (!IsUndefined(b) && !b.is_null()) {
      Fail(line, "'in' needs a string, list or mapping on the right");
    }
    return op == "in" ? found : !found;
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    const bool comparable = (a.is_number() && b.is_number()) || (a.is_string() && b.is_string());
    if (!comparable) Fail(line, "'" + op + "' between values of different types");
    if (op == "<") return a < b;
    if (op == ">") return b < a;
    if (op == "<=") return !(b < a);
    return !(a < b);
  }
  if (op == "+" && a.is_string() && b.is_string())
    return a.get<std::string>() + b.get<std::string>();
  if (op == "+" && a.is_array() && b.is_array()) {
    json r = a;
    for (const json& x : b) r.push_back(x);
    return r;
  }
  if (!a.is_number() || !b.is_number()) Fail(line, "'" + op + "' needs two numbers");
  if (a.is_number_integer() && b.is_number_integer() && op != "/") {
    const int64_t x = a.get<int64_t>();
    const int64_t y = b.get<int64_t>();
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      if (overflow) Fail(line, "integer overflow in '" + op + "'");
      return r;
    }
    if (y == 0) Fail(line, "modulo by zero");
    if (y == -1) return int64_t{0};  // INT64_MIN % -1 overflows
    r = x % y;                       // Python's sign: that of y
    return r != 0 && (r < 0) != (y < 0) ? r + y : r;
  }
  const double x = a.get<double>();
  const double y = b.get<double>();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (y == 0.0) Fail(line, "division by zero");
  return op == "/" ? x / y : std::fmod(x, y);
}

json Renderer::EvalCall(const Expr& e, int line) {
  std::vector<json> args;
  for (const auto& a : e.args) args.push_back(Eval(*a, line));
  if (e.op != "method") {
    if (e.name == "raise_exception") {
      Fail(line, args.empty() ? std::string("raise_exception()") : Str(args[0]));
    }
    Fail(line, "unsupported function '" + e.name + "'");
  }
  const json& self = args[0];
  if (!self.is_string()) Fail(line, "unsupported method '" + e.name + "' on a non-string");
  const std::string s = self.get<std::string>();
  const bool one_arg = args.size() == 2 && args[1].is_string();
  if (args.size() == 1) {
    if (e.name == "strip") return Trim(s, true, true);
    if (e.name == "lstrip") return Trim(s, true, false);
    if (e.name == "rstrip") return Trim(s, false, true);
    if (e.name == "lower") return ChangeCase(s, false);
    if (e.name == "upper") return ChangeCase(s, true);
  } else if (one_arg && e.name == "startswith") {
    return s.rfind(args[1].get<std::string>(), 0) == 0;
  } else if (one_arg && e.name == "endswith") {
    const std::string& t = args[1].get_ref<const std::string&>();
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  }
  Fail(line, "unsupported string method '" + e.name + "'");
}

}  // namespace

StatusOr<std::string> RenderProgram(const Program& program, const nlohmann::json& context) {
  try {
    Renderer r(context);
    r.RenderNodes(program.nodes);
    return r.TakeOutput();
  } catch (const RenderError& e) {
    return InvalidArgument(e.message);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("chat template: ") + e.what());
  }
}

}  // namespace llm::chat_template_internal
