// Chat template engine: values (see chat_template_value.h).
#include "common/chat_template_value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/chat_template.h"
#include "common/utf8.h"

namespace llm::chat_template_internal {

void Fail(std::string message) {
  throw RenderError{std::move(message), 0};
}

std::string Quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
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
Value Value::BigInt(double approx, std::string digits) {
  Value v = Float(approx);
  v.p_ = std::make_shared<const std::string>(std::move(digits));
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
      return big_int_digits() ? "int" : "float";
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
      return Value::BigInt(static_cast<double>(u), std::to_string(u));
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

std::vector<Value> Iterate(const Value& v, Budget& budget) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:  // a copy of existing items, dropped after use
      budget.Step(static_cast<int64_t>(v.list().items.size()));
      return v.list().items;
    case Value::Kind::kDict: {
      budget.Items(v.dict().items.size());
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& kv : v.dict().items) keys.push_back(Value::Str(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      budget.Items(utf8::CountChars(v.str()));
      std::vector<Value> chars;
      for (std::string& c : Chars(v.str())) chars.push_back(Value::Str(std::move(c)));
      return chars;
    }
    default:
      Fail(Quote(v.TypeName()) + " object is not iterable");
  }
}

// ---- budget ----------------------------------------------------------------------------------

void Budget::Step(int64_t n) {
  if (n < 0 || n > kMaxChatTemplateSteps - steps_) {
    steps_ = kMaxChatTemplateSteps;
    Fail("rendering takes more than " + std::to_string(kMaxChatTemplateSteps) +
         " steps (kMaxChatTemplateSteps; loops nested over long lists?)");
  }
  steps_ += n;
}

void Budget::Iteration() {
  if (++iterations_ > kMaxChatTemplateLoopIterations) {
    Fail("more than " + std::to_string(kMaxChatTemplateLoopIterations) +
         " loop iterations and macro calls (kMaxChatTemplateLoopIterations)");
  }
  Step();
}

void Budget::CheckSize(size_t bytes) {
  if (bytes > kMaxChatTemplateOutputBytes) {
    Fail("a string longer than " + std::to_string(kMaxChatTemplateOutputBytes >> 20) +
         " MiB (kMaxChatTemplateOutputBytes)");
  }
}

void Budget::Built(size_t bytes) {
  CheckSize(bytes);
  built_bytes_ += bytes;
  if (built_bytes_ > kMaxChatTemplateBuiltBytes) {
    Fail("the template builds more than " + std::to_string(kMaxChatTemplateBuiltBytes >> 20) +
         " MiB of strings and lists (kMaxChatTemplateBuiltBytes)");
  }
}

void Budget::Items(size_t n) {
  Step(static_cast<int64_t>(std::min<size_t>(n, kMaxChatTemplateSteps + 1)));
  built_bytes_ += n * kItemBytes;  // n <= kMaxChatTemplateSteps here: no overflow
  if (built_bytes_ > kMaxChatTemplateBuiltBytes) {
    Fail("the template builds more than " + std::to_string(kMaxChatTemplateBuiltBytes >> 20) +
         " MiB of strings and lists (kMaxChatTemplateBuiltBytes)");
  }
}

}  // namespace llm::chat_template_internal
