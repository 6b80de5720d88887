// Chat template engine, part 2: parsing tags and expressions into a Program.
#include "common/chat_template.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <utility>

#include "common/chat_template_ast.h"

namespace llm {

namespace chat_template_internal {
namespace {

// ---- expression parser (Jinja precedence) ------------------------------------------------

using ExprPtr = std::unique_ptr<Expr>;

ExprPtr MakeExpr(Expr::Kind kind, std::string op = {}, std::vector<ExprPtr> args = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->op = std::move(op);
  e->args = std::move(args);
  for (const auto& a : e->args) {
    if (a) e->depth = std::max(e->depth, a->depth + 1);
  }
  return e;
}

template <typename... T>
std::vector<ExprPtr> Args(T&&... a) {
  std::vector<ExprPtr> v;
  (v.push_back(std::forward<T>(a)), ...);
  return v;
}

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : toks_(std::move(tokens)), line_(line) {}

  const Token& Peek() const { return toks_[pos_]; }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  bool IsOp(const char* op) const { return Peek().kind == Token::Kind::kOp && Peek().text == op; }
  bool IsName(const char* name) const {
    return Peek().kind == Token::Kind::kName && Peek().text == name;
  }
  Token Take() { return AtEnd() ? Peek() : toks_[pos_++]; }
  void Expect(const char* op) {
    if (!IsOp(op))
      SyntaxError(line_, std::string("expected '") + op + "', got '" + Peek().text + "'");
    ++pos_;
  }
  std::string ExpectName() {
    if (Peek().kind != Token::Kind::kName)
      SyntaxError(line_, "expected a name, got '" + Peek().text + "'");
    return Take().text;
  }
  void ExpectEnd() {
    if (!AtEnd()) SyntaxError(line_, "unexpected '" + Peek().text + "'");
  }

  ExprPtr Expression() {
    NestGuard guard(this);
    ExprPtr value = Or();
    if (!IsName("if")) return value;
    Take();
    ExprPtr cond = Or();
    ExprPtr otherwise;
    if (IsName("else")) {
      Take();
      otherwise = Expression();
    }
    return Make(Expr::Kind::kCondition, "",
                Args(std::move(cond), std::move(value), std::move(otherwise)));
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
    SyntaxError(line_,
                "expression nested deeper than " + std::to_string(kMaxTemplateNesting) + " levels");
  }
  ExprPtr Make(Expr::Kind kind, std::string op = {}, std::vector<ExprPtr> args = {}) {
    ExprPtr e = MakeExpr(kind, std::move(op), std::move(args));
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
    ExprPtr left = Concat();
    while (true) {
      const Token& t = Peek();
      if (t.kind == Token::Kind::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                         t.text == ">" || t.text == "<=" || t.text == ">=")) {
        const std::string op = Take().text;
        left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Concat()));
      } else if (IsName("in")) {
        Take();
        left = Make(Expr::Kind::kBinary, "in", Args(std::move(left), Concat()));
      } else if (IsName("not") && toks_[pos_ + 1].text == "in") {
        pos_ += 2;
        left = Make(Expr::Kind::kBinary, "not in", Args(std::move(left), Concat()));
      } else if (IsName("is")) {
        Take();
        std::string op = "is";
        if (IsName("not")) {
          Take();
          op = "is not";
        }
        ExprPtr test = Make(Expr::Kind::kTest, op, Args(std::move(left)));
        test->name = ExpectName();
        left = std::move(test);
      } else {
        return left;
      }
    }
  }
  ExprPtr Concat() {
    ExprPtr left = Sum();
    while (IsOp("~")) {
      Take();
      left = Make(Expr::Kind::kBinary, "~", Args(std::move(left), Sum()));
    }
    return left;
  }
  ExprPtr Sum() {
    ExprPtr left = Product();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Take().text;
      left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Product()));
    }
    return left;
  }
  ExprPtr Product() {
    ExprPtr left = Unary();
    while (IsOp("*") || IsOp("/") || IsOp("%") || IsOp("//") || IsOp("**")) {
      if (IsOp("//") || IsOp("**")) UnsupportedSyntax(line_, "operator '" + Peek().text + "'");
      const std::string op = Take().text;
      left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Unary()));
    }
    return left;
  }
  ExprPtr Unary() {
    if (IsOp("-")) {
      NestGuard guard(this);
      Take();
      return Make(Expr::Kind::kUnary, "-", Args(Unary()));
    }
    return Filtered();
  }
  ExprPtr Filtered() {
    ExprPtr value = Postfix();
    while (IsOp("|")) {
      Take();
      const std::string name = ExpectName();
      static const std::set<std::string> kFilters = {"trim",  "length", "count",
                                                     "lower", "upper",  "string"};
      if (!kFilters.count(name)) UnsupportedSyntax(line_, "filter '" + name + "'");
      if (IsOp("(")) UnsupportedSyntax(line_, "filter arguments");
      value = Make(Expr::Kind::kFilter, "", Args(std::move(value)));
      value->name = name;
    }
    return value;
  }
  ExprPtr Postfix();
  ExprPtr Primary();
  std::vector<ExprPtr> CallArgs();

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int line_;
  int nesting_ = 0;
};

