#include "common/regex_grammar.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/utf8.h"

namespace llm {
namespace {

using Seq = GrammarBuilder::Sequence;
using CpRange = std::pair<char32_t, char32_t>;
using CpSet = std::vector<CpRange>;  // sorted, disjoint, not adjacent
constexpr char32_t kMaxCp = 0x10FFFF;

CpSet Normalize(CpSet s) {
  std::sort(s.begin(), s.end());
  CpSet out;
  for (const CpRange& r : s) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CpSet Negate(const CpSet& s) {
  CpSet out;
  char32_t next = 0;
  for (const CpRange& r : s) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return out;
}

// \d \w \s (ASCII), upper case: the complement.
CpSet ClassEscape(char c) {
  CpSet s;
  switch (c | 0x20) {
    case 'd':
      s = {{'0', '9'}};
      break;
    case 'w':
      s = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
      break;
    default:
      s = {{'\t', '\r'}, {' ', ' '}};
      break;
  }
  return c >= 'a' ? s : Negate(s);
}

bool IsClassEscape(char c) {
  return std::string_view("dwsDWS").find(c) != std::string_view::npos;
}

// The UTF-8 encodings of the code points lo..hi as sequences of byte ranges (the split of Rust's
// regex-syntax utf8 module): each sequence is a product of byte ranges. Surrogates are left out.
void Utf8Sequences(char32_t lo, char32_t hi,
                   std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) Utf8Sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) Utf8Sequences(0xE000, hi, out);
    return;
  }
  for (char32_t max : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= max && hi > max) {
      Utf8Sequences(lo, max, out);
      Utf8Sequences(max + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8::Encode(lo), b = utf8::Encode(hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) {
    seq.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
  }
  out->push_back(std::move(seq));
}

// How a character is written inside a JSON string ("" when it needs no escape).
std::string JsonEscape(char32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (cp >= 0x20) return "";
  static const char kHex[] = "0123456789abcdef";
  return std::string("\\u00") + kHex[cp >> 4] + kHex[cp & 15];
}

// The pattern as a tree (for the length-bounded product, RegexLengthRule): a character set, a
// concatenation, an alternation, or a counted repetition {min,max} (max < 0: unbounded).
struct RegexNode {
  enum Kind { kSet, kCat, kAlt, kRepeat } kind = kCat;
  CpSet set;
  std::vector<int> kids;
  int64_t min = 1, max = 1;
};

class RegexCompiler {
 public:
  RegexCompiler(std::string_view pattern, RegexTarget target, GrammarBuilder* b)
      : p_(pattern), json_(target == RegexTarget::kJsonString), b_(*b) {}

  const std::vector<RegexNode>& nodes() const { return nodes_; }
  int root() const { return root_; }
  // The symbols of one character of `set` (as the pattern's characters are compiled).
  StatusOr<Seq> SetSymbols(const CpSet& set) {
    LLM_ASSIGN_OR_RETURN(Piece p, SetPiece(set, 0));
    return p.seq;
  }

  StatusOr<uint32_t> Compile() {
    if (p_.size() > kMaxRegexBytes) {
      return InvalidArgument("the pattern is longer than " + std::to_string(kMaxRegexBytes) +
                             " bytes");
    }
    if (!utf8::IsValid(p_)) return InvalidArgument("the pattern is not valid UTF-8");
    LLM_ASSIGN_OR_RETURN(Piece whole, ParseAlternation(0));
    if (pos_ < p_.size()) return Fail("unbalanced ')'", pos_);
    if (whole.cost > kMaxRegexExpansion) return TooLarge(0);
    root_ = whole.node;
    return b_.Rule({whole.seq});
  }

 private:
  // A compiled part of the pattern: its symbols and its expanded size.
  struct Piece {
    Seq seq;
    uint64_t cost = 0;
    // Every match has `len` characters (for a piece the matcher can be in one place only after
    // a given count of repetitions).
    bool fixed = true;
    uint64_t len = 0;
    int node = -1;  // in nodes_
  };

  int AddNode(RegexNode n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }

  Status Fail(const std::string& what, size_t at) const {
    return InvalidArgument(what + " (at offset " + std::to_string(at) + ")");
  }
  bool At(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  bool AtEnd() const { return pos_ >= p_.size(); }

  StatusOr<Piece> ParseAlternation(int depth) {
    std::vector<Piece> alts;
    LLM_ASSIGN_OR_RETURN(Piece first, ParseConcat(depth));
    alts.push_back(std::move(first));
    while (At('|')) {
      ++pos_;
      LLM_ASSIGN_OR_RETURN(Piece next, ParseConcat(depth));
      alts.push_back(std::move(next));
    }
    if (alts.size() == 1) return std::move(alts[0]);
    Piece out;
    out.len = alts[0].len;
    std::vector<Seq> seqs;
    RegexNode alt;
    alt.kind = RegexNode::kAlt;
    for (const Piece& a : alts) alt.kids.push_back(a.node);
    out.node = AddNode(std::move(alt));
    for (Piece& a : alts) {
      out.cost += a.cost;
      out.fixed = out.fixed && a.fixed && a.len == out.len;
      seqs.push_back(std::move(a.seq));
    }
    out.seq = {GrammarBuilder::Ref(b_.Rule(seqs))};
    return out;
  }

  StatusOr<Piece> ParseConcat(int depth) {
    Piece out;
    RegexNode cat;
    cat.kind = RegexNode::kCat;
    while (!AtEnd() && !At('|') && !At(')')) {
      const size_t start = pos_;
      if (At('^')) {
        if (start != 0) return Fail("'^' is supported only at the start of the pattern", start);
        ++pos_;
        continue;
      }
      if (At('$')) {
        if (start + 1 != p_.size() || depth != 0) {
          return Fail("'$' is supported only at the end of the pattern", start);
        }
        ++pos_;
        continue;
      }
      LLM_ASSIGN_OR_RETURN(Piece atom, ParseAtom(depth));
      LLM_RETURN_IF_ERROR(ParseQuantifier(&atom));
      out.seq.insert(out.seq.end(), atom.seq.begin(), atom.seq.end());
      cat.kids.push_back(atom.node);
      out.cost += atom.cost;
      out.fixed = out.fixed && atom.fixed;
      out.len += atom.len;
      if (out.cost > kMaxRegexExpansion) return TooLarge(start);
    }
    out.node = AddNode(std::move(cat));
    return out;
  }

  Status TooLarge(size_t at) const {
    return Fail("the pattern expands to more than " + std::to_string(kMaxRegexExpansion) +
                    " elements (lower the counts of {n,m})",
                at);
  }

  // Reads a decimal count at pos_ (none: -1).
  StatusOr<int64_t> ParseCount() {
    const size_t start = pos_;
    int64_t v = -1;
    while (!AtEnd() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      v = (v < 0 ? 0 : v) * 10 + (p_[pos_] - '0');
      if (v > kMaxRegexCount) {
        return Fail("a repetition count above " + std::to_string(kMaxRegexCount), start);
      }
      ++pos_;
    }
    return v;
  }

  // At '{': a counted quantifier {n} {n,} {n,m} {,m} (sets min/max, true), or a literal '{'
  // (false, pos_ unchanged).
  StatusOr<bool> ParseBraces(int64_t* min, int64_t* max) {
    const size_t start = pos_;
    ++pos_;
    LLM_ASSIGN_OR_RETURN(int64_t n, ParseCount());
    int64_t m = n;
    if (At(',')) {
      ++pos_;
      LLM_ASSIGN_OR_RETURN(m, ParseCount());
    }
    if (!At('}') || (n < 0 && m < 0)) {
      pos_ = start;
      return false;
    }
    ++pos_;
    *min = n < 0 ? 0 : n;
    *max = m;  // -1: unbounded ({n,})
    if (*max >= 0 && *max < *min) return Fail("a repetition {n,m} with m < n", start);
    return true;
  }

  StatusOr<bool> ParseOneQuantifier(int64_t* min, int64_t* max) {
    if (AtEnd()) return false;
    switch (p_[pos_]) {
      case '*':
        ++pos_;
        *min = 0, *max = -1;
        return true;
      case '+':
        ++pos_;
        *min = 1, *max = -1;
        return true;
      case '?':
        ++pos_;
        *min = 0, *max = 1;
        return true;
      case '{':
        return ParseBraces(min, max);
      default:
        return false;
    }
  }

  Status ParseQuantifier(Piece* atom) {
    const size_t start = pos_;
    int64_t min = 1, max = 1;
    LLM_ASSIGN_OR_RETURN(bool quantified, ParseOneQuantifier(&min, &max));
    if (!quantified) return Status::Ok();
    if (At('?')) {
      ++pos_;  // lazy: the same language
    } else if (At('+')) {
      return Fail("a possessive quantifier is not supported", pos_);
    }
    const size_t again = pos_;
    int64_t unused_min = 0, unused_max = 0;
    LLM_ASSIGN_OR_RETURN(bool twice, ParseOneQuantifier(&unused_min, &unused_max));
    if (twice) return Fail("multiple repeat (wrap the repeated part in a group)", again);
    const uint64_t times = static_cast<uint64_t>(max < 0 ? min + 1 : std::max<int64_t>(max, 1));
    const uint64_t cost = std::max<uint64_t>(atom->cost, 1) * times;
    if (cost > kMaxRegexExpansion) return TooLarge(start);
    // Counted repetitions of something of variable length are ambiguous (after "aaa",
    // (a|aa){0,9} may be at 2 or 3 repetitions): the matcher follows each way at once, so their
    // size bounds its work per byte.
    if (!atom->fixed && max >= 0 && cost > kMaxRegexAmbiguity) {
      return Fail("a counted repetition of a variable-length part expands to more than " +
                      std::to_string(kMaxRegexAmbiguity) + " elements",
                  start);
    }
    if (min == 1 && max == 1) return Status::Ok();
    RegexNode rep;
    rep.kind = RegexNode::kRepeat;
    rep.kids = {atom->node};
    rep.min = min;
    rep.max = max;
    atom->node = AddNode(std::move(rep));
    const uint32_t rule = b_.Repeat(atom->seq, static_cast<int>(min), static_cast<int>(max));
    atom->seq = {GrammarBuilder::Ref(rule)};
    atom->cost = cost;
    atom->fixed = atom->fixed && min == max;
    atom->len *= static_cast<uint64_t>(min);
    return Status::Ok();
  }

  StatusOr<Piece> ParseAtom(int depth) {
    const size_t start = pos_;
    const char c = p_[pos_];
    switch (c) {
      case '(':
        return ParseGroup(depth);
      case '[': {
        LLM_ASSIGN_OR_RETURN(CpSet set, ParseClass());
        return SetPiece(set, start);
      }
      case '.':
        ++pos_;
        return SetPiece(Negate({{'\n', '\n'}}), start);
      case '*':
      case '+':
      case '?':
        return Fail(std::string("nothing to repeat before '") + c + "'", start);
      case '\\': {
        CpSet set;
        LLM_ASSIGN_OR_RETURN(char32_t cp, ParseEscape(/*in_class=*/false, &set));
        if (!set.empty()) return SetPiece(set, start);
        return SetPiece({{cp, cp}}, start);
      }
      default: {
        const char32_t cp = utf8::Next(p_, &pos_);
        return SetPiece({{cp, cp}}, start);
      }
    }
  }

  StatusOr<Piece> ParseGroup(int depth) {
    const size_t start = pos_;
    if (depth + 1 > kMaxRegexDepth) {
      return Fail("groups nest deeper than " + std::to_string(kMaxRegexDepth), start);
    }
    ++pos_;
    if (At('?')) {
      const std::string_view rest = p_.substr(pos_ + 1);
      auto starts = [&](std::string_view s) { return rest.substr(0, s.size()) == s; };
      if (starts(":")) {
        pos_ += 2;
      } else if (starts("P<") || (starts("<") && !starts("<=") && !starts("<!"))) {
        const size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos) return Fail("unterminated group name", start);
        pos_ = close + 1;
      } else if (starts("=") || starts("!")) {
        return Fail("lookahead '(?" + std::string(1, rest[0]) + "' is not supported", start);
      } else if (starts("<=") || starts("<!")) {
        return Fail("lookbehind '(?" + std::string(rest.substr(0, 2)) + "' is not supported",
                    start);
      } else if (starts("P=")) {
        return Fail("a backreference '(?P=' is not supported", start);
      } else if (starts("#")) {
        return Fail("a comment group '(?#' is not supported", start);
      } else if (starts(">")) {
        return Fail("an atomic group '(?>' is not supported", start);
      } else if (starts("(")) {
        return Fail("a conditional group '(?(' is not supported", start);
      } else {
        return Fail("inline flags or an unknown group '(?' are not supported", start);
      }
    }
    LLM_ASSIGN_OR_RETURN(Piece inner, ParseAlternation(depth + 1));
    if (!At(')')) return Fail("missing ')' for the group opened", start);
    ++pos_;
    return inner;
  }

  // At '[': a class, as a set of code points.
  StatusOr<CpSet> ParseClass() {
    const size_t start = pos_;
    ++pos_;
    const bool negate = At('^');
    if (negate) ++pos_;
    CpSet set;
    for (bool first = true;; first = false) {
      if (AtEnd()) return Fail("missing ']' for the class opened", start);
      if (At(']') && !first) {
        ++pos_;
        break;
      }
      const size_t item = pos_;
      CpSet escaped;
      LLM_ASSIGN_OR_RETURN(char32_t lo, ClassChar(&escaped));
      if (!escaped.empty()) {
        set.insert(set.end(), escaped.begin(), escaped.end());
        continue;
      }
      if (At('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        LLM_ASSIGN_OR_RETURN(char32_t hi, ClassChar(&escaped));
        if (!escaped.empty()) return Fail("a class range ends in a class escape", item);
        if (hi < lo) return Fail("a class range out of order", item);
        set.push_back({lo, hi});
      } else {
        set.push_back({lo, lo});
      }
    }
    set = Normalize(std::move(set));
    return negate ? Negate(set) : set;
  }

  // One character of a class (or a class escape such as \d, into *set).
  StatusOr<char32_t> ClassChar(CpSet* set) {
    if (At('\\')) return ParseEscape(/*in_class=*/true, set);
    return utf8::Next(p_, &pos_);
  }

  StatusOr<char32_t> ParseHex(size_t digits, size_t at) {
    if (pos_ + digits > p_.size()) return Fail("a truncated hexadecimal escape", at);
    char32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char h = p_[pos_ + i];
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') d = (h | 0x20) - 'a' + 10;
      if (d < 0) return Fail("a bad hexadecimal escape", at);
      v = v * 16 + static_cast<char32_t>(d);
    }
    pos_ += digits;
    if (v > kMaxCp) return Fail("an escape past U+10FFFF", at);
    return v;
  }

  // \uXXXX (a surrogate pair as one character), \u{X...}.
  StatusOr<char32_t> ParseUnicodeEscape(size_t at) {
    if (At('{')) {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos || close == pos_ + 1 || close - pos_ - 1 > 6) {
        return Fail("a bad \\u{...} escape", at);
      }
      ++pos_;
      LLM_ASSIGN_OR_RETURN(char32_t v, ParseHex(close - pos_, at));
      ++pos_;
      if (v >= 0xD800 && v <= 0xDFFF) return Fail("a UTF-16 surrogate escape", at);
      return v;
    }
    LLM_ASSIGN_OR_RETURN(char32_t v, ParseHex(4, at));
    if (v >= 0xDC00 && v <= 0xDFFF) return Fail("an unpaired UTF-16 surrogate escape", at);
    if (v >= 0xD800 && v <= 0xDBFF) {
      if (p_.substr(pos_, 2) != "\\u") return Fail("an unpaired UTF-16 surrogate escape", at);
      pos_ += 2;
      LLM_ASSIGN_OR_RETURN(char32_t low, ParseHex(4, at));
      if (low < 0xDC00 || low > 0xDFFF) return Fail("an unpaired UTF-16 surrogate escape", at);
      v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
    }
    return v;
  }

  // After a backslash: a character, or a class escape (into *set, returning 0).
  StatusOr<char32_t> ParseEscape(bool in_class, CpSet* set) {
    const size_t at = pos_;
    ++pos_;
    if (AtEnd()) return Fail("the pattern ends with '\\'", at);
    const char c = p_[pos_];
    const std::string name = std::string("'\\") + c + "'";
    if (static_cast<unsigned char>(c) >= 0x80 || !std::isalnum(static_cast<unsigned char>(c))) {
      return utf8::Next(p_, &pos_);  // an escaped punctuation (or non-ASCII) character
    }
    ++pos_;
    if (IsClassEscape(c)) {
      *set = ClassEscape(c);
      return char32_t{0};
    }
    switch (c) {
      case 'n':
        return char32_t{'\n'};
      case 't':
        return char32_t{'\t'};
      case 'r':
        return char32_t{'\r'};
      case 'f':
        return char32_t{'\f'};
      case 'v':
        return char32_t{'\v'};
      case 'a':
        return char32_t{'\a'};
      case '0':
        if (!AtEnd() && p_[pos_] >= '0' && p_[pos_] <= '7') {
          return Fail("an octal escape is not supported", at);
        }
        return char32_t{0};
      case 'x':
        return ParseHex(2, at);
      case 'u':
        return ParseUnicodeEscape(at);
      case 'U':
        return ParseHex(8, at);
      case 'b':
        if (in_class) return char32_t{'\b'};
        return Fail("a word boundary '\\b' is not supported", at);
      case 'B':
        return Fail("a word boundary '\\B' is not supported", at);
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        return Fail("the anchor " + name + " is not supported (use ^ and $ at the ends)", at);
      case 'k':
        return Fail("a backreference '\\k' is not supported", at);
      case 'p':
      case 'P':
        return Fail("a Unicode property class " + name + " is not supported", at);
      default:
        break;
    }
    if (c >= '1' && c <= '9') return Fail("a backreference " + name + " is not supported", at);
    return Fail("the escape " + name + " is not supported", at);
  }

  // The symbols for one character of `set` (a literal when it has one character).
  StatusOr<Piece> SetPiece(const CpSet& set, size_t at) {
    RegexNode leaf;
    leaf.kind = RegexNode::kSet;
    leaf.set = set;
    const int node = AddNode(std::move(leaf));
    if (const auto it = cache_.find(set); it != cache_.end()) {
      return Piece{it->second, 1, true, 1, node};
    }
    CpSet plain = set;
    std::vector<Seq> alts;
    if (json_) {
      // Characters JSON must escape: each as its escape sequence.
      const CpSet special = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      for (const CpRange& r : set) {
        for (const CpRange& s : special) {
          for (char32_t cp = std::max(r.first, s.first); cp <= std::min(r.second, s.second); ++cp) {
            alts.push_back(b_.Literal(JsonEscape(cp)));
          }
        }
      }
      plain = Normalize(Intersect(set, Negate(Normalize(special))));
    }
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    for (const CpRange& r : plain) Utf8Sequences(r.first, r.second, &seqs);
    // Single-byte sequences merge into one byte set.
    ByteSet ascii;
    bool any_ascii = false;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        ascii.AddRange(s[0].first, s[0].second);
        any_ascii = true;
      } else {
        Seq seq;
        for (const auto& [lo, hi] : s) seq.push_back(b_.Range(lo, hi));
        alts.push_back(std::move(seq));
      }
    }
    if (any_ascii) alts.push_back({b_.Bytes(ascii)});
    if (alts.empty()) return Fail("a class that matches no character", at);
    Seq result = alts.size() == 1 ? alts[0] : Seq{GrammarBuilder::Ref(b_.Rule(alts))};
    cache_.emplace(set, result);
    return Piece{std::move(result), 1, true, 1, node};
  }

  static CpSet Intersect(const CpSet& a, const CpSet& b) {
    CpSet out;
    for (const CpRange& x : a) {
      for (const CpRange& y : b) {
        const char32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
        if (lo <= hi) out.push_back({lo, hi});
      }
    }
    return out;
  }

  std::string_view p_;
  bool json_;
  GrammarBuilder& b_;
  size_t pos_ = 0;
  std::map<CpSet, Seq> cache_;
  std::vector<RegexNode> nodes_;
  int root_ = -1;
};

