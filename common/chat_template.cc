// Chat template engine, part 1: splitting the source into text and tags (with the Hugging Face
// whitespace rules), tokenizing expressions and parsing them into a Program.
#include "common/chat_template.h"

#include <cctype>
#include <set>
#include <stdexcept>
#include <utility>

#include "common/chat_template_ast.h"

namespace llm {

namespace chat_template_internal {
namespace {

// Thrown inside the parser only; converted to a Status by ChatTemplate::Parse.
struct ParseError {
  bool unsupported;
  std::string message;
};

[[noreturn]] void Fail(int line, const std::string& what) {
  throw ParseError{false, "chat template line " + std::to_string(line) + ": " + what};
}
[[noreturn]] void Unsupported(int line, const std::string& what) {
  throw ParseError{
      true, "chat template line " + std::to_string(line) + ": unsupported syntax (" + what + ")"};
}

// ---- segments ----------------------------------------------------------------------------

struct Segment {
  enum class Kind { kText, kExpr, kStmt, kComment };
  Kind kind = Kind::kText;
  std::string text;
  bool strip_left = false;   // `{%-`: strip whitespace before the tag
  bool strip_right = false;  // `-%}`: strip whitespace after the tag
  bool plus_left = false;    // `{%+`: no lstrip_blocks
  bool plus_right = false;   // `+%}`: no trim_blocks
  int line = 1;
};

int CountLines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Position of `close` at or after `pos`, skipping quoted strings for expression tags.
size_t FindClose(std::string_view src, size_t pos, std::string_view close, bool quotes) {
  char quote = 0;
  for (size_t i = pos; i < src.size(); ++i) {
    const char c = src[i];
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    if (quotes && (c == '\'' || c == '"')) {
      quote = c;
      continue;
    }
    if (src.compare(i, close.size(), close) == 0) return i;
  }
  return std::string_view::npos;
}

std::vector<Segment> SplitSegments(std::string_view src) {
  std::vector<Segment> out;
  size_t pos = 0;
  int line = 1;
  while (pos < src.size()) {
    size_t start = pos;
    while (true) {
      start = src.find('{', start);
      if (start == std::string_view::npos || start + 1 >= src.size()) break;
      const char c = src[start + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++start;
    }
    if (start == std::string_view::npos || start + 1 >= src.size()) start = src.size();
    if (start > pos) {
      out.push_back({Segment::Kind::kText, std::string(src.substr(pos, start - pos))});
      out.back().line = line;
      line += CountLines(src.substr(pos, start - pos));
    }
    if (start >= src.size()) break;
    Segment seg;
    seg.line = line;
    const char open = src[start + 1];
    seg.kind = open == '{'   ? Segment::Kind::kExpr
               : open == '%' ? Segment::Kind::kStmt
                             : Segment::Kind::kComment;
    const std::string_view close = open == '{' ? "}}" : open == '%' ? "%}" : "#}";
    size_t inner = start + 2;
    if (inner < src.size() && (src[inner] == '-' || src[inner] == '+')) {
      (src[inner] == '-' ? seg.strip_left : seg.plus_left) = true;
      ++inner;
    }
    const size_t end = FindClose(src, inner, close, seg.kind != Segment::Kind::kComment);
    if (end == std::string_view::npos) Fail(line, "a tag is never closed");
    size_t inner_end = end;
    if (inner_end > inner && (src[inner_end - 1] == '-' || src[inner_end - 1] == '+')) {
      (src[inner_end - 1] == '-' ? seg.strip_right : seg.plus_right) = true;
      --inner_end;
    }
    seg.text = std::string(src.substr(inner, inner_end - inner));
    line += CountLines(src.substr(start, end + 2 - start));
    out.push_back(std::move(seg));
    pos = end + 2;
  }
  return out;
}

bool IsBlockTag(const Segment& s) {
  return s.kind == Segment::Kind::kStmt || s.kind == Segment::Kind::kComment;
}

// Applies `-` markers and the Hugging Face environment's trim_blocks / lstrip_blocks.
void ApplyWhitespaceControl(std::vector<Segment>& segs) {
  for (size_t i = 0; i < segs.size(); ++i) {
    Segment& s = segs[i];
    if (s.kind != Segment::Kind::kText) continue;
    const Segment* prev = i > 0 ? &segs[i - 1] : nullptr;
    const Segment* next = i + 1 < segs.size() ? &segs[i + 1] : nullptr;
    std::string& t = s.text;
    // The right end first: lstrip_blocks looks at the line as written in the source.
    if (next && next->strip_left) {
      size_t k = t.size();
      while (k > 0 && std::isspace(static_cast<unsigned char>(t[k - 1]))) --k;
      t.erase(k);
    } else if (next && IsBlockTag(*next) && !next->plus_left) {
      const size_t nl = t.rfind('\n');
      if (nl != std::string::npos || prev == nullptr) {
        const size_t from = nl == std::string::npos ? 0 : nl + 1;
        if (t.find_first_not_of(" \t", from) == std::string::npos) t.erase(from);
      }
    }
    if (prev && prev->strip_right) {
      size_t k = 0;
      while (k < t.size() && std::isspace(static_cast<unsigned char>(t[k]))) ++k;
      t.erase(0, k);
    } else if (prev && IsBlockTag(*prev) && !prev->plus_right) {
      if (t.rfind("\r\n", 0) == 0) {
        t.erase(0, 2);
      } else if (!t.empty() && t[0] == '\n') {
        t.erase(0, 1);
      }
    }
  }
}

// ---- expression tokens -------------------------------------------------------------------

struct Token {
  enum class Kind { kName, kString, kNumber, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  nlohmann::json value;
};

std::string ReadString(std::string_view s, size_t& i, int line) {
  const char quote = s[i++];
  std::string out;
  while (i < s.size() && s[i] != quote) {
    char c = s[i++];
    if (c == '\\' && i < s.size()) {
      const char e = s[i++];
      c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    }
    out += c;
  }
  if (i >= s.size()) Fail(line, "unterminated string literal");
  ++i;
  return out;
}

std::vector<Token> Tokenize(std::string_view s, int line) {
  static const char* kTwoCharOps[] = {"==", "!=", "<=", ">=", "//", "**"};
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isspace(c)) {
      ++i;
    } else if (std::isalpha(c) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i)), nullptr});
      i = j;
    } else if (std::isdigit(c)) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      const bool is_float =
          j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]));
      if (is_float) {
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      const std::string num(s.substr(i, j - i));
      nlohmann::json v;
      if (is_float) {
        v = std::stod(num);
      } else {
        v = std::stoll(num);
      }
      out.push_back({Token::Kind::kNumber, num, v});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string str = ReadString(s, i, line);
      out.push_back({Token::Kind::kString, str, str});
    } else {
      std::string op(1, static_cast<char>(c));
      for (const char* two : kTwoCharOps) {
        if (s.compare(i, 2, two) == 0) op = two;
      }
      if (std::string_view("()[]{}.,|~+-*/%<>=:!").find(op[0]) == std::string_view::npos ||
          op == "!") {
        Fail(line, "unexpected character '" + op + "'");
      }
      out.push_back({Token::Kind::kOp, op, nullptr});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, "", nullptr});
  return out;
}

