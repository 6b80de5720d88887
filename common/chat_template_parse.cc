// Chat template engine: parsing tags and expressions into a Program (jinja2's grammar and
// operator precedence).
#include <algorithm>
#include <set>
#include <utility>

#include "common/chat_template_ast.h"

namespace llm::chat_template_internal {
namespace {

using ExprPtr = std::unique_ptr<Expr>;

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : toks_(std::move(tokens)), line_(line) {}

  const Token& Peek(size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  Token Take() { return AtEnd() ? Peek() : toks_[pos_++]; }
  int line() const { return line_; }
  void Expect(const char* op) {
    if (!IsOp(op)) Error(std::string("expected '") + op + "', got " + Describe());
    ++pos_;
  }
  std::string ExpectName() {
    if (Peek().kind != Token::Kind::kName) Error("expected a name, got " + Describe());
    return Take().text;
  }
  void ExpectEnd() {
    if (!AtEnd()) Error("unexpected '" + Peek().text + "'");
  }
  [[noreturn]] void Error(const std::string& what) const { SyntaxError(line_, what); }
  std::string Describe() const { return AtEnd() ? "the end of the tag" : "'" + Peek().text + "'"; }

  // An expression with conditional expressions (`a if b else c`).
  ExprPtr Expression() {
    NestGuard guard(this);
    ExprPtr value = Or();
    while (IsName("if")) {
      Take();
      ExprPtr cond = Or();
      ExprPtr otherwise;
      if (IsName("else")) {
        Take();
        otherwise = Expression();
      }
      value = Make(Expr::Kind::kCondition, "",
                   Args(std::move(cond), std::move(value), std::move(otherwise)));
    }
    return value;
  }
  // Without conditional expressions: the iterable of `for x in y if c`.
  ExprPtr OrExpression() {
    NestGuard guard(this);
    return Or();
  }

  // jinja2's parse_tuple: `a, b` without parentheses is a tuple (`{{ 1, 2 }}`, `set x = 1, 2`).
  ExprPtr TupleExpression(bool with_condition = true) {
    ExprPtr first = with_condition ? Expression() : OrExpression();
    if (!IsOp(",")) return first;
    std::vector<ExprPtr> items;
    items.push_back(std::move(first));
    while (IsOp(",")) {
      Take();
      if (AtEnd() || IsOp(")") || IsOp("]") || IsOp("=") || IsName("in") || IsName("if")) break;
      items.push_back(with_condition ? Expression() : OrExpression());
    }
    return Make(Expr::Kind::kTuple, "", std::move(items));
  }

  // A `for` or `set` target: a name, `a, b`, `(a, b)`, or (set only) `ns.attr`.
  Target AssignTarget(bool allow_attr) {
    Target t;
    const bool paren = IsOp("(");
    if (paren) Take();
    t.names.push_back(ExpectName());
    if (allow_attr && !paren && IsOp(".")) {
      Take();
      t.attr = ExpectName();
      return t;
    }
    while (IsOp(",")) {
      Take();
      t.tuple = true;
      if (Peek().kind != Token::Kind::kName || IsName("in")) break;
      t.names.push_back(ExpectName());
    }
    if (paren) {
      Expect(")");
      t.tuple = true;
    }
    return t;
  }

  // `name` or `name(args)` after `|`: one filter applied to `value`.
  ExprPtr Filter(ExprPtr value) {
    std::string name = ExpectName();
    while (IsOp(".")) {
      Take();
      name += "." + ExpectName();
    }
    if (!IsKnownFilter(name)) UnsupportedSyntax(line_, "filter '" + name + "'");
    ExprPtr f = Make(Expr::Kind::kFilter, "", Args(std::move(value)));
    f->name = name;
    if (IsOp("(")) CallArgs(f.get());
    return Finish(std::move(f));
  }

  // The filters of a filter block or set block: `a | b(x) | c` applied to the block's body.
  ExprPtr FilterChain() {
    ExprPtr value = Make(Expr::Kind::kBlockInput);
    value = Filter(std::move(value));
    while (IsOp("|")) {
      Take();
      value = Filter(std::move(value));
    }
    return value;
  }

  // Parses `(args)` into call->args / arg_names.
  void CallArgs(Expr* call) {
    Expect("(");
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) UnsupportedSyntax(line_, "*args and **kwargs in calls");
      std::string keyword;
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        keyword = Take().text;
        Take();
      } else if (std::any_of(call->arg_names.begin(), call->arg_names.end(),
                             [](const std::string& n) { return !n.empty(); })) {
        Error("positional argument after a keyword argument");
      }
      call->args.push_back(Expression());
      call->arg_names.resize(call->args.size());
      call->arg_names.back() = keyword;
      if (!IsOp(")")) Expect(",");
    }
    Expect(")");
    call->arg_names.resize(call->args.size());
  }

 private:
  // Bounds the parser's recursion (parentheses, `not not ...`, `- - ...`) and the depth of the
  // tree it builds (which rendering recurses over): kMaxTemplateNesting.
  struct NestGuard {
    explicit NestGuard(ExprParser* parser) : p(parser) {
      if (++p->nesting_ > kMaxTemplateNesting) p->TooDeep();
    }
    ~NestGuard() { --p->nesting_; }
    ExprParser* p;
  };
  [[noreturn]] void TooDeep() const {
    Error("expression nested deeper than " + std::to_string(kMaxTemplateNesting) + " levels");
  }

  template <typename... T>
  static std::vector<ExprPtr> Args(T&&... a) {
    std::vector<ExprPtr> v;
    (v.push_back(std::forward<T>(a)), ...);
    return v;
  }
  ExprPtr Make(Expr::Kind kind, std::string op = {}, std::vector<ExprPtr> args = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->op = std::move(op);
    e->args = std::move(args);
    e->line = line_;
    return Finish(std::move(e));
  }
  // Recomputes the depth once args are final.
  ExprPtr Finish(ExprPtr e) {
    e->depth = 1;
    for (const auto& a : e->args) {
      if (a) e->depth = std::max(e->depth, a->depth + 1);
    }
    if (e->depth > kMaxTemplateNesting) TooDeep();
    return e;
  }

  ExprPtr Or() {
    ExprPtr left = And();
    while (IsName("or")) {
      Take();
      left = Make(Expr::Kind::kBinary, "or", Args(std::move(left), And()));
    }
    return left;
  }
  ExprPtr And() {
    ExprPtr left = Not();
    while (IsName("and")) {
      Take();
      left = Make(Expr::Kind::kBinary, "and", Args(std::move(left), Not()));
    }
    return left;
  }
  ExprPtr Not() {
    if (IsName("not")) {
      NestGuard guard(this);
      Take();
      return Make(Expr::Kind::kUnary, "not", Args(Not()));
    }
    return Compare();
  }
  ExprPtr Compare() {
    ExprPtr first = Math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      const Token& t = Peek();
      if (t.kind == Token::Kind::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                         t.text == ">" || t.text == "<=" || t.text == ">=")) {
        op = Take().text;
      } else if (IsName("in")) {
        Take();
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        Take();
        Take();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) cmp = Make(Expr::Kind::kCompare, "", Args(std::move(first)));
      cmp->ops.push_back(op);
      cmp->args.push_back(Math1());
      cmp = Finish(std::move(cmp));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr Math1() {
    ExprPtr left = Concat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Take().text;
      left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Concat()));
    }
    return left;
  }
  ExprPtr Concat() {
    ExprPtr left = Math2();
    while (IsOp("~")) {
      Take();
      left = Make(Expr::Kind::kBinary, "~", Args(std::move(left), Math2()));
    }
    return left;
  }
  ExprPtr Math2() {
    ExprPtr left = Pow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Take().text;
      left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Pow()));
    }
    return left;
  }
  ExprPtr Pow() {
    ExprPtr left = Unary(true);
    while (IsOp("**")) {
      Take();
      left = Make(Expr::Kind::kBinary, "**", Args(std::move(left), Unary(true)));
    }
    return left;
  }
  // jinja2: a sign applies to a unary without filters; filters and tests then apply to the
  // result (`-x | abs` is `(-x) | abs`, `a + b is string` is `a + (b is string)`).
  ExprPtr Unary(bool with_filter) {
    ExprPtr value;
    if (IsOp("-") || IsOp("+")) {
      NestGuard guard(this);
      const std::string op = Take().text;
      value = Make(Expr::Kind::kUnary, op, Args(Unary(false)));
    } else {
      value = Primary();
    }
    value = Postfix(std::move(value));
    if (!with_filter) return value;
    while (true) {
      if (IsOp("|")) {
        Take();
        value = Filter(std::move(value));
      } else if (IsName("is")) {
        value = Test(std::move(value));
      } else if (IsOp("(")) {
        value = Call(std::move(value));
      } else {
        return value;
      }
    }
  }
  ExprPtr Test(ExprPtr value) {
    Take();  // is
    std::string op = "is";
    if (IsName("not")) {
      Take();
      op = "is not";
    }
    const std::string name = ExpectName();
    if (!IsKnownTest(name)) UnsupportedSyntax(line_, "test '" + name + "'");
    ExprPtr test = Make(Expr::Kind::kTest, op, Args(std::move(value)));
    test->name = name;
    const Token& t = Peek();
    if (IsOp("(")) {
      CallArgs(test.get());
    } else if ((t.kind == Token::Kind::kName || t.kind == Token::Kind::kString ||
                t.kind == Token::Kind::kNumber || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and") && !IsName("if") &&
               !IsName("in") && !IsName("not")) {
      if (IsName("is")) Error("tests cannot be chained with 'is'");
      test->args.push_back(Postfix(Primary()));  // `x is divisibleby 3`
      test->arg_names.resize(test->args.size());
    }
    return Finish(std::move(test));
  }
  ExprPtr Call(ExprPtr callee) {
    ExprPtr call = Make(Expr::Kind::kCall, "", Args(std::move(callee)));
    call->arg_names.push_back("");
    CallArgs(call.get());
    return Finish(std::move(call));
  }
  ExprPtr Postfix(ExprPtr value) {
    while (true) {
      if (IsOp(".")) {
        Take();
        if (Peek().kind == Token::Kind::kNumber && Peek().value.kind() == Value::Kind::kInt) {
          ExprPtr index = Make(Expr::Kind::kLiteral);
          index->value = Take().value;
          value = Make(Expr::Kind::kItem, "", Args(std::move(value), std::move(index)));
        } else {
          ExprPtr attr = Make(Expr::Kind::kAttribute, "", Args(std::move(value)));
          attr->name = ExpectName();
          value = std::move(attr);
        }
      } else if (IsOp("[")) {
        Take();
        value = Subscript(std::move(value));
      } else if (IsOp("(")) {
        value = Call(std::move(value));
      } else {
        return value;
      }
    }
  }
  ExprPtr Subscript(ExprPtr value) {
    ExprPtr first = IsOp(":") ? nullptr : TupleExpression();
    if (!IsOp(":")) {
      Expect("]");
      return Make(Expr::Kind::kItem, "", Args(std::move(value), std::move(first)));
    }
    Take();
    ExprPtr stop = IsOp(":") || IsOp("]") ? nullptr : Expression();
    ExprPtr step;
    if (IsOp(":")) {
      Take();
      if (!IsOp("]")) step = Expression();
    }
    Expect("]");
    return Make(Expr::Kind::kSlice, "",
                Args(std::move(value), std::move(first), std::move(stop), std::move(step)));
  }
  ExprPtr Primary() {
    Token t = Take();
    if (t.kind == Token::Kind::kString || t.kind == Token::Kind::kNumber) {
      ExprPtr lit = Make(Expr::Kind::kLiteral);
      lit->value = t.value;
      if (t.kind == Token::Kind::kString && Peek().kind == Token::Kind::kString) {
        std::string s = t.text;  // adjacent string literals concatenate, as in Python
        while (Peek().kind == Token::Kind::kString) s += Take().text;
        lit->value = Value::Str(std::move(s));
      }
      return lit;
    }
    if (t.kind == Token::Kind::kName) {
      ExprPtr e = Make(Expr::Kind::kLiteral);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kVariable;
        e->name = t.text;
      }
      return e;
    }
    if (t.kind == Token::Kind::kOp && t.text == "(") {
      if (IsOp(")")) {
        Take();
        return Make(Expr::Kind::kTuple);
      }
      ExprPtr inner = TupleExpression();
      if (inner->kind != Expr::Kind::kTuple && IsOp(")")) {
        Take();
        return inner;
      }
      Expect(")");
      return inner;
    }
    if (t.kind == Token::Kind::kOp && t.text == "[") {
      ExprPtr list = Make(Expr::Kind::kList);
      while (!IsOp("]")) {
        list->args.push_back(Expression());
        if (!IsOp("]")) Expect(",");
      }
      Expect("]");
      return Finish(std::move(list));
    }
    if (t.kind == Token::Kind::kOp && t.text == "{") {
      ExprPtr dict = Make(Expr::Kind::kDict);
      while (!IsOp("}")) {
        dict->args.push_back(Expression());
        Expect(":");
        dict->args.push_back(Expression());
        if (!IsOp("}")) Expect(",");
      }
      Expect("}");
      return Finish(std::move(dict));
    }
    if (t.kind == Token::Kind::kEnd) Error("expression expected");
    Error("unexpected '" + t.text + "'");
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int line_;
  int nesting_ = 0;
};

