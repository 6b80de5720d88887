// Chat template engine, part 1: splitting the source into text and tags (with the Hugging Face
// whitespace rules) and tokenizing expressions.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "common/chat_template_ast.h"
#include "common/utf8.h"

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

// Position of `close` at or after `pos`; in expression and statement tags, not inside quoted
// strings or brackets.
size_t FindClose(std::string_view src, size_t pos, std::string_view close, bool quotes) {
  char quote = 0;
  int depth = 0;  // open brackets
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
    // Like jinja2's lexer, a tag ends only outside brackets: `{{ {'a': {'b': 1}} }}`.
    if (depth == 0 && src.compare(i, close.size(), close) == 0) return i;
    if (quotes && (c == '(' || c == '[' || c == '{')) ++depth;
    if (quotes && (c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  return std::string_view::npos;
}

}  // namespace

namespace {

// jinja2 lexes the source with "\r\n" and "\r" turned into "\n" and without its last newline
// (keep_trailing_newline=False).
std::string NormalizeNewlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string_view TrimAscii(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Finds `{% endraw %}` (with optional `-`/`+` markers) at or after `pos`: its start, and the
// segment it becomes.
size_t FindEndRaw(std::string_view src, size_t pos, Segment* seg) {
  for (size_t at = src.find("{%", pos); at != std::string_view::npos; at = src.find("{%", at + 2)) {
    size_t i = at + 2;
    Segment s;
    s.kind = Segment::Kind::kComment;
    if (i < src.size() && (src[i] == '-' || src[i] == '+'))
      (src[i++] == '-' ? s.strip_left : s.plus_left) = true;
    const size_t close = src.find("%}", i);
    if (close == std::string_view::npos) return std::string_view::npos;
    size_t inner_end = close;
    if (inner_end > i && (src[inner_end - 1] == '-' || src[inner_end - 1] == '+')) {
      (src[inner_end - 1] == '-' ? s.strip_right : s.plus_right) = true;
      --inner_end;
    }
    if (TrimAscii(src.substr(i, inner_end - i)) == "endraw") {
      s.text = std::string(src.substr(at, close + 2 - at));
      *seg = std::move(s);
      return at;
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<Segment> SplitSegments(std::string_view source) {
  const std::string normalized = NormalizeNewlines(source);
  const std::string_view src = normalized;
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
    pos = end + 2;
    if (seg.kind == Segment::Kind::kStmt && TrimAscii(seg.text) == "raw") {
      // {% raw %}...{% endraw %}: the body is text; the tags act like comments, except that no
      // newline is trimmed after `{% raw %}`.
      Segment end_seg;
      const size_t end_at = FindEndRaw(src, pos, &end_seg);
      if (end_at == std::string_view::npos) SyntaxError(seg.line, "missing '{% endraw %}'");
      seg.kind = Segment::Kind::kComment;
      seg.plus_right = !seg.strip_right;
      out.push_back(std::move(seg));
      out.push_back({Segment::Kind::kText, std::string(src.substr(pos, end_at - pos))});
      out.back().line = line;
      line += CountLines(src.substr(pos, end_at + end_seg.text.size() - pos));
      end_seg.line = line;
      pos = end_at + end_seg.text.size();
      end_seg.text.clear();
      out.push_back(std::move(end_seg));
      continue;
    }
    out.push_back(std::move(seg));
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

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A Python string literal's escapes (jinja2 decodes them like Python).
std::string ReadString(std::string_view s, size_t& i, int line) {
  const char quote = s[i++];
  std::string out;
  while (i < s.size() && s[i] != quote) {
    char c = s[i++];
    if (c != '\\' || i >= s.size()) {
      out += c;
      continue;
    }
    const char e = s[i++];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'a':
        out += '\a';
        break;
      case '0':
        out += '\0';
        break;
      case '\n':
        break;  // line continuation
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (int k = 0; k < digits; ++k) {
          const int h = i < s.size() ? HexValue(s[i]) : -1;
          if (h < 0) SyntaxError(line, std::string("bad \\") + e + " escape in a string literal");
          cp = cp * 16 + static_cast<char32_t>(h);
          ++i;
        }
        utf8::Append(cp, &out);
        break;
      }
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      default:  // Python keeps unknown escapes as written
        out += '\\';
        out += e;
    }
  }
  if (i >= s.size()) SyntaxError(line, "unterminated string literal");
  ++i;
  return out;
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// Digits with single underscores between them (Python's 1_000).
size_t ScanDigits(std::string_view s, size_t j) {
  while (j < s.size() && (IsDigit(s[j]) || (s[j] == '_' && j + 1 < s.size() && IsDigit(s[j + 1]) &&
                                            j > 0 && IsDigit(s[j - 1])))) {
    ++j;
  }
  return j;
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
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i)), Value()});
      i = j;
    } else if (IsDigit(static_cast<char>(c))) {
      size_t j = ScanDigits(s, i);
      bool is_float = false;
      // A fraction needs a digit after the dot (`x.0` after a name is an item, see Postfix).
      if (j + 1 < s.size() && s[j] == '.' && IsDigit(s[j + 1]) &&
          !(out.size() && out.back().kind == Token::Kind::kOp && out.back().text == ".")) {
        is_float = true;
        j = ScanDigits(s, j + 1);
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && IsDigit(s[k])) {
          is_float = true;
          j = ScanDigits(s, k);
        }
      }
      std::string num(s.substr(i, j - i));
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      Value v;
      if (is_float) {
        v = Value::Float(std::strtod(num.c_str(), nullptr));
      } else {
        errno = 0;
        const long long x = std::strtoll(num.c_str(), nullptr, 10);
        if (errno == ERANGE) SyntaxError(line, "integer literal out of range: " + num);
        v = Value::Int(x);
      }
      out.push_back({Token::Kind::kNumber, num, v});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string str = ReadString(s, i, line);
      out.push_back({Token::Kind::kString, str, Value::Str(str)});
    } else {
      std::string op(1, static_cast<char>(c));
      for (const char* two : kTwoCharOps) {
        if (s.compare(i, 2, two) == 0) op = two;
      }
      if (std::string_view("()[]{}.,|~+-*/%<>=:!").find(op[0]) == std::string_view::npos ||
          op == "!") {
        SyntaxError(line, "unexpected character '" + op + "'");
      }
      out.push_back({Token::Kind::kOp, op, Value()});
      i += op.size();
    }
  }
  out.push_back({Token::Kind::kEnd, "", Value()});
  return out;
}

}  // namespace llm::chat_template_internal
