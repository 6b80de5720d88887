// Chat template engine: parsing expressions (jinja2's parse_expression and below: conditional
// expressions, or/and/not, chained comparisons, + - ~ * / // % **, unary signs, filters, tests,
// calls, attributes, items, slices and literals).
#include "common/chat_template_expr_parser.h"

namespace llm::chat_template_internal {

void ExprParser::Expect(const char* op) {
  if (!IsOp(op)) Error(std::string("expected '") + op + "', got " + Describe());
  ++pos_;
}

std::string ExprParser::ExpectName() {
  if (Peek().kind != Token::Kind::kName) Error("expected a name, got " + Describe());
  return Take().text;
}

void ExprParser::ExpectEnd() {
  if (!AtEnd()) Error("unexpected '" + Peek().text + "'");
}

ExprPtr ExprParser::Expression() {
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

ExprPtr ExprParser::OrExpression() {
  NestGuard guard(this);
  return Or();
}

ExprPtr ExprParser::TupleExpression(bool with_condition) {
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

Target ExprParser::AssignTarget(bool allow_attr) {
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

ExprPtr ExprParser::Filter(ExprPtr value) {
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

ExprPtr ExprParser::FilterChain() {
  ExprPtr value = Make(Expr::Kind::kBlockInput);
  value = Filter(std::move(value));
  while (IsOp("|")) {
    Take();
    value = Filter(std::move(value));
  }
  return value;
}

void ExprParser::CallArgs(Expr* call) {
  Expect("(");
  while (!IsOp(")")) {
    std::string keyword;
    if (IsOp("*") || IsOp("**")) {
      keyword = Take().text;  // `*list` / `**dict`: expanded when called
    } else if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
      keyword = Take().text;
      Take();
    } else if (std::any_of(call->arg_names.begin(), call->arg_names.end(),
                           [](const std::string& n) { return !n.empty() && n != "*"; })) {
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

ExprPtr ExprParser::Make(Expr::Kind kind, std::string op, std::vector<ExprPtr> args) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->op = std::move(op);
  e->args = std::move(args);
  e->line = line_;
  return Finish(std::move(e));
}

ExprPtr ExprParser::Finish(ExprPtr e) {
  e->depth = 1;
  for (const auto& a : e->args) {
    if (a) e->depth = std::max(e->depth, a->depth + 1);
  }
  if (e->depth > kMaxTemplateNesting) TooDeep();
  return e;
}

ExprPtr ExprParser::Or() {
  ExprPtr left = And();
  while (IsName("or")) {
    Take();
    left = Make(Expr::Kind::kBinary, "or", Args(std::move(left), And()));
  }
  return left;
}

ExprPtr ExprParser::And() {
  ExprPtr left = Not();
  while (IsName("and")) {
    Take();
    left = Make(Expr::Kind::kBinary, "and", Args(std::move(left), Not()));
  }
  return left;
}

ExprPtr ExprParser::Not() {
  if (IsName("not")) {
    NestGuard guard(this);
    Take();
    return Make(Expr::Kind::kUnary, "not", Args(Not()));
  }
  return Compare();
}

ExprPtr ExprParser::Compare() {
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

ExprPtr ExprParser::Math1() {
  ExprPtr left = Concat();
  while (IsOp("+") || IsOp("-")) {
    const std::string op = Take().text;
    left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Concat()));
  }
  return left;
}

ExprPtr ExprParser::Concat() {
  ExprPtr left = Math2();
  while (IsOp("~")) {
    Take();
    left = Make(Expr::Kind::kBinary, "~", Args(std::move(left), Math2()));
  }
  return left;
}

ExprPtr ExprParser::Math2() {
  ExprPtr left = Pow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = Take().text;
    left = Make(Expr::Kind::kBinary, op, Args(std::move(left), Pow()));
  }
  return left;
}

ExprPtr ExprParser::Pow() {
  ExprPtr left = Unary(true);
  while (IsOp("**")) {
    Take();
    left = Make(Expr::Kind::kBinary, "**", Args(std::move(left), Unary(true)));
  }
  return left;
}

ExprPtr ExprParser::Unary(bool with_filter) {
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

ExprPtr ExprParser::Test(ExprPtr value) {
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
             !IsName("else") && !IsName("or") && !IsName("and") && !IsName("if") && !IsName("in") &&
             !IsName("not")) {
    if (IsName("is")) Error("tests cannot be chained with 'is'");
    test->args.push_back(Postfix(Primary()));  // `x is divisibleby 3`
    test->arg_names.resize(test->args.size());
  }
  return Finish(std::move(test));
}

ExprPtr ExprParser::Call(ExprPtr callee) {
  ExprPtr call = Make(Expr::Kind::kCall, "", Args(std::move(callee)));
  call->arg_names.push_back("");
  CallArgs(call.get());
  return Finish(std::move(call));
}

ExprPtr ExprParser::Postfix(ExprPtr value) {
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

ExprPtr ExprParser::Subscript(ExprPtr value) {
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

ExprPtr ExprParser::Primary() {
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

}  // namespace llm::chat_template_internal
