// Chat template engine: rendering a parsed Program (statements, scopes, macros, expressions).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <limits>

#include "common/chat_template.h"
#include "common/chat_template_ast.h"

namespace llm::chat_template_internal {
namespace {

using Frame = std::shared_ptr<DictData>;

class Renderer;

// A macro or a call block's `caller`: its definition and the scopes it was defined in.
class MacroCallable : public Callable {
 public:
  MacroCallable(Renderer* r, const MacroDef* def, std::vector<Frame> scopes)
      : renderer_(r), def_(def), scopes_(std::move(scopes)) {}
  Value Call(CallArgs args) const override;
  std::string Name() const override { return def_->name; }
  const MacroDef& def() const { return *def_; }
  const std::vector<Frame>& scopes() const { return scopes_; }
  // Breaks the reference cycle (a macro stored in a scope it captured) once rendering ends.
  void Release() const { scopes_.clear(); }

 private:
  Renderer* renderer_;
  const MacroDef* def_;
  mutable std::vector<Frame> scopes_;
};

[[noreturn]] void NotCallable(const Value& f) {
  Fail(Quote(f.TypeName()) + " object is not callable");
}

class Renderer {
 public:
  explicit Renderer(const Value& context) {
    frames_.push_back(std::make_shared<DictData>(context.is_dict() ? context.dict() : DictData()));
    AddGlobals(&globals_, &budget_, &namespaces_);
  }
  ~Renderer() {
    // Macros and namespaces may (indirectly) hold themselves; empty them so that they go.
    for (auto& m : macros_) {
      if (auto p = m.lock()) p->Release();
    }
    for (auto& n : namespaces_) {
      if (auto p = n.lock()) p->items.clear();
    }
  }

  void RenderTop(const std::vector<Node>& nodes) {
    std::string out;
    out_ = &out;
    RenderNodes(nodes);
    output_ = std::move(out);
  }
  std::string TakeOutput() { return std::move(output_); }

  Value CallMacro(const MacroCallable& m, CallArgs args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Blocks and expressions are at most kMaxTemplateNesting deep each, but macro calls stack them:
  // the recursion of one render is bounded as a whole so that it stays well inside a thread's
  // stack.
  static constexpr int kMaxRenderDepth = 1024;
  struct DepthGuard {
    explicit DepthGuard(Renderer* renderer) : r(renderer) {
      if (++r->depth_ > kMaxRenderDepth) {
        Fail("blocks, expressions and macro calls nested deeper than " +
             std::to_string(kMaxRenderDepth) + " levels in all");
      }
    }
    ~DepthGuard() { --r->depth_; }
    Renderer* r;
  };
  Flow RenderNodes(const std::vector<Node>& nodes) {
    DepthGuard guard(this);
    for (const Node& n : nodes) {
      const Flow f = RenderNode(n);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }
  Flow RenderNode(const Node& n) {
    try {
      return RenderNodeUnchecked(n);
    } catch (RenderError& e) {
      if (e.line == 0) e.line = n.line;
      throw;
    }
  }
  Flow RenderNodeUnchecked(const Node& n);
  Flow RenderFor(const Node& n);
  // Renders `body` in a new scope into a string.
  std::string Capture(const std::vector<Node>& body) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    frames_.push_back(std::make_shared<DictData>());
    RenderNodes(body);
    frames_.pop_back();
    out_ = saved;
    budget_.Built(buf.size());
    return buf;
  }
  void Append(const std::string& s) {
    out_->append(s);
    if (out_->size() > kMaxChatTemplateOutputBytes) {
      Fail("the rendered text exceeds " + std::to_string(kMaxChatTemplateOutputBytes >> 20) +
           " MiB (kMaxChatTemplateOutputBytes)");
    }
  }
  void Assign(const Target& t, const Value& v, DictData& frame);

  Value Lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      if (const Value* v = (*it)->Find(name)) return *v;
    }
    if (const Value* v = globals_.Find(name)) return *v;
    return Value::Undefined(Quote(name) + " is undefined");
  }