// The pattern's Glushkov automaton: one state per character set of the expanded pattern (a
// counted repetition repeated out), transitions into a state reading its set.
class Glushkov {
 public:
  explicit Glushkov(const std::vector<RegexNode>& nodes) : nodes_(nodes) {}

  struct Frag {
    bool nullable = true;
    std::vector<int> first, last;
  };

  StatusOr<Frag> Build(int node) {
    const RegexNode& n = nodes_[static_cast<size_t>(node)];
    switch (n.kind) {
      case RegexNode::kSet: {
        if (sets.size() >= kMaxRegexLengthPositions) return TooLarge();
        sets.push_back(n.set);
        follow.emplace_back();
        const int p = static_cast<int>(sets.size()) - 1;
        return Frag{false, {p}, {p}};
      }
      case RegexNode::kCat: {
        Frag out;
        for (int kid : n.kids) {
          LLM_ASSIGN_OR_RETURN(Frag f, Build(kid));
          LLM_ASSIGN_OR_RETURN(out, Concat(std::move(out), std::move(f)));
        }
        return out;
      }
      case RegexNode::kAlt: {
        Frag out;
        out.nullable = false;
        for (int kid : n.kids) {
          LLM_ASSIGN_OR_RETURN(Frag f, Build(kid));
          out.nullable = out.nullable || f.nullable;
          out.first.insert(out.first.end(), f.first.begin(), f.first.end());
          out.last.insert(out.last.end(), f.last.begin(), f.last.end());
        }
        return out;
      }
      case RegexNode::kRepeat:
        break;
    }
    const int kid = n.kids[0];
    Frag out;
    for (int64_t i = 0; i < n.min; ++i) {
      LLM_ASSIGN_OR_RETURN(Frag f, Build(kid));
      if (n.max < 0 && i + 1 == std::max<int64_t>(n.min, 1)) {
        LLM_RETURN_IF_ERROR(Loop(f));  // x{n,}: the last copy repeats
      }
      LLM_ASSIGN_OR_RETURN(out, Concat(std::move(out), std::move(f)));
    }
    if (n.max < 0) {
      if (n.min == 0) {  // x*
        LLM_ASSIGN_OR_RETURN(Frag f, Build(kid));
        LLM_RETURN_IF_ERROR(Loop(f));
        f.nullable = true;
        LLM_ASSIGN_OR_RETURN(out, Concat(std::move(out), std::move(f)));
      }
      return out;
    }
    // The optional copies nest, x(x(x)?)?, so a text has one way through them.
    Frag tail;
    for (int64_t i = n.min; i < n.max; ++i) {
      LLM_ASSIGN_OR_RETURN(Frag f, Build(kid));
      LLM_ASSIGN_OR_RETURN(tail, Concat(std::move(f), std::move(tail)));
      tail.nullable = true;
    }
    return Concat(std::move(out), std::move(tail));
  }