// ---- statements --------------------------------------------------------------------------

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  std::vector<Node> ParseAll() {
    std::string end;
    return Body({}, &end);
  }

 private:
  // Parses nodes until a statement whose keyword is in `stops`; stores that keyword in *stop
  // (empty at the end of the template) and leaves its parser in stop_parser_.
  std::vector<Node> Body(const std::set<std::string>& stops, std::string* stop);
  // The body of a block ending with `end`, and checks that the end tag has nothing else.
  std::vector<Node> BlockBody(const std::string& end) {
    std::string stop;
    std::vector<Node> body = Body({end}, &stop);
    stop_parser_->ExpectEnd();
    return body;
  }
  bool Statement(const std::string& keyword, ExprParser& p, int line, std::vector<Node>* out);
  Node For(ExprParser& p, int line);
  Node If(ExprParser& p, int line);
  Node Set(ExprParser& p, int line);
  std::shared_ptr<MacroDef> MacroSignature(ExprParser& p, std::string name);

  std::vector<Segment> segs_;
  size_t pos_ = 0;
  int nesting_ = 0;     // open blocks (at most kMaxTemplateNesting)
  int loop_depth_ = 0;  // enclosing for loops in the current macro (for break/continue)
  std::unique_ptr<ExprParser> stop_parser_;
};

