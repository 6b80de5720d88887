// Internal to the chat template engine (common/chat_template*.cc): the parsed program.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace llm::chat_template_internal {

// The deepest nesting of expressions (parentheses, operators, lists, calls) and of blocks
// (for/if) a template may have: parsing and rendering recurse, so a template nested thousands of
// levels deep (even a long `a + b + c + ...` chain) must be an error, not a stack overflow.
inline constexpr int kMaxTemplateNesting = 128;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kVariable,   // name
    kAttribute,  // args[0].name
    kItem,       // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]] (null args = open ends)
    kUnary,      // op args[0]: "not", "-"
    kBinary,     // args[0] op args[1]
    kFilter,     // args[0] | name
    kTest,       // args[0] is [not] name (op = "is" or "is not")
    kCall,       // name(args...) or args[0].name(args[1..]) when op == "method"
    kList,       // [args...]
    kCondition,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::kLiteral;
  nlohmann::json value;
  std::string name;
  std::string op;
  std::vector<std::unique_ptr<Expr>> args;
  int depth = 1;  // 1 + the deepest of args
};

struct Node {
  enum class Kind { kText, kOutput, kFor, kIf, kSet };
  Kind kind = Kind::kText;
  std::string text;             // kText
  std::unique_ptr<Expr> expr;   // kOutput, kFor (the list), kSet (the value)
  std::string var;              // kFor loop variable, kSet target
  std::vector<Node> body;       // kFor body
  std::vector<Node> else_body;  // kFor else, kIf else
  struct Branch {
    std::unique_ptr<Expr> condition;
    std::vector<Node> body;
  };
  std::vector<Branch> branches;  // kIf: if, elif...
  int line = 0;
};

struct Program {
  std::vector<Node> nodes;
};

// ---- lexing (chat_template_lex.cc) -----------------------------------------------------------

// Thrown by the lexer and parser only; converted to a Status by ChatTemplate::Parse.
struct ParseError {
  bool unsupported;
  std::string message;
};
[[noreturn]] void SyntaxError(int line, const std::string& what);
[[noreturn]] void UnsupportedSyntax(int line, const std::string& what);

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

// Splits the source into text and tags.
std::vector<Segment> SplitSegments(std::string_view src);
// Applies `-` markers and the Hugging Face environment's trim_blocks / lstrip_blocks.
void ApplyWhitespaceControl(std::vector<Segment>& segs);

struct Token {
  enum class Kind { kName, kString, kNumber, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  nlohmann::json value;
};

// The tokens of an expression or statement, ending with a kEnd token.
std::vector<Token> Tokenize(std::string_view s, int line);

// Evaluates the program (chat_template_eval.cc).
StatusOr<std::string> RenderProgram(const Program& program, const nlohmann::json& context);

}  // namespace llm::chat_template_internal