  std::vector<CpSet> sets;               // per state
  std::vector<std::vector<int>> follow;  // per state: the states that may come next

 private:
  static Status TooLarge() {
    return InvalidArgument("the pattern expands to more than " +
                           std::to_string(kMaxRegexLengthPositions) +
                           " characters, too many to combine with a length bound");
  }

  Status Link(const std::vector<int>& from, const std::vector<int>& to) {
    edges_ += from.size() * to.size();
    if (edges_ > kMaxRegexLengthEdges) return TooLarge();
    for (int f : from) {
      auto& out = follow[static_cast<size_t>(f)];
      out.insert(out.end(), to.begin(), to.end());
    }
    return Status::Ok();
  }
  Status Loop(const Frag& f) { return Link(f.last, f.first); }

  StatusOr<Frag> Concat(Frag a, Frag b) {
    LLM_RETURN_IF_ERROR(Link(a.last, b.first));
    Frag out;
    out.nullable = a.nullable && b.nullable;
    out.first = a.first;
    if (a.nullable) out.first.insert(out.first.end(), b.first.begin(), b.first.end());
    out.last = b.last;
    if (b.nullable) out.last.insert(out.last.end(), a.last.begin(), a.last.end());
    return out;
  }

  const std::vector<RegexNode>& nodes_;
  uint64_t edges_ = 0;
};

}  // namespace

