// Internal to the chat template engine: the expression parser (jinja2's grammar and operator
// precedence) that the statement parser (chat_template_parse.cc) runs over each tag's tokens.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/chat_template_ast.h"

namespace llm::chat_template_internal {

using ExprPtr = std::unique_ptr<Expr>;

// Parses the tokens of one tag; errors are ParseErrors naming the tag's line.
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
  void Expect(const char* op);
  std::string ExpectName();
  void ExpectEnd();
  [[noreturn]] void Error(const std::string& what) const { SyntaxError(line_, what); }
  std::string Describe() const { return AtEnd() ? "the end of the tag" : "'" + Peek().text + "'"; }

  // An expression with conditional expressions (`a if b else c`).
  ExprPtr Expression();
  // Without conditional expressions: the iterable of `for x in y if c`.
  ExprPtr OrExpression();

  // jinja2's parse_tuple: `a, b` without parentheses is a tuple (`{{ 1, 2 }}`, `set x = 1, 2`).
  ExprPtr TupleExpression(bool with_condition = true);

  // A `for` or `set` target: a name, `a, b`, `(a, b)`, or (set only) `ns.attr`.
  Target AssignTarget(bool allow_attr);

  // `name` or `name(args)` after `|`: one filter applied to `value`.
  ExprPtr Filter(ExprPtr value);

  // The filters of a filter block or set block: `a | b(x) | c` applied to the block's body.
  ExprPtr FilterChain();

  // Parses `(args)` into call->args / arg_names.
  void CallArgs(Expr* call);

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
  ExprPtr Make(Expr::Kind kind, std::string op = {}, std::vector<ExprPtr> args = {});
  // Recomputes the depth once args are final.
  ExprPtr Finish(ExprPtr e);

  ExprPtr Or();
  ExprPtr And();
  ExprPtr Not();
  ExprPtr Compare();
  ExprPtr Math1();
  ExprPtr Concat();
  ExprPtr Math2();
  ExprPtr Pow();
  // jinja2: a sign applies to a unary without filters; filters and tests then apply to the
  // result (`-x | abs` is `(-x) | abs`, `a + b is string` is `a + (b is string)`).
  ExprPtr Unary(bool with_filter);
  ExprPtr Test(ExprPtr value);
  ExprPtr Call(ExprPtr callee);
  ExprPtr Postfix(ExprPtr value);
  ExprPtr Subscript(ExprPtr value);
  ExprPtr Primary();

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int line_;
  int nesting_ = 0;
};

}  // namespace llm::chat_template_internal
