// Fuzz target: a regex (guided_regex / structured_outputs.regex / a JSON Schema "pattern", from
// any client) -> grammar -> matcher. The first byte picks the target (even: text, odd: inside a
// JSON string); any pattern compiles or is an InvalidArgument naming the construct; a compiled
// grammar runs over the pattern's own bytes and a walk choosing bytes from the input, with
// bounded memory and time; never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/grammar_matcher.h"
#include "common/regex_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto target = data[0] % 2 ? llm::RegexTarget::kJsonString : llm::RegexTarget::kText;
  const std::string_view pattern(reinterpret_cast<const char*>(data + 1), size - 1);
  llm::GrammarBuilder b;
  auto root = llm::RegexRule(pattern, target, &b);
  if (!root.ok()) return 0;
  auto grammar = b.Build(*root);
  if (!grammar.ok()) return 0;
  auto g = std::make_shared<llm::Grammar>(std::move(*grammar));
  llm::GrammarMatcher m(g);
  (void)m.Consume(pattern);
  (void)m.Accepting(m.state());
  // A walk: at each step the first byte at or after the next input byte that the grammar takes.
  llm::GrammarMatcher walk(g);
  for (size_t i = 0; i < size && i < 512; ++i) {
    const auto s = walk.state();
    if (walk.Finished(s)) break;
    for (int k = 0; k < 256; ++k) {
      const uint8_t c = static_cast<uint8_t>(data[i] + k);
      if (walk.Advance(s, c) != llm::GrammarMatcher::kDead) {
        (void)walk.Consume(std::string_view(reinterpret_cast<const char*>(&c), 1));
        break;
      }
    }
    walk.Trim();
  }
  return 0;
}