std::vector<Node> TemplateParser::Body(const std::set<std::string>& stops, std::string* stop) {
  std::vector<Node> nodes;
  while (pos_ < segs_.size()) {
    const Segment& seg = segs_[pos_++];
    if (seg.kind == Segment::Kind::kComment) continue;
    Node node;
    node.line = seg.line;
    if (seg.kind == Segment::Kind::kText) {
      if (seg.text.empty()) continue;
      node.text = seg.text;
      nodes.push_back(std::move(node));
      continue;
    }
    auto p = std::make_unique<ExprParser>(Tokenize(seg.text, seg.line), seg.line);
    if (seg.kind == Segment::Kind::kExpr) {
      node.kind = Node::Kind::kOutput;
      node.expr = p->TupleExpression();
      p->ExpectEnd();
      nodes.push_back(std::move(node));
      continue;
    }
    const std::string keyword = p->ExpectName();
    if (stops.count(keyword)) {
      *stop = keyword;
      stop_parser_ = std::move(p);
      return nodes;
    }
    if (nesting_ >= kMaxTemplateNesting) {
      SyntaxError(seg.line,
                  "blocks nested deeper than " + std::to_string(kMaxTemplateNesting) + " levels");
    }
    ++nesting_;
    const bool known = Statement(keyword, *p, seg.line, &nodes);
    --nesting_;
    if (known) continue;
    static const std::set<std::string> kEnds = {"endfor",  "endif",         "elif",    "else",
                                                "endset",  "endmacro",      "endcall", "endfilter",
                                                "endwith", "endgeneration", "endraw"};
    if (kEnds.count(keyword)) {
      SyntaxError(seg.line, "'" + keyword + "' without a matching opening tag");
    }
    UnsupportedSyntax(seg.line, "tag '" + keyword + "'");
  }
  if (!stops.empty()) {
    SyntaxError(segs_.empty() ? 1 : segs_.back().line,
                "missing '" + *stops.rbegin() + "' at the end of the template");
  }
  stop->clear();
  return nodes;
}