// ---- expression parser (Jinja precedence) ------------------------------------------------

using ExprPtr = std::unique_ptr<Expr>;

ExprPtr MakeExpr(Expr::Kind kind, std::string op = {}, std::vector<ExprPtr> args = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->op = std::move(op);
  e->args = std::move(args);
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
    if (!IsOp(op)) Fail(line_, std::string("expected '") + op + "', got '" + Peek().text + "'");
    ++pos_;
  }
  std::string ExpectName() {
    if (Peek().kind != Token::Kind::kName)
      Fail(line_, "expected a name, got '" + Peek().text + "'");
    return Take().text;
  }
  void ExpectEnd() {
    if (!AtEnd()) Fail(line_, "unexpected '" + Peek().text + "'");
  }

  ExprPtr Expression() {
    ExprPtr value = Or();
    if (!IsName("if")) return value;
    Take();
    ExprPtr cond = Or();
    ExprPtr otherwise;
    if (IsName("else")) {
      Take();
      otherwise = Expression();
    }
    return MakeExpr(Expr::Kind::kCondition, "",
                    Args(std::move(cond), std::move(value), std::move(otherwise)));
  }

 private:
  ExprPtr Or() {
    ExprPtr left = And();
    while (IsName("or")) {
      Take();
      left = MakeExpr(Expr::Kind::kBinary, "or", Args(std::move(left), And()));
    }
    return left;
  }
  ExprPtr And() {
    ExprPtr left = Not();
    while (IsName("and")) {
      Take();
      left = MakeExpr(Expr::Kind::kBinary, "and", Args(std::move(left), Not()));
    }
    return left;
  }
  ExprPtr Not() {
    if (IsName("not")) {
      Take();
      return MakeExpr(Expr::Kind::kUnary, "not", Args(Not()));
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
        left = MakeExpr(Expr::Kind::kBinary, op, Args(std::move(left), Concat()));
      } else if (IsName("in")) {
        Take();
        left = MakeExpr(Expr::Kind::kBinary, "in", Args(std::move(left), Concat()));
      } else if (IsName("not") && toks_[pos_ + 1].text == "in") {
        pos_ += 2;
        left = MakeExpr(Expr::Kind::kBinary, "not in", Args(std::move(left), Concat()));
      } else if (IsName("is")) {
        Take();
        std::string op = "is";
        if (IsName("not")) {
          Take();
          op = "is not";
        }
        ExprPtr test = MakeExpr(Expr::Kind::kTest, op, Args(std::move(left)));
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
      left = MakeExpr(Expr::Kind::kBinary, "~", Args(std::move(left), Sum()));
    }
    return left;
  }
  ExprPtr Sum() {
    ExprPtr left = Product();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Take().text;
      left = MakeExpr(Expr::Kind::kBinary, op, Args(std::move(left), Product()));
    }
    return left;
  }
  ExprPtr Product() {
    ExprPtr left = Unary();
    while (IsOp("*") || IsOp("/") || IsOp("%") || IsOp("//") || IsOp("**")) {
      if (IsOp("//") || IsOp("**")) Unsupported(line_, "operator '" + Peek().text + "'");
      const std::string op = Take().text;
      left = MakeExpr(Expr::Kind::kBinary, op, Args(std::move(left), Unary()));
    }
    return left;
  }
  ExprPtr Unary() {
    if (IsOp("-")) {
      Take();
      return MakeExpr(Expr::Kind::kUnary, "-", Args(Unary()));
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
      if (!kFilters.count(name)) Unsupported(line_, "filter '" + name + "'");
      if (IsOp("(")) Unsupported(line_, "filter arguments");
      value = MakeExpr(Expr::Kind::kFilter, "", Args(std::move(value)));
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
};

std::vector<ExprPtr> ExprParser::CallArgs() {
  std::vector<ExprPtr> args;
  Expect("(");
  while (!IsOp(")")) {
    if (Peek().kind == Token::Kind::kName && toks_[pos_ + 1].text == "=") {
      Unsupported(line_, "keyword arguments");
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
      ExprPtr attr = MakeExpr(Expr::Kind::kAttribute, "", Args(std::move(value)));
      attr->name = ExpectName();
      value = std::move(attr);
    } else if (IsOp("[")) {
      Take();
      ExprPtr first = IsOp(":") ? nullptr : Expression();
      if (IsOp(":")) {
        Take();
        ExprPtr last = IsOp("]") ? nullptr : Expression();
        if (IsOp(":")) Unsupported(line_, "slice step");
        value = MakeExpr(Expr::Kind::kSlice, "",
                         Args(std::move(value), std::move(first), std::move(last)));
      } else {
        value = MakeExpr(Expr::Kind::kItem, "", Args(std::move(value), std::move(first)));
      }
      Expect("]");
    } else if (IsOp("(")) {
      ExprPtr call = MakeExpr(Expr::Kind::kCall);
      if (value->kind == Expr::Kind::kVariable) {
        call->name = value->name;
      } else if (value->kind == Expr::Kind::kAttribute) {
        call->name = value->name;
        call->op = "method";
        call->args.push_back(std::move(value->args[0]));
      } else {
        Unsupported(line_, "calling an expression");
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
    ExprPtr lit = MakeExpr(Expr::Kind::kLiteral);
    lit->value = t.value;
    // Adjacent string literals concatenate, as in Python.
    while (t.kind == Token::Kind::kString && Peek().kind == Token::Kind::kString) {
      lit->value = lit->value.get<std::string>() + Take().text;
    }
    return lit;
  }
  if (t.kind == Token::Kind::kName) {
    ExprPtr e = MakeExpr(Expr::Kind::kLiteral);
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
    if (IsOp(",")) Unsupported(line_, "tuples");
    Expect(")");
    return inner;
  }
  if (t.kind == Token::Kind::kOp && t.text == "[") {
    ExprPtr list = MakeExpr(Expr::Kind::kList);
    while (!IsOp("]")) {
      list->args.push_back(Expression());
      if (!IsOp("]")) Expect(",");
    }
    Expect("]");
    return list;
  }
  if (t.kind == Token::Kind::kOp && t.text == "{") Unsupported(line_, "dict literals");
  if (t.kind == Token::Kind::kEnd) Fail(line_, "expression expected");
  Fail(line_, "unexpected '" + t.text + "'");
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
    if (keyword == "for") {
      nodes.push_back(For(*p, seg.line));
    } else if (keyword == "if") {
      nodes.push_back(If(*p, seg.line));
    } else if (keyword == "set") {
      node.kind = Node::Kind::kSet;
      node.var = p->ExpectName();
      if (p->IsOp(".") || p->IsOp(",")) Unsupported(seg.line, "set of an attribute or tuple");
      p->Expect("=");
      node.expr = p->Expression();
      p->ExpectEnd();
      nodes.push_back(std::move(node));
    } else if (keyword == "endfor" || keyword == "endif" || keyword == "elif" ||
               keyword == "else") {
      Fail(seg.line, "'" + keyword + "' without a matching opening tag");
    } else {
      Unsupported(seg.line, "tag '" + keyword + "'");
    }
  }
  if (!stops.empty()) {
    Fail(segs_.empty() ? 1 : segs_.back().line,
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
  if (p.IsOp(",")) Unsupported(line, "tuple unpacking in for");
  if (!p.IsName("in")) Fail(line, "expected 'in' in for");
  p.Take();
  node.expr = p.Expression();
  if (node.expr->kind == Expr::Kind::kCondition && !node.expr->args[2]) {
    Unsupported(line, "loop filters");
  }
  if (p.IsName("recursive")) Unsupported(line, "recursive loops");
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
