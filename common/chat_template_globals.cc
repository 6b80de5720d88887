// Chat template engine: the global functions a template can call: jinja2's range() (with the
// sandbox's MAX_RANGE), namespace() and dict(), and transformers' raise_exception() and
// strftime_now().
#include <cmath>
#include <ctime>
#include <functional>

#include "common/chat_template_ast.h"

namespace llm::chat_template_internal {
namespace {

class Builtin : public Callable {
 public:
  using Fn = std::function<Value(const CallArgs&)>;
  Builtin(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  Value Call(CallArgs args) const override { return fn_(args); }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

std::string StrFTimeNow(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  for (size_t size = 256; size <= 65536; size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
    if (n > 0 || format.empty()) return buf.substr(0, n);
  }
  return "";
}

}  // namespace

void AddGlobals(DictData* globals, Budget* budget,
                std::vector<std::weak_ptr<DictData>>* namespaces) {
  auto add = [globals](const std::string& name, Builtin::Fn fn) {
    globals->Set(name, Value::Function(std::make_shared<Builtin>(name, std::move(fn))));
  };
  add("raise_exception", [](const CallArgs& a) -> Value {
    Fail(a.positional.empty() ? std::string("raise_exception()") : ToStr(a.positional[0]));
  });
  add("strftime_now", [](const CallArgs& a) {
    const auto args = a.Bind("strftime_now", {"format"});
    if (!args[0].is_string()) Fail("strftime_now() needs a format string");
    return Value::Str(StrFTimeNow(args[0].str()));
  });
  add("range", [budget](const CallArgs& a) {
    if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) {
      Fail("range() takes 1 to 3 positional arguments");
    }
    for (const Value& v : a.positional) {
      if (!v.is_int()) Fail(Quote(v.TypeName()) + " object cannot be interpreted as an integer");
    }
    const size_t n = a.positional.size();
    const int64_t start = n == 1 ? 0 : a.positional[0].int_value();
    const int64_t stop = n == 1 ? a.positional[0].int_value() : a.positional[1].int_value();
    const int64_t step = n == 3 ? a.positional[2].int_value() : 1;
    if (step == 0) Fail("range() arg 3 must not be zero");
    // jinja2's sandbox refuses ranges longer than MAX_RANGE.
    constexpr int64_t kMaxRange = 100000;
    const long double count = step > 0
                                  ? std::ceil((static_cast<long double>(stop) - start) / step)
                                  : std::ceil((static_cast<long double>(start) - stop) / -step);
    if (count > kMaxRange) {
      Fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    const int64_t length = static_cast<int64_t>(std::max<long double>(count, 0));
    budget->Items(static_cast<size_t>(length));
    std::vector<Value> items;
    items.reserve(static_cast<size_t>(length));
    for (int64_t i = 0; i < length; ++i) items.push_back(Value::Int(start + i * step));
    return Value::List(std::move(items));
  });
  auto kwargs_dict = [](const CallArgs& a, const char* fn) {
    DictData d;
    for (const Value& p : a.positional) {
      if (!p.is_dict()) Fail(std::string(fn) + "() takes a dict or keyword arguments");
      for (const auto& [k, v] : p.dict().items) d.Set(k, v);
    }
    for (const auto& [k, v] : a.keyword) d.Set(k, v);
    return d;
  };
  add("namespace", [namespaces, kwargs_dict](const CallArgs& a) {
    auto ns = std::make_shared<DictData>(kwargs_dict(a, "namespace"));
    namespaces->push_back(ns);
    return Value::Namespace(std::move(ns));
  });
  add("dict", [kwargs_dict](const CallArgs& a) { return Value::Dict(kwargs_dict(a, "dict")); });
}

}  // namespace llm::chat_template_internal
