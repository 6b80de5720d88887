// Chat template engine, part 1: splitting the source into text and tags (with the Hugging Face
// whitespace rules) and tokenizing expressions.
#include <cctype>

#include "common/chat_template_ast.h"

namespace llm::chat_template_internal {

[[noreturn]] void SyntaxError(int line, const std::string& what) {
  throw ParseError{false, "chat template line " + std::to_string(line) + ": " + what};
}
[[noreturn]] void UnsupportedSyntax(int line, const std::string& what) {
  throw ParseError{
      true, "chat template line " + std::to_string(line) + ": unsupported syntax (" + what + ")"};
}

namespace {

// ---- segments ----------------------------------------------------------------------------

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

}  // namespace

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
    if (end == std::string_view::npos) SyntaxError(line, "a tag is never closed");
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

namespace {

bool IsBlockTag(const Segment& s) {
  return s.kind == Segment::Kind::kStmt || s.kind == Segment::Kind::kComment;
}

}  // namespace

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

namespace {

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
  if (i >= s.size()) SyntaxError(line, "unterminated string literal");
  ++i;
  return out;
}

}  // namespace

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
        SyntaxError(line, "unexpected character '" + op + "'");
      }
      out.push_back({Token::Kind::kOp, op, nullptr});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, "", nullptr});
  return out;
}

}  // namespace llm::chat_template_internal
