#include "common/grammar.h"

#include <map>
#include <string>

namespace llm {

uint32_t GrammarBuilder::NewRule() {
  rules_.emplace_back();
  if (rules_.size() > kMaxGrammarRules) too_large_ = true;
  return static_cast<uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::AddAlternative(uint32_t rule, const Sequence& seq) {
  symbols_ += seq.size() + 1;
  if (symbols_ > kMaxGrammarElements) {
    too_large_ = true;
    return;  // keep memory bounded; Build fails
  }
  rules_[rule].push_back(seq);
}

uint32_t GrammarBuilder::Rule(const std::vector<Sequence>& alternatives) {
  const uint32_t r = NewRule();
  for (const Sequence& alt : alternatives) AddAlternative(r, alt);
  return r;
}

GrammarBuilder::Symbol GrammarBuilder::Bytes(const ByteSet& set) {
  // Few distinct sets exist (one per character class), so a linear search is cheap enough for
  // the rare new set, and literals (single bytes) go through Byte's cache.
  for (size_t i = 0; i < sets_.size(); ++i) {
    if (sets_[i] == set) return {GrammarElement::kBytes, static_cast<uint32_t>(i)};
  }
  sets_.push_back(set);
  return {GrammarElement::kBytes, static_cast<uint32_t>(sets_.size() - 1)};
}

GrammarBuilder::Symbol GrammarBuilder::Byte(uint8_t b) {
  ByteSet s;
  s.Add(b);
  return Bytes(s);
}

GrammarBuilder::Symbol GrammarBuilder::Range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.AddRange(lo, hi);
  return Bytes(s);
}

void GrammarBuilder::AppendLiteral(std::string_view text, Sequence* seq) {
  for (char c : text) seq->push_back(Byte(static_cast<uint8_t>(c)));
}

GrammarBuilder::Sequence GrammarBuilder::Literal(std::string_view text) {
  Sequence seq;
  AppendLiteral(text, &seq);
  return seq;
}

uint32_t GrammarBuilder::Repeat(const Sequence& item, int min, int max) {
  // The optional tail first: tail ::= item tail | "" (unbounded), or a chain of max - min
  // optional items, each rule ending in a reference to the next (a tail call for the matcher).
  uint32_t tail = NewRule();
  if (max < 0) {
    Sequence loop = item;
    loop.push_back(Ref(tail));
    AddAlternative(tail, loop);
    AddAlternative(tail, {});
  } else {
    AddAlternative(tail, {});
    for (int i = min; i < max && !too_large_; ++i) {
      const uint32_t next = NewRule();
      Sequence more = item;
      more.push_back(Ref(tail));
      AddAlternative(next, more);
      AddAlternative(next, {});
      tail = next;
    }
  }
  Sequence whole;
  for (int i = 0; i < min && !too_large_; ++i) {
    whole.insert(whole.end(), item.begin(), item.end());
    if (whole.size() > kMaxGrammarElements) too_large_ = true;
  }
  if (too_large_) return tail;
  whole.push_back(Ref(tail));
  return Rule({whole});
}

StatusOr<Grammar> GrammarBuilder::Build(uint32_t root) {
  if (too_large_) {
    return OutOfRange("the grammar needs more than " + std::to_string(kMaxGrammarElements) +
                      " elements or " + std::to_string(kMaxGrammarRules) +
                      " rules (schema too large: lower maxLength / maxItems or simplify it)");
  }
  Grammar g;
  g.root = root;
  g.byte_sets = sets_;
  g.rules.resize(rules_.size());
  g.elements.reserve(symbols_);
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r].empty()) {
      return Internal("grammar rule " + std::to_string(r) + " has no alternative");
    }
    for (const Sequence& alt : rules_[r]) {
      g.rules[r].push_back(static_cast<uint32_t>(g.elements.size()));
      for (const Symbol& s : alt) {
        if (s.kind == GrammarElement::kRule && s.arg >= rules_.size()) {
          return Internal("grammar rule " + std::to_string(r) + " refers to a missing rule");
        }
        g.elements.push_back({s.kind, s.arg});
      }
      g.elements.push_back({GrammarElement::kEnd, 0});
    }
  }
  if (root >= g.rules.size()) return Internal("grammar root is not a rule");
  return g;
}

}  // namespace llm
