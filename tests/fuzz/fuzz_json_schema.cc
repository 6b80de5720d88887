// Fuzz target: a JSON Schema (response_format / tool parameters, from any client) -> grammar
// -> matcher. Any schema compiles or is an InvalidArgument/OutOfRange naming the problem; a
// compiled grammar runs over the same bytes (as a would-be output) and a walk choosing bytes
// from the input, with bounded memory and time; never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/grammar_matcher.h"
#include "common/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // As the coordinator: deeper texts are refused before parsing.
  if (!llm::JsonTextNestingAtMost(text, llm::kMaxSchemaTextDepth)) return 0;
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto grammar = schema.is_discarded() ? llm::JsonObjectGrammar() : llm::JsonSchemaGrammar(schema);
  if (!grammar.ok()) return 0;
  auto g = std::make_shared<llm::Grammar>(std::move(*grammar));
  llm::GrammarMatcher m(g);
  (void)m.Consume(text);
  (void)m.Accepting(m.state());
  // A walk: at each step take the first byte at or after the next input byte that the grammar
  // allows (so the walk goes deep into the grammar whatever the input).
  llm::GrammarMatcher walk(g);
  for (size_t i = 0; i < size && i < 512; ++i) {
    const auto s = walk.state();
    for (int k = 0; k < 256; ++k) {
      const uint8_t b = static_cast<uint8_t>(data[i] + k);
      if (walk.Advance(s, b) != llm::GrammarMatcher::kDead) {
        const char c = static_cast<char>(b);
        (void)walk.Consume(std::string_view(&c, 1));
        break;
      }
    }
    walk.Trim();
  }
  return 0;
}
