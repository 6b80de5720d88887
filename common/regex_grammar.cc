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

class RegexCompiler {
 public:
  RegexCompiler(std::string_view pattern, RegexTarget target, GrammarBuilder* b)
      : p_(pattern), json_(target == RegexTarget::kJsonString), b_(*b) {}

  StatusOr<uint32_t> Compile() {
    if (p_.size() > kMaxRegexBytes) {
      return InvalidArgument("the pattern is longer than " + std::to_string(kMaxRegexBytes) +
                             " bytes");
    }
    if (!utf8::IsValid(p_)) return InvalidArgument("the pattern is not valid UTF-8");
    LLM_ASSIGN_OR_RETURN(Piece whole, ParseAlternation(0));
    if (pos_ < p_.size()) return Fail("unbalanced ')'", pos_);
    if (whole.cost > kMaxRegexExpansion) return TooLarge(0);
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
  };

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
      out.cost += atom.cost;
      out.fixed = out.fixed && atom.fixed;
      out.len += atom.len;
      if (out.cost > kMaxRegexExpansion) return TooLarge(start);
    }
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
    if (const auto it = cache_.find(set); it != cache_.end()) return Piece{it->second, 1, true, 1};
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
    return Piece{std::move(result), 1, true, 1};
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