bool TemplateParser::Statement(const std::string& keyword, ExprParser& p, int line,
                               std::vector<Node>* out) {
  Node node;
  node.line = line;
  if (keyword == "for") {
    out->push_back(For(p, line));
  } else if (keyword == "if") {
    out->push_back(If(p, line));
  } else if (keyword == "set") {
    out->push_back(Set(p, line));
  } else if (keyword == "break" || keyword == "continue") {
    if (loop_depth_ == 0) SyntaxError(line, "'" + keyword + "' outside of a loop");
    p.ExpectEnd();
    node.kind = keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
    out->push_back(std::move(node));
  } else if (keyword == "macro") {
    node.kind = Node::Kind::kMacro;
    node.macro = MacroSignature(p, p.ExpectName());
    p.ExpectEnd();
    const int saved = std::exchange(loop_depth_, 0);
    node.macro->body = BlockBody("endmacro");
    loop_depth_ = saved;
    out->push_back(std::move(node));
  } else if (keyword == "call") {
    node.kind = Node::Kind::kCallBlock;
    node.macro = p.IsOp("(") ? MacroSignature(p, "caller") : std::make_shared<MacroDef>();
    node.macro->name = "caller";
    node.expr = p.Expression();
    if (node.expr->kind != Expr::Kind::kCall) p.Error("'call' needs a macro call");
    p.ExpectEnd();
    const int saved = std::exchange(loop_depth_, 0);
    node.macro->body = BlockBody("endcall");
    loop_depth_ = saved;
    out->push_back(std::move(node));
  } else if (keyword == "filter") {
    node.kind = Node::Kind::kFilterBlock;
    node.expr = p.FilterChain();
    p.ExpectEnd();
    node.body = BlockBody("endfilter");
    out->push_back(std::move(node));
  } else if (keyword == "with") {
    node.kind = Node::Kind::kWith;
    while (!p.AtEnd()) {
      if (!node.with_targets.empty()) p.Expect(",");
      node.with_targets.push_back(p.AssignTarget(false));
      p.Expect("=");
      node.with_values.push_back(p.Expression());
    }
    node.body = BlockBody("endwith");
    out->push_back(std::move(node));
  } else if (keyword == "generation") {
    p.ExpectEnd();
    node.kind = Node::Kind::kGeneration;
    node.body = BlockBody("endgeneration");
    out->push_back(std::move(node));
  } else {
    return false;
  }
  return true;
}

