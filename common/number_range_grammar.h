// Numbers between decimal bounds, and integers and decimals that are multiples of N or of
// N·10^-k, as byte grammars (JSON Schema minimum / maximum / exclusiveMinimum /
// exclusiveMaximum on "type": "number", and multipleOf). Exact: bounds are compared as decimal
// strings, never as doubles, so a bound 0.1 means 0.1; every text the grammar accepts is in range,
// and every number in range that has the emitted form is accepted.
//
// The emitted form of a bounded number: an optional '-', a canonical integer part (no leading
// zeros), and an optional fraction of 1..max_fraction_digits digits; no exponent, no negative
// zero ("-0", "-0.0"). Trailing zeros in the fraction are allowed ("1.50").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/grammar.h"
#include "common/status.h"

namespace llm {

// Digits after the decimal point of a bounded number (and of a decimal multipleOf N·10^-k).
constexpr int kMaxNumberFractionDigits = 15;
// A decimal bound may have this many digits after the point (more is an error, 1e-300).
constexpr int kMaxBoundFractionDigits = 30;
// multipleOf: N up to this, on integers and as N·10^-k on numbers (a modulo-N digit automaton,
// about 32 * N grammar elements per digit of the integer part, and per fraction digit).
constexpr int64_t kMaxMultipleOf = 1000;

// An exact decimal: sign, integer part, fraction digits without trailing zeros. Zero is never
// negative.
struct Decimal {
  bool negative = false;
  uint64_t integer = 0;
  std::string fraction;
};

// Parses a JSON number's text ("-12.5e-3", as nlohmann dumps a double: the shortest text that
// reads back as it). Errors name what is wrong: past 10^18, or more than kMaxBoundFractionDigits
// digits after the point once the exponent is applied.
StatusOr<Decimal> ParseDecimal(std::string_view text);
// -1, 0, 1.
int CompareDecimal(const Decimal& a, const Decimal& b);

struct DecimalBound {
  Decimal value;
  bool exclusive = false;
};

// Adds to `b` a rule matching the numbers x with min <= x <= max (strict where exclusive; no
// bound: nullopt) in the form above, with at most `max_fraction_digits` (0..15) digits after the
// point. An unbounded side has at most 16 integer digits. nullopt when no such number exists.
std::optional<uint32_t> NumberRangeRule(const std::optional<DecimalBound>& min,
                                        const std::optional<DecimalBound>& max,
                                        int max_fraction_digits, GrammarBuilder* b);

// As NumberRangeRule, only the multiples of multiple_of·10^-max_fraction_digits (multiple_of
// 1..kMaxMultipleOf, max_fraction_digits 0..15): x with x·10^max_fraction_digits an integer
// that multiple_of divides. Exact the same way: every text it accepts is a multiple in range,
// and every multiple in range is accepted in each spelling of the form above with 0 to
// max_fraction_digits digits after the point (2.5 and 2.50 for multiple_of 25 and 2 digits;
// 2.500 never). A modulo-N automaton over the digits, the remainder after a fraction of j
// digits scaled by 10^(max - j) (the fraction padded with zeros). nullopt when no such number
// exists.
std::optional<uint32_t> DecimalMultipleRule(const std::optional<DecimalBound>& min,
                                            const std::optional<DecimalBound>& max,
                                            int max_fraction_digits, int64_t multiple_of,
                                            GrammarBuilder* b);

// Adds to `b` a rule matching the integers n with min <= n <= max that are multiples of
// `multiple_of` (1..kMaxMultipleOf), canonical as IntegerRangeRule's (no "-0", no leading
// zeros; an unbounded side has at most 16 digits). nullopt when there is none.
std::optional<uint32_t> IntegerMultipleRule(std::optional<int64_t> min, std::optional<int64_t> max,
                                            int64_t multiple_of, GrammarBuilder* b);

}  // namespace llm
