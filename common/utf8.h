// UTF-8 helpers shared by the tokenizer: code point decoding/encoding, Rust-compatible lossy
// decoding (one U+FFFD per maximal invalid subpart, like String::from_utf8_lossy) and the
// detection of an unfinished character at the end of a byte buffer (for streaming decoders).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llm::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` to `out` (invalid code points become U+FFFD).
void Append(char32_t cp, std::string* out);
std::string Encode(char32_t cp);

// Decodes the code point starting at s[*pos] and advances *pos. Invalid bytes decode to U+FFFD
// and advance by the length of the maximal invalid subpart (at least one byte).
char32_t Next(std::string_view s, size_t* pos);

// Length in bytes of the valid character starting at s[pos], or 0 when the bytes there are not a
// complete valid UTF-8 sequence.
size_t ValidCharLen(std::string_view s, size_t pos);

bool IsValid(std::string_view s);

// Rust String::from_utf8_lossy: every maximal invalid subpart becomes one U+FFFD.
std::string DecodeLossy(std::string_view bytes);

// Length of the longest prefix of `bytes` whose lossy decoding can not change when more bytes
// are appended: everything except a trailing, still-valid but unfinished sequence.
size_t StablePrefixLen(std::string_view bytes);

// Number of code points (invalid subparts count as one each).
size_t CountChars(std::string_view s);

}  // namespace llm::utf8
