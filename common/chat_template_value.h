// Internal to the chat template engine (common/chat_template*.cc): the values a template computes
// with (Python's types as Jinja2 sees them), their conversions from JSON, str(), repr(), tojson,
// truthiness, equality and ordering, and the work budget of one render.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace llm::chat_template_internal {

// Thrown while rendering; converted to a Status (kInvalidArgument) by RenderProgram. `line` is
// filled in by the statement being rendered when the thrower does not know it.
struct RenderError {
  std::string message;
  int line = 0;
};
[[noreturn]] void Fail(std::string message);
// "'" + s + "'" for messages (appended piecewise: GCC 12's -Wrestrict misfires on
// "'" + std::string&&).
std::string Quote(std::string_view s);

// Lists, tuples and dicts nest at most this deep: printing, tojson, comparison and destruction
// recurse over them.
inline constexpr int kMaxValueDepth = 256;

struct ListData;
struct DictData;
struct LoopData;
class Callable;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,  // jinja2.Undefined: prints "", falsy, iterates as empty
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,       // list or tuple (ListData::tuple)
    kDict,       // immutable, insertion-ordered, string keys
    kNamespace,  // namespace(): the one mutable value (`{% set ns.x = ... %}`)
    kLoop,       // the `loop` variable of a for loop
    kCallable,   // macro, caller, global function, bound method
  };

  Value() = default;
  // `hint` is the message an operation that needs a value reports ("'x' is undefined").
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  // An integer beyond int64 from JSON: computes as a float, prints with its exact digits.
  static Value BigInt(double approx, std::string digits);
  static Value Str(std::string s);
  static Value List(std::vector<Value> items, bool tuple = false);
  static Value Dict(DictData d);
  static Value Namespace(std::shared_ptr<DictData> d);
  static Value Loop(std::shared_ptr<const LoopData> loop);
  static Value Function(std::shared_ptr<const Callable> f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_int() const {
    return kind_ == Kind::kInt || kind_ == Kind::kBool;
  }  // Python: bool is int
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? int64_t{b_} : i_; }
  double float_value() const {
    return kind_ == Kind::kFloat ? f_ : static_cast<double>(int_value());
  }
  const std::string& str() const;  // kString; the hint for kUndefined
  const ListData& list() const;
  const DictData& dict() const;  // kDict or kNamespace
  DictData& mutable_namespace() const;
  const LoopData& loop() const;
  const Callable& callable() const;
  const void* identity() const { return p_.get(); }
  // The digits of a BigInt, else null.
  const std::string* big_int_digits() const {
    return kind_ == Kind::kFloat && p_ ? static_cast<const std::string*>(p_.get()) : nullptr;
  }

  // Python's type name ("str", "int", "list", "dict", "NoneType", ...) for error messages.
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const void> p_;
};

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
};

// Insertion-ordered string-keyed map (Python dict with JSON's keys).
struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  int depth = 1;

  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value v);

 private:
  std::unordered_map<std::string, size_t> index_;  // built once there are more than a few keys
};

struct LoopData {
  std::shared_ptr<const std::vector<Value>> items;
  int64_t index0 = 0;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Binds the arguments to parameters `names` like Python would (positional first, then by
  // keyword); missing ones are undefined. Errors name `function`.
  std::vector<Value> Bind(std::string_view function,
                          std::initializer_list<const char*> names) const;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value Call(CallArgs args) const = 0;
  virtual std::string Name() const = 0;
};

// ---- conversions -----------------------------------------------------------------------------

Value FromJson(const nlohmann::json& j);
Value FromJson(const nlohmann::ordered_json& j);

// Python's str() (Jinja2 output) and repr() (inside lists and dicts).
std::string ToStr(const Value& v);
std::string Repr(const Value& v);
std::string FloatRepr(double d);

struct JsonOptions {
  bool pretty = false;  // indent given: newlines, `indent` per level
  std::string indent;
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
};
// json.dumps(v, ...) as transformers' tojson filter calls it.
std::string ToJson(const Value& v, const JsonOptions& options);

bool Truthy(const Value& v);
bool Equal(const Value& a, const Value& b);
// a < b with Python's rules (numbers, strings, lists); throws for other types.
bool Less(const Value& a, const Value& b);
// len(v); throws for values without a length.
int64_t Length(const Value& v);
class Budget;
// The items of iter(v): list items, dict keys, string characters; undefined is empty. Each item
// is a step of `budget`, charged before the items are made.
std::vector<Value> Iterate(const Value& v, Budget& budget);

// ---- strings ---------------------------------------------------------------------------------

// The code points of a UTF-8 string, each as its own string.
std::vector<std::string> Chars(std::string_view s);
bool IsPySpace(char32_t c);
// str.strip([chars]) / lstrip / rstrip; `chars` null: Unicode whitespace.
std::string Strip(std::string_view s, const std::string* chars, bool left, bool right);
// Python's str.upper(), lower(), swapcase(), title(), capitalize() (simple Unicode case
// mappings), jinja2's title filter (words start after spaces and -([{<), and the case of a
// string for isupper()/islower(): 1 all cased characters upper, -1 all lower, 0 mixed or none.
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string SwapCase(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);
std::string JinjaTitle(std::string_view s);
int CaseOf(std::string_view s);
bool IsAlphaCp(char32_t c);
bool IsAlnumCp(char32_t c);

// ---- work budget -----------------------------------------------------------------------------

// The counters of one render; every limit is a named constant in common/chat_template.h.
class Budget {
 public:
  void Step(int64_t n = 1);
  void Iteration();  // a for-loop iteration or macro call
  // Accounts for a string of `bytes` built by the template.
  void Built(size_t bytes);
  // Accounts for `n` items of a list being made (each a step and kItemBytes of memory).
  void Items(size_t n);
  static constexpr size_t kItemBytes = 128;
  // Fails when a string being built has grown past kMaxChatTemplateOutputBytes.
  static void CheckSize(size_t bytes);

 private:
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  uint64_t built_bytes_ = 0;
};

}  // namespace llm::chat_template_internal