std::shared_ptr<MacroDef> TemplateParser::MacroSignature(ExprParser& p, std::string name) {
  auto m = std::make_shared<MacroDef>();
  m->name = std::move(name);
  p.Expect("(");
  while (!p.IsOp(")")) {
    m->params.push_back(p.ExpectName());
    if (p.IsOp("=")) {
      p.Take();
      m->defaults.push_back(p.Expression());
    } else {
      if (!m->defaults.empty() && m->defaults.back())
        p.Error("non-default argument follows default argument");
      m->defaults.push_back(nullptr);
    }
    if (!p.IsOp(")")) p.Expect(",");
  }
  p.Expect(")");
  return m;
}

Node TemplateParser::For(ExprParser& p, int line) {
  Node node;
  node.kind = Node::Kind::kFor;
  node.line = line;
  node.target = p.AssignTarget(false);
  if (!p.IsName("in")) p.Error("expected 'in' in for, got " + p.Describe());
  p.Take();
  node.expr = p.TupleExpression(/*with_condition=*/false);
  if (p.IsName("if")) {
    p.Take();
    node.filter = p.Expression();
  }
  if (p.IsName("recursive")) UnsupportedSyntax(line, "recursive loops");
  p.ExpectEnd();
  std::string stop;
  ++loop_depth_;
  node.body = Body({"else", "endfor"}, &stop);
  --loop_depth_;
  if (stop == "else") {
    stop_parser_->ExpectEnd();
    node.else_body = Body({"endfor"}, &stop);
  }
  stop_parser_->ExpectEnd();
  return node;
}

Node TemplateParser::If(ExprParser& p, int line) {
  Node node;
  node.kind = Node::Kind::kIf;
  node.line = line;
  Node::Branch first;
  first.condition = p.TupleExpression();
  p.ExpectEnd();
  std::string stop;
  first.body = Body({"elif", "else", "endif"}, &stop);
  node.branches.push_back(std::move(first));
  while (stop == "elif") {
    Node::Branch branch;
    std::unique_ptr<ExprParser> bp = std::move(stop_parser_);
    branch.condition = bp->TupleExpression();
    bp->ExpectEnd();
    branch.body = Body({"elif", "else", "endif"}, &stop);
    node.branches.push_back(std::move(branch));
  }
  if (stop == "else") {
    stop_parser_->ExpectEnd();
    node.else_body = Body({"endif"}, &stop);
  }
  stop_parser_->ExpectEnd();
  return node;
}

Node TemplateParser::Set(ExprParser& p, int line) {
  Node node;
  node.line = line;
  node.target = p.AssignTarget(true);
  if (p.IsOp("=")) {
    p.Take();
    node.kind = Node::Kind::kSet;
    node.expr = p.TupleExpression();
    p.ExpectEnd();
    return node;
  }
  // {% set x %}...{% endset %}, optionally {% set x | filter %}.
  if (node.target.tuple || !node.target.attr.empty()) p.Error("a set block assigns one name");
  node.kind = Node::Kind::kSetBlock;
  if (p.IsOp("|")) {
    p.Take();
    node.expr = p.FilterChain();
  }
  p.ExpectEnd();
  node.body = BlockBody("endset");
  return node;
}

}  // namespace

std::vector<Node> ParseTemplate(std::string_view source) {
  std::vector<Segment> segs = SplitSegments(source);
  ApplyWhitespaceControl(segs);
  return TemplateParser(std::move(segs)).ParseAll();
}

}  // namespace llm::chat_template_internal
