#include "common/integer_range_grammar.h"

#include <algorithm>
#include <string>
#include <vector>

namespace llm {
namespace {

using Seq = GrammarBuilder::Sequence;
constexpr uint64_t kUnboundedDigits = 9999999999999999;  // 16 digits

void Append(Seq* to, const Seq& more) {
  to->insert(to->end(), more.begin(), more.end());
}

// The strings of lo.size() digits between lo and hi (same length, lo <= hi, leading zeros
// allowed): the first digit alone, then the rest, split where the first digits differ.
Seq DigitRange(const std::string& lo, const std::string& hi, GrammarBuilder* b) {
  if (lo.empty()) return {};
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) {
    Seq s = {b->Byte(static_cast<uint8_t>(lo[0]))};
    Append(&s, DigitRange(lo_rest, hi_rest, b));
    return s;
  }
  const std::string zeros(lo_rest.size(), '0'), nines(lo_rest.size(), '9');
  std::vector<Seq> alts;
  char full_lo = lo[0], full_hi = hi[0];  // first digits followed by any digits
  if (lo_rest != zeros) {
    Seq s = {b->Byte(static_cast<uint8_t>(lo[0]))};
    Append(&s, DigitRange(lo_rest, nines, b));
    alts.push_back(std::move(s));
    ++full_lo;
  }
  Seq last;
  if (hi_rest != nines) {
    last = {b->Byte(static_cast<uint8_t>(hi[0]))};
    Append(&last, DigitRange(zeros, hi_rest, b));
    --full_hi;
  }
  if (full_lo <= full_hi) {
    Seq s = {b->Range(static_cast<uint8_t>(full_lo), static_cast<uint8_t>(full_hi))};
    for (size_t i = 0; i < lo_rest.size(); ++i) s.push_back(b->Range('0', '9'));
    alts.push_back(std::move(s));
  }
  if (!last.empty()) alts.push_back(std::move(last));
  if (alts.size() == 1) return alts[0];
  return {GrammarBuilder::Ref(b->Rule(alts))};
}

// Magnitudes lo..hi in canonical decimal: one digit-range per length.
std::vector<Seq> Magnitudes(uint64_t lo, uint64_t hi, GrammarBuilder* b) {
  const std::string los = std::to_string(lo), his = std::to_string(hi);
  std::vector<Seq> alts;
  for (size_t len = los.size(); len <= his.size(); ++len) {
    std::string from = los;
    if (len != los.size()) {  // 10...0 (not "1" + zeros: GCC 12 warns about it, wrongly)
      from.assign(len, '0');
      from[0] = '1';
    }
    const std::string to = len == his.size() ? his : std::string(len, '9');
    alts.push_back(DigitRange(from, to, b));
  }
  return alts;
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : v;
}

}  // namespace

uint32_t IntegerRangeRule(std::optional<int64_t> min, std::optional<int64_t> max,
                          GrammarBuilder* b) {
  std::vector<Seq> alts;
  if (!min || *min < 0) {  // the negative ones: "-" and magnitudes
    const uint64_t lo = max && *max < 0 ? Magnitude(*max) : 1;
    const uint64_t hi = min ? Magnitude(*min) : std::max(lo, kUnboundedDigits);
    for (const Seq& m : Magnitudes(lo, hi, b)) {
      Seq s = {b->Byte('-')};
      Append(&s, m);
      alts.push_back(std::move(s));
    }
  }
  if (!max || *max >= 0) {
    const uint64_t lo = min && *min > 0 ? static_cast<uint64_t>(*min) : 0;
    const uint64_t hi = max ? static_cast<uint64_t>(*max) : std::max(lo, kUnboundedDigits);
    for (Seq& m : Magnitudes(lo, hi, b)) alts.push_back(std::move(m));
  }
  return b->Rule(alts);
}

}  // namespace llm
