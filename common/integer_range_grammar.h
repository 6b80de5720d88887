// Integers between bounds as a byte grammar (JSON Schema minimum / maximum /
// exclusiveMinimum / exclusiveMaximum on "type": "integer"): an exact digit-range grammar, as
// llama.cpp's json-schema-to-grammar (_generate_min_max_int), so every generated integer is in
// range and every integer in range can be generated.
#pragma once

#include <cstdint>
#include <optional>

#include "common/grammar.h"

namespace llm {

// Bounds past this magnitude are refused by the schema compiler.
constexpr int64_t kMaxIntegerBound = 1000000000000000000;  // 10^18

// Adds to `b` a rule matching the decimal integers n with min <= n <= max (no bound: nullopt),
// written as JSON writes them: no '+', no leading zeros, no "-0". An unbounded side has at most
// 16 digits (as the schema compiler's plain integers), or as many as the other bound has.
// Requires min <= max when both are set, and |bounds| <= kMaxIntegerBound.
uint32_t IntegerRangeRule(std::optional<int64_t> min, std::optional<int64_t> max,
                          GrammarBuilder* b);

}  // namespace llm