std::vector<ExprPtr> ExprParser::CallArgs() {
  std::vector<ExprPtr> args;
  Expect("(");
  while (!IsOp(")")) {
    if (Peek().kind == Token::Kind::kName && toks_[pos_ + 1].text == "=") {
      UnsupportedSyntax(line_, "keyword arguments");
    }
    args.push_back(Expression());
    if (!IsOp(")")) Expect(",");
  }
  Expect(")");
  return args;
}

ExprPtr ExprParser::Postfix() {
  ExprPtr value = Primary();
  while (true) {
    if (IsOp(".")) {
      Take();
      ExprPtr attr = Make(Expr::Kind::kAttribute, "", Args(std::move(value)));
      attr->name = ExpectName();
      value = std::move(attr);
    } else if (IsOp("[")) {
      Take();
      ExprPtr first = IsOp(":") ? nullptr : Expression();
      if (IsOp(":")) {
        Take();
        ExprPtr last = IsOp("]") ? nullptr : Expression();
        if (IsOp(":")) UnsupportedSyntax(line_, "slice step");
        value =
            Make(Expr::Kind::kSlice, "", Args(std::move(value), std::move(first), std::move(last)));
      } else {
        value = Make(Expr::Kind::kItem, "", Args(std::move(value), std::move(first)));
      }
      Expect("]");
    } else if (IsOp("(")) {
      ExprPtr call = Make(Expr::Kind::kCall);
      if (value->kind == Expr::Kind::kVariable) {
        call->name = value->name;
      } else if (value->kind == Expr::Kind::kAttribute) {
        call->name = value->name;
        call->op = "method";
        call->args.push_back(std::move(value->args[0]));
      } else {
        UnsupportedSyntax(line_, "calling an expression");
      }
      for (auto& a : CallArgs()) call->args.push_back(std::move(a));
      value = std::move(call);
    } else {
      return value;
    }
  }
}

ExprPtr ExprParser::Primary() {
  Token t = Take();
  if (t.kind == Token::Kind::kString || t.kind == Token::Kind::kNumber) {
    ExprPtr lit = Make(Expr::Kind::kLiteral);
    lit->value = t.value;
    // Adjacent string literals concatenate, as in Python.
    while (t.kind == Token::Kind::kString && Peek().kind == Token::Kind::kString) {
      lit->value = lit->value.get<std::string>() + Take().text;
    }
    return lit;
  }
  if (t.kind == Token::Kind::kName) {
    ExprPtr e = Make(Expr::Kind::kLiteral);
    if (t.text == "true" || t.text == "True") {
      e->value = true;
    } else if (t.text == "false" || t.text == "False") {
      e->value = false;
    } else if (t.text == "none" || t.text == "None") {
      e->value = nullptr;
    } else {
      e->kind = Expr::Kind::kVariable;
      e->name = t.text;
    }
    return e;
  }
  if (t.kind == Token::Kind::kOp && t.text == "(") {
    ExprPtr inner = Expression();
    if (IsOp(",")) UnsupportedSyntax(line_, "tuples");
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
    return list;
  }
  if (t.kind == Token::Kind::kOp && t.text == "{") UnsupportedSyntax(line_, "dict literals");
  if (t.kind == Token::Kind::kEnd) SyntaxError(line_, "expression expected");
  SyntaxError(line_, "unexpected '" + t.text + "'");
}

