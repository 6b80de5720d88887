// Regular expressions as byte grammars (common/grammar.h): vLLM's guided_regex /
// structured_outputs.regex and JSON Schema's "pattern". Full-match semantics: the generated text
// as a whole matches the pattern (as vLLM's guided_regex and llama.cpp's / xgrammar's pattern).
//
// The subset (Python re syntax, the one vLLM / outlines users write):
//  - literals (UTF-8, any code point), escapes \n \t \r \f \v \a \0 \xHH \uXXXX (a UTF-16
//    surrogate pair \uD83D\uDE00 is one character) \u{X..} \UXXXXXXXX, and \ before any
//    punctuation;
//  - `.` any character but \n; classes [a-z0-9_] [^...] with ranges over code points (compiled
//    to UTF-8 byte sequences; UTF-16 surrogates are never generated); \d \w \s \D \W \S (ASCII:
//    [0-9], [0-9A-Za-z_], [ \t\n\r\f\v], as xgrammar);
//  - groups (...) (?:...) (?P<name>...) (?<name>...) (captures mean nothing here), alternation |;
//  - quantifiers * + ? {n} {n,} {n,m} {,m}, their lazy forms (same language, so accepted as
//    greedy); a { that does not start a quantifier is a literal (as Python);
//  - ^ only at the very start and $ only at the very end (they change nothing: full match).
// Anything else (backreferences, lookaround, \b, inline flags, possessive quantifiers, \p{..})
// is an InvalidArgument naming the construct and its byte offset in the pattern.
//
// Bounded: the pattern's length, the nesting of groups, each count and the expanded size
// (a counted repetition multiplies the size of what it repeats: (a{100}){1000} is 100000
// elements, refused), and tighter, a counted repetition of a variable-length part (its ways to
// split a text are what the matcher's state sets hold: (a{0,100}){0,600} is refused), so no
// pattern builds a huge grammar or a matcher with huge state sets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/grammar.h"
#include "common/status.h"

namespace llm {

constexpr size_t kMaxRegexBytes = 8192;           // pattern length
constexpr int kMaxRegexDepth = 32;                // nested groups
constexpr int64_t kMaxRegexCount = 1 << 16;       // n and m of {n,m}
constexpr uint64_t kMaxRegexExpansion = 1 << 16;  // elements once repetitions are expanded
// A counted repetition of a variable-length part ((a|bc){0,9}, (x{1,5}){10}) expands to at most
// this many: the matcher follows every way of splitting the text at once, and its work per byte
// grows with the square of this ((.{0,64}){0,64} took 7 ms per byte; (\w+\s?){0,100} is 303).
constexpr uint64_t kMaxRegexAmbiguity = 512;

// kText: the pattern's characters as UTF-8. kJsonString: as they are written inside a JSON
// string literal (without the quotes): '"' and '\' come out as \" and \\, control characters as
// \b \f \n \r \t or \u00XX, so the string stays valid JSON and decodes to a match.
enum class RegexTarget { kText, kJsonString };

// Adds to `b` a rule matching exactly the texts the whole pattern matches. Errors:
// InvalidArgument "<what> (at offset N)".
StatusOr<uint32_t> RegexRule(std::string_view pattern, RegexTarget target, GrammarBuilder* b);

// Limits of RegexLengthRule: characters of the expanded pattern (its automaton's states),
// transitions of that automaton, and states / transitions of its product with the length count.
constexpr size_t kMaxRegexLengthPositions = 4096;
constexpr size_t kMaxRegexLengthStates = 1 << 17;
constexpr size_t kMaxRegexLengthEdges = 1 << 17;

// Adds to `b` a rule matching the texts the whole pattern matches that have min_length to
// max_length characters (code points; max_length < 0: no upper bound): JSON Schema's pattern or
// format with minLength / maxLength. Built as the product of the pattern's Glushkov automaton
// (counted repetitions written out) with a count of characters, pruned to the states from which
// an end is reachable; each size is bounded (an InvalidArgument past them, never a huge grammar).
StatusOr<uint32_t> RegexLengthRule(std::string_view pattern, RegexTarget target, int min_length,
                                   int max_length, GrammarBuilder* b);

// The grammar of `pattern` on its own (guided_regex).
StatusOr<Grammar> RegexGrammar(std::string_view pattern);

}  // namespace llm
