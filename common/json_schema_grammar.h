// JSON and JSON Schema as byte grammars (common/grammar.h), for response_format and forced tool
// calls. What the output looks like:
//  - JSON text without a BOM and with nothing after the top value; whitespace between tokens is
//    bounded (none, one space, or a newline and up to 20 spaces/tabs, as llama.cpp's converter),
//    so a model cannot pad forever;
//  - numbers have at most 16 integer digits, 16 fraction digits and 2 exponent digits (so every
//    parser reads them as a finite double); strings are valid UTF-8 with JSON's escapes
//    (control characters only escaped; no \u escape of a UTF-16 surrogate);
//  - object properties come in the schema's order (optional ones may be left out), no others.
// The schema subset: type (a name or a list), properties, required, additionalProperties (a
// schema for the values of an object without a properties keyword; otherwise no properties
// beyond those listed are generated, so "properties": {} gives {}), items, minItems, maxItems,
// minLength, maxLength, enum, const, anyOf, oneOf (as anyOf), allOf with one entry, $ref to the
// same document ("#", "#/$defs/X", any JSON pointer; recursion allowed), the empty schema / true;
// on strings pattern (common/regex_grammar.h; the whole string matches it, as llama.cpp and
// xgrammar read it; characters JSON must escape come out escaped) and format date, time,
// date-time, uuid and email (other formats are annotations, ignored as vLLM / xgrammar do),
// together with minLength / maxLength too (in characters: RegexLengthRule's product of the
// pattern's automaton with a count, bounded in size);
// on integers and numbers minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft 4's
// boolean forms too; bounds up to 10^18 in magnitude; exact: integers by a digit-range grammar,
// numbers by comparing decimal digits (common/number_range_grammar.h), so 0.1 is 0.1) and
// multipleOf: on integers any integer 1..1000 (a modulo-N digit automaton, with the bounds),
// on numbers an integer 1..1000 (then only integers are generated) or a power of ten 10^-k,
// k <= 15 (at most k fraction digits); other values are refused. A bounded number, or one with
// multipleOf, is written without an exponent, with at most 15 fraction digits (or k) and
// never as -0.
// Annotations (title, description, default, examples, format, $schema, $id, $comment, deprecated,
// readOnly, writeOnly, strict, ...) are ignored. Any other validation keyword (uniqueItems, not,
// minProperties, ...) is an InvalidArgument naming it and where it is, rather than output that
// silently breaks it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/grammar.h"
#include "common/status.h"

namespace llm {

// Bounds on what a schema may ask for.
constexpr int kMaxSchemaDepth = 64;            // nesting of subschemas
constexpr int kMaxSchemaLength = 4096;         // maxLength / minLength honoured up to this
constexpr int kMaxSchemaItems = 1024;          // maxItems / minItems honoured up to this
constexpr size_t kMaxSchemaEnumValues = 4096;  // entries of one enum
constexpr size_t kMaxSchemaProperties = 1024;  // properties of one object

constexpr size_t kMaxChoices = 4096;         // strings of one choice list
constexpr size_t kMaxChoiceBytes = 1 << 16;  // their total length

// Arrays and objects nest at most this deep in a schema's text (as the router's request bodies):
// deeper ones are refused before parsing, since enum / const values are printed recursively.
constexpr int kMaxSchemaTextDepth = 64;
// Whether the JSON text's arrays and objects nest at most `max_depth` deep (brackets outside
// strings; the text need not be valid JSON).
bool JsonTextNestingAtMost(std::string_view text, int max_depth);

// Exactly one of `choices` (vLLM's guided_choice / structured_outputs.choice): a
// classification label, a fixed answer.
StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices);

// Any JSON object (response_format {"type": "json_object"}).
StatusOr<Grammar> JsonObjectGrammar();
// Values valid against `schema` (response_format json_schema, tool arguments). Errors are
// InvalidArgument "... (at #/properties/x)" naming the keyword and its place in the schema.
StatusOr<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);

}  // namespace llm
