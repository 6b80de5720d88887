#include "common/utf8.h"

namespace llm::utf8 {
namespace {

// For a lead byte: the sequence length and the allowed range of the second byte (Unicode
// Table 3-7, well-formed UTF-8 byte sequences). Returns 0 for bytes that can not start one.
int SequenceInfo(uint8_t lead, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) {
    if (lead == 0xE0) *lo = 0xA0;
    if (lead == 0xED) *hi = 0x9F;
    return 3;
  }
  if (lead < 0xF5) {
    if (lead == 0xF0) *lo = 0x90;
    if (lead == 0xF4) *hi = 0x8F;
    return 4;
  }
  return 0;
}

// Examines the sequence at s[pos]. Returns the number of bytes of the maximal valid prefix
// (>= 1 for invalid data: the subpart to replace), sets *complete when a full valid character
// was found and *truncated when the sequence was valid so far but ran into the end of `s`.
size_t Examine(std::string_view s, size_t pos, bool* complete, bool* truncated) {
  *complete = false;
  *truncated = false;
  uint8_t lo = 0, hi = 0;
  const int need = SequenceInfo(static_cast<uint8_t>(s[pos]), &lo, &hi);
  if (need == 0) return 1;
  size_t i = 1;
  for (; i < static_cast<size_t>(need); ++i) {
    if (pos + i >= s.size()) {
      *truncated = true;
      return i;
    }
    const uint8_t b = static_cast<uint8_t>(s[pos + i]);
    const uint8_t l = i == 1 ? lo : 0x80;
    const uint8_t h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return i;
  }
  *complete = true;
  return i;
}

}  // namespace

void Append(char32_t cp, std::string* out) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Encode(char32_t cp) {
  std::string s;
  Append(cp, &s);
  return s;
}

char32_t Next(std::string_view s, size_t* pos) {
  bool complete = false, truncated = false;
  const size_t start = *pos;
  const size_t n = Examine(s, start, &complete, &truncated);
  *pos += n;
  if (!complete) return kReplacementChar;
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[start + i]); };
  switch (n) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

size_t ValidCharLen(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  bool complete = false, truncated = false;
  const size_t n = Examine(s, pos, &complete, &truncated);
  return complete ? n : 0;
}

bool IsValid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = ValidCharLen(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string DecodeLossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    bool complete = false, truncated = false;
    const size_t n = Examine(bytes, pos, &complete, &truncated);
    if (complete) {
      out.append(bytes.substr(pos, n));
    } else {
      Append(kReplacementChar, &out);
    }
    pos += n;
  }
  return out;
}

size_t StablePrefixLen(std::string_view bytes) {
  for (size_t pos = 0; pos < bytes.size();) {
    bool complete = false, truncated = false;
    const size_t n = Examine(bytes, pos, &complete, &truncated);
    if (truncated) return pos;
    pos += n;
  }
  return bytes.size();
}

size_t CountChars(std::string_view s) {
  size_t count = 0;
  for (size_t pos = 0; pos < s.size(); ++count) Next(s, &pos);
  return count;
}

}  // namespace llm::utf8
