// Internal to the chat template engine (common/chat_template*.cc): the parsed program.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/chat_template_value.h"
#include "common/status.h"

namespace llm::chat_template_internal {

// The deepest nesting of expressions (parentheses, operators, lists, calls) and of blocks
// (for/if/macro/...) a template may have: parsing and rendering recurse, so a template nested
// thousands of levels deep (even a long `a + b + c + ...` chain) must be an error, not a stack
// overflow.
inline constexpr int kMaxTemplateNesting = 128;

struct Expr {
  enum class Kind {
    kLiteral,     // value
    kVariable,    // name
    kAttribute,   // args[0].name
    kItem,        // args[0][args[1]]
    kSlice,       // args[0][args[1]:args[2]:args[3]] (null args = omitted)
    kUnary,       // op args[0]: "not", "-", "+"
    kBinary,      // args[0] op args[1]: and or + - * / // % ** ~ in "not in"
    kCompare,     // args[0] ops[0] args[1] ops[1] args[2] ... (chained, Python semantics)
    kFilter,      // args[0] | name(args[1..])
    kTest,        // args[0] is [not] name(args[1..]) (op = "is" or "is not")
    kCall,        // args[0](args[1..])
    kList,        // [args...]
    kTuple,       // (args...)
    kDict,        // {args[0]: args[1], ...}
    kCondition,   // args[1] if args[0] else args[2] (args[2] may be null)
    kBlockInput,  // the body of a filter block or set block being filtered
  };
  Kind kind = Kind::kLiteral;
  Value value;
  std::string name;
  std::string op;
  std::vector<std::string> ops;  // kCompare
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::string> arg_names;  // kFilter/kTest/kCall: keyword of each arg ("" = positional)
  int depth = 1;                       // 1 + the deepest of args
  int line = 0;
};

// Where `for` and `set` store values: a name, a tuple of names, or `ns.attr`.
struct Target {
  std::vector<std::string> names;  // one name, or the names of a tuple
  bool tuple = false;
  std::string attr;  // `names[0].attr` when not empty
};

struct Node;

// A macro, or the body of a call block (`caller`).
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<std::unique_ptr<Expr>> defaults;  // per param; null = none
  std::vector<Node> body;
};

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kFor,          // for target in expr [if filter]: body [else else_body]
    kIf,           // branches, else_body
    kSet,          // set target = expr
    kSetBlock,     // set target [| expr filters]: body
    kMacro,        // macro
    kCallBlock,    // call [(macro params)] expr: macro body
    kFilterBlock,  // filter expr: body
    kWith,         // with targets = values: body
    kBreak,
    kContinue,
    kGeneration,  // transformers' {% generation %}: renders its body
  };
  Kind kind = Kind::kText;
  std::string text;                  // kText
  std::unique_ptr<Expr> expr;        // kOutput, kFor (the iterable), kSet, kCallBlock (the call),
                                     // kSetBlock / kFilterBlock (the filters, over kBlockInput)
  std::unique_ptr<Expr> filter;      // kFor: `if` condition
  Target target;                     // kFor, kSet, kSetBlock
  std::vector<Target> with_targets;  // kWith
  std::vector<std::unique_ptr<Expr>> with_values;
  std::vector<Node> body;
  std::vector<Node> else_body;  // kFor else, kIf else
  struct Branch {
    std::unique_ptr<Expr> condition;
    std::vector<Node> body;
  };
  std::vector<Branch> branches;     // kIf: if, elif...
  std::shared_ptr<MacroDef> macro;  // kMacro, kCallBlock (the caller)
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

// Splits the source into text and tags (`{% raw %}` bodies become text). The source's line
// endings are normalised to "\n" and one trailing newline is dropped, as jinja2 does.
std::vector<Segment> SplitSegments(std::string_view src);
// Applies `-` markers and the Hugging Face environment's trim_blocks / lstrip_blocks.
void ApplyWhitespaceControl(std::vector<Segment>& segs);
// Segments, whitespace control and statements (chat_template_parse.cc); throws ParseError.
std::vector<Node> ParseTemplate(std::string_view source);

struct Token {
  enum class Kind { kName, kString, kNumber, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  Value value;
};

// The tokens of an expression or statement, ending with a kEnd token.
std::vector<Token> Tokenize(std::string_view s, int line);

// ---- filters, tests, methods, globals (chat_template_filters.cc, chat_template_methods.cc) --

bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);
Value ApplyFilter(const std::string& name, const Value& v, const CallArgs& args, Budget& budget);
bool ApplyTest(const std::string& name, const Value& v, const CallArgs& args, Budget& budget);
// `self.name(args)` for the methods of str, dict and the loop; nullopt-like: `found` false when
// `self` has no such method.
Value CallMethod(const Value& self, const std::string& name, const CallArgs& args, Budget& budget,
                 bool* found);
// Whether `self.name` is a method (so that `d.items` is the method, as in Python).
bool HasMethod(const Value& self, const std::string& name);
// str.replace(from, to, count) (count < 0: all).
std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count, Budget& budget);
// `s % args` (printf-style formatting).
std::string PercentFormat(const std::string& format, const Value& args);

// ---- operators (chat_template_operators.cc) --------------------------------------------------

// `a op b` for + - * / // % ** (op "%" on a string formats it).
Value Arithmetic(const std::string& op, const Value& a, const Value& b, Budget& budget);
// `a op b` for == != < > <= >= in, "not in".
bool Compare(const std::string& op, const Value& a, const Value& b);
bool Contains(const Value& container, const Value& item);
// base[start:stop:step] of a list, tuple or string (by code points).
Value Slice(const Value& base, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step, Budget& budget);

// ---- globals (chat_template_globals.cc) ------------------------------------------------------

// range, namespace, dict, raise_exception, strftime_now. Namespaces made are recorded in
// `namespaces` (the renderer empties them at the end: a namespace may hold itself).
void AddGlobals(DictData* globals, Budget* budget,
                std::vector<std::weak_ptr<DictData>>* namespaces);

// Jinja2's getattr / getitem: `obj.name` and `obj[key]`.
Value GetAttr(const Value& obj, const std::string& name);
Value GetItem(const Value& obj, const Value& key);

// ---- rendering (chat_template_eval.cc) -------------------------------------------------------

StatusOr<std::string> RenderProgram(const Program& program, Value context);

}  // namespace llm::chat_template_internal
