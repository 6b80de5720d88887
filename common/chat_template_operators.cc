// Chat template engine: Python's operators on values (arithmetic with int64 overflow checks,
// string and list repetition and concatenation, `in`, comparisons, slices).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/chat_template.h"
#include "common/chat_template_ast.h"
#include "common/utf8.h"

namespace llm::chat_template_internal {
namespace {

Value Repeat(const Value& seq, int64_t n, Budget& budget) {
  n = std::max<int64_t>(n, 0);
  if (seq.is_string()) {
    const size_t size = seq.str().size();
    if (size && static_cast<uint64_t>(n) > kMaxChatTemplateOutputBytes / size + 1) {
      budget.Built(kMaxChatTemplateOutputBytes + 1);
    }
    budget.Built(size * static_cast<size_t>(n));
    std::string out;
    out.reserve(size * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::Str(std::move(out));
  }
  const auto& items = seq.list().items;
  if (!items.empty() && n > kMaxChatTemplateSteps) budget.Step(n);
  budget.Items(items.size() * static_cast<size_t>(n));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out), seq.list().tuple);
}

}  // namespace

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        Fail("'in <string>' requires string as left operand, not " + item.TypeName());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& x : container.list().items) {
        if (Equal(x, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.dict().Find(item.str()) != nullptr;
    default:
      Fail("argument of type '" + container.TypeName() + "' is not iterable");
  }
}

bool Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  if (op == "<=") return Less(a, b) || Equal(a, b);
  if (op == ">=") return Less(b, a) || Equal(a, b);
  if (op == "in") return Contains(b, a);
  return !Contains(b, a);  // not in
}

Value Arithmetic(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (a.is_undefined() || b.is_undefined()) Fail(a.is_undefined() ? a.str() : b.str());
  if (op == "+" && a.is_string() && b.is_string()) {
    budget.Built(a.str().size() + b.str().size());
    return Value::Str(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.list().tuple == b.list().tuple) {
    // A step per item; as memory, the growth past the larger operand (`acc + [x]` in a loop
    // replaces `acc`, `l + l` doubles).
    const size_t x = a.list().items.size();
    const size_t y = b.list().items.size();
    budget.Step(static_cast<int64_t>(std::max(x, y)));
    budget.Items(std::min(x, y));
    std::vector<Value> items = a.list().items;
    items.insert(items.end(), b.list().items.begin(), b.list().items.end());
    return Value::List(std::move(items), a.list().tuple);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_int()) {
    return Repeat(a, b.int_value(), budget);
  }
  if (op == "*" && (b.is_string() || b.is_list()) && a.is_int()) {
    return Repeat(b, a.int_value(), budget);
  }
  if (op == "%" && a.is_string()) {
    std::string s = PercentFormat(a.str(), b);
    budget.Built(s.size());
    return Value::Str(std::move(s));
  }
  if (!a.is_number() || !b.is_number()) {
    Fail("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() +
         "'");
  }
  if (a.is_int() && b.is_int() && op != "/") {
    const int64_t x = a.int_value();
    const int64_t y = b.int_value();
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      if (overflow) Fail("integer overflow in '" + op + "'");
      return Value::Int(r);
    }
    if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      for (int64_t i = 0; i < y && result != 0; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) Fail("integer overflow in '**'");
        if (result == 1 && x == 1) break;
        if (x == -1) {
          result = (y % 2) ? -1 : 1;
          break;
        }
      }
      return Value::Int(result);
    }
    if (y == 0) Fail(op == "%" ? "integer modulo by zero" : "integer division by zero");
    if (y == -1) {
      if (op == "%") return Value::Int(0);
      if (x == std::numeric_limits<int64_t>::min()) Fail("integer overflow in '//'");
      return Value::Int(-x);
    }
    const int64_t q = x / y;
    const int64_t m = x % y;
    const bool adjust = m != 0 && ((m < 0) != (y < 0));  // Python floors
    if (op == "//") return Value::Int(adjust ? q - 1 : q);
    return Value::Int(adjust ? m + y : m);
  }
  const double x = a.float_value();
  const double y = b.float_value();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0.0) Fail("float division by zero");
  if (op == "/") return Value::Float(x / y);
  if (op == "//") return Value::Float(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::Float(m);
}

Value Slice(const Value& base, std::optional<int64_t> start_arg, std::optional<int64_t> stop_arg,
            std::optional<int64_t> step_arg, Budget& budget) {
  if (base.is_undefined()) Fail(base.str());
  if (!base.is_list() && !base.is_string()) {
    Fail(Quote(base.TypeName()) + " object is not subscriptable");
  }
  const int64_t step = step_arg.value_or(1);
  if (step == 0) Fail("slice step cannot be zero");
  // Strings by code point: the byte offset where each one starts (and the end).
  std::vector<uint32_t> offsets;
  if (base.is_string()) {
    const std::string& str = base.str();
    budget.Step(static_cast<int64_t>(str.size() / 16));
    for (size_t pos = 0; pos < str.size();) {
      offsets.push_back(static_cast<uint32_t>(pos));
      utf8::Next(str, &pos);
    }
    offsets.push_back(static_cast<uint32_t>(str.size()));
  }
  const int64_t n = base.is_string() ? static_cast<int64_t>(offsets.size()) - 1
                                     : static_cast<int64_t>(base.list().items.size());
  auto adjust = [&](std::optional<int64_t> x, int64_t fallback) {
    if (!x) return fallback;
    int64_t i = *x;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = adjust(start_arg, step < 0 ? n - 1 : 0);
  const int64_t stop = adjust(stop_arg, step < 0 ? -1 : n);
  if (base.is_string() && step == 1) {
    if (stop <= start) return Value::Str("");
    return Value::Str(base.str().substr(
        offsets[static_cast<size_t>(start)],
        offsets[static_cast<size_t>(stop)] - offsets[static_cast<size_t>(start)]));
  }
  std::string s;
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (base.is_string()) {
      const size_t from = offsets[static_cast<size_t>(i)];
      s.append(base.str(), from, offsets[static_cast<size_t>(i) + 1] - from);
    } else {
      items.push_back(base.list().items[static_cast<size_t>(i)]);
    }
  }
  budget.Items(items.size());
  if (base.is_string()) return Value::Str(std::move(s));
  return Value::List(std::move(items), base.list().tuple);
}

}  // namespace llm::chat_template_internal