StatusOr<uint32_t> RegexRule(std::string_view pattern, RegexTarget target, GrammarBuilder* b) {
  RegexCompiler c(pattern, target, b);
  return c.Compile();
}

StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  GrammarBuilder b;
  LLM_ASSIGN_OR_RETURN(uint32_t root, RegexRule(pattern, RegexTarget::kText, &b));
  return b.Build(root);
}

}  // namespace llm

namespace llm {

StatusOr<uint32_t> RegexLengthRule(std::string_view pattern, RegexTarget target, int min_length,
                                   int max_length, GrammarBuilder* b) {
  // Parsed (and checked, with the same limits as RegexRule) on the side.
  GrammarBuilder scratch;
  RegexCompiler parsed(pattern, target, &scratch);
  LLM_RETURN_IF_ERROR(parsed.Compile().status());
  Glushkov g(parsed.nodes());
  LLM_ASSIGN_OR_RETURN(Glushkov::Frag whole, g.Build(parsed.root()));
  for (auto& f : g.follow) {
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
  }
  std::sort(whole.first.begin(), whole.first.end());
  whole.first.erase(std::unique(whole.first.begin(), whole.first.end()), whole.first.end());
  std::vector<bool> is_last(g.sets.size(), false);
  for (int p : whole.last) is_last[static_cast<size_t>(p)] = true;

  // The product with a count of characters: (state, count), the start state being -1. Without
  // an upper bound the count stops at min_length.
  const int cap = max_length >= 0 ? max_length : min_length;
  const int64_t width = cap + 1;
  auto id = [&](int p, int c) { return (static_cast<int64_t>(p) + 1) * width + c; };
  std::map<int64_t, int> index;  // product state -> dense number
  std::vector<std::pair<int, int>> states;
  std::vector<std::vector<int>> edges;  // dense -> dense successors
  auto visit = [&](int p, int c) -> StatusOr<int> {
    const auto [it, inserted] = index.try_emplace(id(p, c), static_cast<int>(states.size()));
    if (inserted) {
      if (states.size() >= kMaxRegexLengthStates) {
        return InvalidArgument("the pattern and the length bounds need more than " +
                               std::to_string(kMaxRegexLengthStates) +
                               " states (lower the lengths or simplify the pattern)");
      }
      states.push_back({p, c});
      edges.emplace_back();
    }
    return it->second;
  };
  LLM_RETURN_IF_ERROR(visit(-1, 0).status());
  size_t total_edges = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    const auto [p, c] = states[i];
    if (max_length >= 0 && c >= max_length) continue;
    const int next_c = std::min(c + 1, cap);
    const std::vector<int>& next = p < 0 ? whole.first : g.follow[static_cast<size_t>(p)];
    total_edges += next.size();
    if (total_edges > kMaxRegexLengthEdges) {
      return InvalidArgument("the pattern and the length bounds need more than " +
                             std::to_string(kMaxRegexLengthEdges) +
                             " transitions (lower the lengths or simplify the pattern)");
    }
    for (int q : next) {
      LLM_ASSIGN_OR_RETURN(int to, visit(q, next_c));
      edges[i].push_back(to);
    }
  }
  auto accepting = [&](size_t i) {
    const auto [p, c] = states[i];
    return c >= min_length && (p < 0 ? whole.nullable : is_last[static_cast<size_t>(p)]);
  };
  // Only states from which an accepted end is reachable (the matcher must never be led into a
  // dead end).
  std::vector<std::vector<int>> back(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    for (int to : edges[i]) back[static_cast<size_t>(to)].push_back(static_cast<int>(i));
  }
  std::vector<bool> live(states.size(), false);
  std::vector<int> work;
  for (size_t i = 0; i < states.size(); ++i) {
    if (accepting(i)) {
      live[i] = true;
      work.push_back(static_cast<int>(i));
    }
  }
  while (!work.empty()) {
    const int i = work.back();
    work.pop_back();
    for (int from : back[static_cast<size_t>(i)]) {
      if (!live[static_cast<size_t>(from)]) {
        live[static_cast<size_t>(from)] = true;
        work.push_back(from);
      }
    }
  }
  if (!live[0]) {
    return InvalidArgument("no text matching the pattern has a length between the bounds");
  }
  if (b->too_large()) return OutOfRange("the grammar is already too large");
  RegexCompiler emitter(pattern, target, b);
  std::vector<uint32_t> rules(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    if (live[i]) rules[i] = b->NewRule();
  }
  std::vector<Seq> set_symbols(g.sets.size());
  for (size_t i = 0; i < states.size(); ++i) {
    if (!live[i]) continue;
    if (accepting(i)) b->AddAlternative(rules[i], {});
    for (int to : edges[i]) {
      if (!live[static_cast<size_t>(to)]) continue;
      const size_t q = static_cast<size_t>(states[static_cast<size_t>(to)].first);
      if (set_symbols[q].empty()) {
        LLM_ASSIGN_OR_RETURN(set_symbols[q], emitter.SetSymbols(g.sets[q]));
      }
      Seq alt = set_symbols[q];
      alt.push_back(GrammarBuilder::Ref(rules[static_cast<size_t>(to)]));
      b->AddAlternative(rules[i], alt);
    }
  }
  return rules[0];
}

}  // namespace llm