// ---- statements --------------------------------------------------------------------------

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  std::vector<Node> ParseAll() {
    std::string end;
    std::vector<Node> nodes = Body({}, &end);
    return nodes;
  }

 private:
  // Parses nodes until a statement whose keyword is in `stops`; stores that keyword in *stop
  // (empty at the end of the template) and leaves its parser in stop_parser_.
  std::vector<Node> Body(const std::set<std::string>& stops, std::string* stop);
  Node For(ExprParser& p, int line);
  Node If(ExprParser& p, int line);

  std::vector<Segment> segs_;
  size_t pos_ = 0;
  int nesting_ = 0;  // open for/if blocks (at most kMaxTemplateNesting)
  std::unique_ptr<ExprParser> stop_parser_;
};

std::vector<Node> TemplateParser::Body(const std::set<std::string>& stops, std::string* stop) {
  std::vector<Node> nodes;
  while (pos_ < segs_.size()) {
    const Segment& seg = segs_[pos_++];
    Node node;
    node.line = seg.line;
    if (seg.kind == Segment::Kind::kComment) continue;
    if (seg.kind == Segment::Kind::kText) {
      if (seg.text.empty()) continue;
      node.text = seg.text;
      nodes.push_back(std::move(node));
      continue;
    }
    auto p = std::make_unique<ExprParser>(Tokenize(seg.text, seg.line), seg.line);
    if (seg.kind == Segment::Kind::kExpr) {
      node.kind = Node::Kind::kOutput;
      node.expr = p->Expression();
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
    if ((keyword == "for" || keyword == "if") && nesting_ >= kMaxTemplateNesting) {
      SyntaxError(seg.line,
                  "blocks nested deeper than " + std::to_string(kMaxTemplateNesting) + " levels");
    }
    if (keyword == "for") {
      ++nesting_;
      nodes.push_back(For(*p, seg.line));
      --nesting_;
    } else if (keyword == "if") {
      ++nesting_;
      nodes.push_back(If(*p, seg.line));
      --nesting_;
    } else if (keyword == "set") {
      node.kind = Node::Kind::kSet;
      node.var = p->ExpectName();
      if (p->IsOp(".") || p->IsOp(",")) UnsupportedSyntax(seg.line, "set of an attribute or tuple");
      p->Expect("=");
      node.expr = p->Expression();
      p->ExpectEnd();
      nodes.push_back(std::move(node));
    } else if (keyword == "endfor" || keyword == "endif" || keyword == "elif" ||
               keyword == "else") {
      SyntaxError(seg.line, "'" + keyword + "' without a matching opening tag");
    } else {
      UnsupportedSyntax(seg.line, "tag '" + keyword + "'");
    }
  }
  if (!stops.empty()) {
    SyntaxError(segs_.empty() ? 1 : segs_.back().line,
                "missing '" + *stops.rbegin() + "' at the end of the template");
  }
  stop->clear();
  return nodes;
}

Node TemplateParser::For(ExprParser& p, int line) {
  Node node;
  node.kind = Node::Kind::kFor;
  node.line = line;
  node.var = p.ExpectName();
  if (p.IsOp(",")) UnsupportedSyntax(line, "tuple unpacking in for");
  if (!p.IsName("in")) SyntaxError(line, "expected 'in' in for");
  p.Take();
  node.expr = p.Expression();
  if (node.expr->kind == Expr::Kind::kCondition && !node.expr->args[2]) {
    UnsupportedSyntax(line, "loop filters");
  }
  if (p.IsName("recursive")) UnsupportedSyntax(line, "recursive loops");
  p.ExpectEnd();
  std::string stop;
  node.body = Body({"else", "endfor"}, &stop);
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
  first.condition = p.Expression();
  p.ExpectEnd();
  std::string stop;
  first.body = Body({"elif", "else", "endif"}, &stop);
  node.branches.push_back(std::move(first));
  while (stop == "elif") {
    Node::Branch branch;
    std::unique_ptr<ExprParser> bp = std::move(stop_parser_);
    branch.condition = bp->Expression();
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

}  // namespace
}  // namespace chat_template_internal

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  using namespace chat_template_internal;
  try {
    std::vector<Segment> segs = SplitSegments(source);
    ApplyWhitespaceControl(segs);
    auto program = std::make_shared<Program>();
    program->nodes = TemplateParser(std::move(segs)).ParseAll();
    return ChatTemplate(std::move(program));
  } catch (const ParseError& e) {
    return e.unsupported ? Unimplemented(e.message) : InvalidArgument(e.message);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("chat template: ") + e.what());
  }
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context) const {
  if (!program_) return FailedPrecondition("chat template: not parsed");
  return chat_template_internal::RenderProgram(*program_, context);
}

}  // namespace llm