  Value Eval(const Expr& e);
  Value EvalBinary(const Expr& e);
  Value EvalCompare(const Expr& e);
  Value EvalSlice(const Expr& e);
  Value EvalCall(const Expr& e, const Value* caller);
  CallArgs EvalArgs(const Expr& e, size_t from) {
    CallArgs args;
    for (size_t i = from; i < e.args.size(); ++i) {
      Value v = Eval(*e.args[i]);
      if (e.arg_names[i].empty()) {
        args.positional.push_back(std::move(v));
      } else if (e.arg_names[i] == "*") {
        for (Value& x : Iterate(v, budget_)) args.positional.push_back(std::move(x));
      } else if (e.arg_names[i] == "**") {
        if (!v.is_dict()) Fail("argument after ** must be a mapping, not " + v.TypeName());
        for (const auto& [k, x] : v.dict().items) args.keyword.emplace_back(k, x);
      } else {
        args.keyword.emplace_back(e.arg_names[i], std::move(v));
      }
    }
    return args;
  }

  std::vector<Frame> frames_;
  DictData globals_;
  std::string* out_ = nullptr;
  std::string output_;
  Value block_input_;
  int macro_depth_ = 0;
  int depth_ = 0;  // DepthGuard
  Budget budget_;
  std::vector<std::weak_ptr<const MacroCallable>> macros_;
  std::vector<std::weak_ptr<DictData>> namespaces_;
};

Value MacroCallable::Call(CallArgs args) const {
  return renderer_->CallMacro(*this, std::move(args));
}

void Renderer::Assign(const Target& t, const Value& v, DictData& frame) {
  if (!t.tuple) {
    frame.Set(t.names[0], v);
    return;
  }
  const std::vector<Value> items = Iterate(v, budget_);
  if (items.size() != t.names.size()) {
    Fail(std::string(items.size() > t.names.size() ? "too many" : "not enough") +
         " values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
         std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) frame.Set(t.names[i], items[i]);
}

Renderer::Flow Renderer::RenderNodeUnchecked(const Node& n) {
  budget_.Step();
  switch (n.kind) {
    case Node::Kind::kText:
      Append(n.text);
      break;
    case Node::Kind::kOutput: {
      const Value v = Eval(*n.expr);
      if (v.is_string()) {
        Append(v.str());
      } else {
        const std::string s = ToStr(v);
        budget_.Built(s.size());
        Append(s);
      }
      break;
    }
    case Node::Kind::kIf:
      for (const Node::Branch& b : n.branches) {
        if (Truthy(Eval(*b.condition))) return RenderNodes(b.body);
      }
      return RenderNodes(n.else_body);
    case Node::Kind::kFor:
      return RenderFor(n);
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
    case Node::Kind::kSet: {
      const Value v = Eval(*n.expr);
      if (n.target.attr.empty()) {
        Assign(n.target, v, *frames_.back());
        break;
      }
      const Value ns = Lookup(n.target.names[0]);
      if (ns.kind() != Value::Kind::kNamespace) {
        Fail("cannot assign attribute '" + n.target.attr + "' on '" + n.target.names[0] +
             "': not a namespace()");
      }
      ns.mutable_namespace().Set(n.target.attr, v);
      break;
    }
    case Node::Kind::kSetBlock: {
      Value v = Value::Str(Capture(n.body));
      if (n.expr) {
        const Value saved = std::exchange(block_input_, v);
        v = Eval(*n.expr);
        block_input_ = saved;
      }
      Assign(n.target, v, *frames_.back());
      break;
    }
    case Node::Kind::kFilterBlock: {
      const Value saved = std::exchange(block_input_, Value::Str(Capture(n.body)));
      const Value v = Eval(*n.expr);
      block_input_ = saved;
      Append(ToStr(v));
      break;
    }
    case Node::Kind::kMacro: {
      auto m = std::make_shared<const MacroCallable>(this, n.macro.get(), frames_);
      macros_.push_back(m);
      frames_.back()->Set(n.macro->name, Value::Function(std::move(m)));
      break;
    }
    case Node::Kind::kCallBlock: {
      auto caller = std::make_shared<const MacroCallable>(this, n.macro.get(), frames_);
      macros_.push_back(caller);
      const Value caller_value = Value::Function(std::move(caller));
      Append(ToStr(EvalCall(*n.expr, &caller_value)));
      break;
    }
    case Node::Kind::kWith: {
      std::vector<Value> values;
      for (const auto& e : n.with_values) values.push_back(Eval(*e));
      auto frame = std::make_shared<DictData>();
      for (size_t i = 0; i < values.size(); ++i) Assign(n.with_targets[i], values[i], *frame);
      frames_.push_back(std::move(frame));
      const Flow f = RenderNodes(n.body);
      frames_.pop_back();
      return f;
    }
    case Node::Kind::kGeneration:
      return RenderNodes(n.body);
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::RenderFor(const Node& n) {
  std::vector<Value> items = Iterate(Eval(*n.expr), budget_);
  if (n.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      auto frame = std::make_shared<DictData>();
      Assign(n.target, item, *frame);
      frames_.push_back(std::move(frame));
      const bool keep = Truthy(Eval(*n.filter));
      frames_.pop_back();
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    frames_.push_back(std::make_shared<DictData>());
    const Flow f = RenderNodes(n.else_body);
    frames_.pop_back();
    return f;
  }
  auto shared = std::make_shared<const std::vector<Value>>(std::move(items));
  for (size_t i = 0; i < shared->size(); ++i) {
    budget_.Iteration();
    auto frame = std::make_shared<DictData>();
    Assign(n.target, (*shared)[i], *frame);
    auto loop = std::make_shared<LoopData>();
    loop->items = shared;
    loop->index0 = static_cast<int64_t>(i);
    frame->Set("loop", Value::Loop(std::move(loop)));
    frames_.push_back(std::move(frame));
    const Flow f = RenderNodes(n.body);
    frames_.pop_back();
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Renderer::CallMacro(const MacroCallable& m, CallArgs args) {
  const MacroDef& def = m.def();
  if (macro_depth_ >= kMaxChatTemplateMacroDepth) {
    Fail("macro calls nested deeper than " + std::to_string(kMaxChatTemplateMacroDepth) +
         " (kMaxChatTemplateMacroDepth; a recursive macro?)");
  }
  budget_.Iteration();
  auto frame = std::make_shared<DictData>();
  std::vector<bool> given(def.params.size(), false);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < def.params.size()) {
      frame->Set(def.params[i], args.positional[i]);
      given[i] = true;
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  DictData kwargs;
  for (auto& [name, value] : args.keyword) {
    auto it = std::find(def.params.begin(), def.params.end(), name);
    if (it == def.params.end()) {
      if (name == "caller") {
        frame->Set("caller", value);
      } else {
        kwargs.Set(name, value);
      }
      continue;
    }
    const size_t i = static_cast<size_t>(it - def.params.begin());
    if (given[i]) Fail("macro '" + def.name + "' got multiple values for argument '" + name + "'");
    frame->Set(name, value);
    given[i] = true;
  }
  std::vector<Frame> saved = std::move(frames_);
  frames_ = m.scopes();
  frames_.push_back(frame);
  for (size_t i = 0; i < def.params.size(); ++i) {
    if (given[i]) continue;
    frame->Set(def.params[i], def.defaults[i] ? Eval(*def.defaults[i])
                                              : Value::Undefined("parameter '" + def.params[i] +
                                                                 "' was not provided"));
  }
  frame->Set("varargs", Value::List(std::move(varargs), /*tuple=*/true));
  frame->Set("kwargs", Value::Dict(std::move(kwargs)));
  std::string buf;
  std::string* saved_out = out_;
  out_ = &buf;
  ++macro_depth_;
  RenderNodes(def.body);
  --macro_depth_;
  out_ = saved_out;
  frames_ = std::move(saved);
  budget_.Built(buf.size());
  return Value::Str(std::move(buf));
}

// ---- expressions -----------------------------------------------------------------------------

Value Renderer::Eval(const Expr& e) {
  DepthGuard guard(this);
  budget_.Step();
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kVariable:
      return Lookup(e.name);
    case Expr::Kind::kBlockInput:
      return block_input_;
    case Expr::Kind::kAttribute:
      return GetAttr(Eval(*e.args[0]), e.name);
    case Expr::Kind::kItem: {
      const Value obj = Eval(*e.args[0]);
      if (obj.is_string()) budget_.Step(static_cast<int64_t>(obj.str().size() / 64));
      return GetItem(obj, Eval(*e.args[1]));
    }
    case Expr::Kind::kSlice:
      return EvalSlice(e);
    case Expr::Kind::kUnary: {
      const Value v = Eval(*e.args[0]);
      if (e.op == "not") return Value::Bool(!Truthy(v));
      if (v.is_undefined()) Fail(v.str());
      if (!v.is_number()) {
        Fail("bad operand type for unary " + e.op + ": '" + v.TypeName() + "'");
      }
      if (e.op == "+") return v.is_int() ? Value::Int(v.int_value()) : v;
      if (!v.is_int()) return Value::Float(-v.float_value());
      if (v.int_value() == std::numeric_limits<int64_t>::min()) Fail("integer overflow in '-'");
      return Value::Int(-v.int_value());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kCompare:
      return EvalCompare(e);
    case Expr::Kind::kFilter: {
      const Value v = Eval(*e.args[0]);
      return ApplyFilter(e.name, v, EvalArgs(e, 1), budget_);
    }
    case Expr::Kind::kTest: {
      const Value v = Eval(*e.args[0]);
      const bool r = ApplyTest(e.name, v, EvalArgs(e, 1), budget_);
      return Value::Bool(e.op == "is" ? r : !r);
    }
    case Expr::Kind::kCall:
      return EvalCall(e, nullptr);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(Eval(*a));
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value key = Eval(*e.args[i]);
        if (!key.is_string()) Fail("dict keys must be strings here, got '" + key.TypeName() + "'");
        d.Set(key.str(), Eval(*e.args[i + 1]));
      }
      return Value::Dict(std::move(d));
    }
    case Expr::Kind::kCondition:
      if (Truthy(Eval(*e.args[0]))) return Eval(*e.args[1]);
      return e.args[2] ? Eval(*e.args[2]) : Value::Undefined("the condition was false");
  }
  Fail("unknown expression");
}

Value Renderer::EvalCall(const Expr& e, const Value* caller) {
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Kind::kAttribute) {
    const Value self = Eval(*callee.args[0]);
    CallArgs args = EvalArgs(e, 1);
    if (caller) args.keyword.emplace_back("caller", *caller);
    bool found = false;
    Value r = CallMethod(self, callee.name, args, budget_, &found);
    if (found) return r;
    const Value f = GetAttr(self, callee.name);
    if (f.kind() == Value::Kind::kCallable) return f.callable().Call(std::move(args));
    if (f.is_undefined()) Fail(f.str());
    NotCallable(f);
  }
  const Value f = Eval(callee);
  CallArgs args = EvalArgs(e, 1);
  if (caller) args.keyword.emplace_back("caller", *caller);
  if (f.kind() == Value::Kind::kCallable) return f.callable().Call(std::move(args));
  if (f.is_undefined()) Fail(f.str());
  NotCallable(f);
}

Value Renderer::EvalCompare(const Expr& e) {
  Value left = Eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = Eval(*e.args[i + 1]);
    const bool r = Compare(e.ops[i], left, right);
    if (!r) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Value Renderer::EvalBinary(const Expr& e) {
  const std::string& op = e.op;
  Value a = Eval(*e.args[0]);
  if (op == "and") return Truthy(a) ? Eval(*e.args[1]) : a;
  if (op == "or") return Truthy(a) ? a : Eval(*e.args[1]);
  const Value b = Eval(*e.args[1]);
  if (op == "~") {
    std::string s = ToStr(a) + ToStr(b);
    budget_.Built(s.size());
    return Value::Str(std::move(s));
  }
  return Arithmetic(op, a, b, budget_);
}

Value Renderer::EvalSlice(const Expr& e) {
  const Value base = Eval(*e.args[0]);
  if (base.is_undefined()) Fail(base.str());
  if (!base.is_list() && !base.is_string()) {
    Fail(Quote(base.TypeName()) + " object is not subscriptable");
  }
  auto bound = [&](const std::unique_ptr<Expr>& x) -> std::optional<int64_t> {
    if (!x) return std::nullopt;
    const Value v = Eval(*x);
    if (v.is_none()) return std::nullopt;
    if (!v.is_int()) Fail("slice indices must be integers or None");
    return v.int_value();
  };
  const std::optional<int64_t> start_arg = bound(e.args[1]);
  const std::optional<int64_t> stop_arg = bound(e.args[2]);
  const std::optional<int64_t> step = bound(e.args[3]);
  return Slice(base, start_arg, stop_arg, step, budget_);
}

}  // namespace

StatusOr<std::string> RenderProgram(const Program& program, Value context) {
  try {
    Renderer r(context);
    r.RenderTop(program.nodes);
    return r.TakeOutput();
  } catch (const RenderError& e) {
    if (e.line == 0) return InvalidArgument("chat template: " + e.message);
    return InvalidArgument("chat template line " + std::to_string(e.line) + ": " + e.message);
  } catch (const std::bad_alloc&) {
    return InvalidArgument("chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("chat template: ") + e.what());
  }
}

}  // namespace llm::chat_template_internal
