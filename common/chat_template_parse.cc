// Chat template engine: parsing statements (for, if, set, macro, call, filter, with, ...) into a
// Program; the expressions inside tags go to ExprParser (chat_template_expr_parser.cc).
#include <algorithm>
#include <set>
#include <utility>

#include "common/chat_template_expr_parser.h"

namespace llm::chat_template_internal {
namespace {

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
      SyntaxError(seg.line, Quote(keyword) + " without a matching opening tag");
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
    if (loop_depth_ == 0) SyntaxError(line, Quote(keyword) + " outside of a loop");
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
