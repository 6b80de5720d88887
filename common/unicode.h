// Unicode helpers for the tokenizer, backed by utf8proc (kept out of this header):
// normalization forms, the properties the Hugging Face pipeline tests (White_Space, the Rust
// regex `\w` class), lowercasing, and the GPT-2 byte <-> character table of ByteLevel.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace llm::unicode {

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

// Normalizes valid UTF-8 text; invalid input is returned unchanged.
std::string Normalize(std::string_view text, NormalForm form);

// Unicode White_Space property (Rust char::is_whitespace, regex `\s`).
bool IsWhiteSpace(char32_t cp);
// Rust regex `\w`: alphabetic, marks, decimal digits, connector punctuation, join controls.
bool IsWordChar(char32_t cp);

// General category Mn.
bool IsNonspacingMark(char32_t cp);

std::string Lowercase(std::string_view text);

// GPT-2 ByteLevel alphabet: every byte maps to one printable code point.
const std::array<char32_t, 256>& ByteToChar();
// Inverse of ByteToChar(); -1 when `cp` is not in the alphabet.
int CharToByte(char32_t cp);

}  // namespace llm::unicode
