// A context-free grammar over bytes: the form in which structured output (a JSON Schema, "any
// JSON object", a tool call) is enforced while decoding. Byte-level because tokens are byte
// strings (a byte-level BPE token can end inside a UTF-8 character); the grammars we build spell
// UTF-8 out, so whatever a grammar accepts is valid UTF-8.
//
// Shape (as llama.cpp's GBNF after parsing): a rule is a list of alternatives, an alternative a
// sequence of elements ending in kEnd, an element either a set of bytes or a reference to a
// rule. Repetition is built from right-recursive rules (Repeat), which the matcher runs as tail
// calls, so a long string or array does not deepen its stacks.
//
// Bounded: GrammarBuilder::Build refuses grammars beyond kMaxGrammarElements elements or
// kMaxGrammarRules rules, so a hostile schema cannot make the engine build a huge automaton.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace llm {

constexpr size_t kMaxGrammarElements = 1 << 20;
constexpr size_t kMaxGrammarRules = 1 << 18;

// 256 bits: byte b is in the set when bit b is set.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool Contains(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void Add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void AddRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct GrammarElement {
  enum Kind : uint8_t { kEnd, kBytes, kRule };
  Kind kind = kEnd;
  uint32_t arg = 0;  // kBytes: index into Grammar::byte_sets; kRule: the rule
};

struct Grammar {
  std::vector<GrammarElement> elements;      // every alternative, each ending in kEnd
  std::vector<std::vector<uint32_t>> rules;  // rule -> where its alternatives start in elements
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;
};

class GrammarBuilder {
 public:
  struct Symbol {
    GrammarElement::Kind kind;
    uint32_t arg;
  };
  using Sequence = std::vector<Symbol>;

  uint32_t NewRule();
  // Adds `seq` as one alternative of `rule` (an empty seq matches the empty string).
  void AddAlternative(uint32_t rule, const Sequence& seq);
  // A new rule with the given alternatives.
  uint32_t Rule(const std::vector<Sequence>& alternatives);

  Symbol Bytes(const ByteSet& set);
  Symbol Byte(uint8_t b);
  Symbol Range(uint8_t lo, uint8_t hi);
  static Symbol Ref(uint32_t rule) { return {GrammarElement::kRule, rule}; }
  // Appends one byte symbol per byte of `text`.
  void AppendLiteral(std::string_view text, Sequence* seq);
  Sequence Literal(std::string_view text);
  // `item` repeated min..max times (max < 0: no upper bound), as one rule.
  uint32_t Repeat(const Sequence& item, int min, int max);

  // Fails (OutOfRange) when the grammar grew past the limits, or a rule has no alternative.
  StatusOr<Grammar> Build(uint32_t root);
  // The grammar grew past the limits (Build will fail): callers building big parts stop early.
  bool too_large() const { return too_large_; }

 private:
  std::vector<std::vector<Sequence>> rules_;
  std::vector<ByteSet> sets_;
  size_t symbols_ = 0;
  bool too_large_ = false;
};

// Whether `text` is in the language of `g` (a whole-string check; tests and tools).
bool GrammarAccepts(const Grammar& g, std::string_view text);

}  // namespace llm
