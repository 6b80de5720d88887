#include "common/number_range_grammar.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "common/integer_range_grammar.h"

namespace llm {
namespace {

using Seq = GrammarBuilder::Sequence;

constexpr uint64_t kUnboundedDigits = 16;  // integer digits of an unbounded side

// A magnitude: integer part and fraction digits (no trailing zeros).
struct Mag {
  uint64_t integer = 0;
  std::string fraction;
};

int CompareMag(const Mag& a, const Mag& b) {
  if (a.integer != b.integer) return a.integer < b.integer ? -1 : 1;
  const size_t n = std::max(a.fraction.size(), b.fraction.size());
  for (size_t i = 0; i < n; ++i) {
    const char x = i < a.fraction.size() ? a.fraction[i] : '0';
    const char y = i < b.fraction.size() ? b.fraction[i] : '0';
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// The fraction part of a number whose integer part equals the bounds' (where a bound is given):
// "" or "." and 1..max digits, compared digit by digit with the bounds' fractions (padded with
// zeros, so the comparison is exact). A small DFA: after k digits, whether the digits so far are
// equal to the lower bound's or already above it, and equal to the upper bound's or below it;
// with a multipleOf n·10^-max (n > 1) also the remainder modulo n of the digits so far (the
// integer part's, given to Top, then each fraction digit). A number with j <= max fraction
// digits is a multiple when that remainder times 10^(max - j) is 0 modulo n: its fraction
// padded with zeros to max digits.
class FractionRules {
 public:
  FractionRules(const std::string* lo, bool lo_excl, const std::string* hi, bool hi_excl,
                int max_digits, int64_t n, GrammarBuilder* b)
      : lo_(lo), hi_(hi), lo_excl_(lo_excl), hi_excl_(hi_excl), max_(max_digits), n_(n), b_(*b) {
    int64_t p = 1 % n_;
    for (int j = 0; j <= max_; ++j) {
      scale_.push_back(p);
      p = p * 10 % n_;
    }
  }

  // The whole fraction part after an integer part whose remainder modulo n is r (nullopt: no
  // fraction fits).
  std::optional<uint32_t> Top(int64_t r) {
    std::vector<Seq> alts;
    const int cl = lo_ ? kEq : kBeyond, ch = hi_ ? kEq : kBeyond;
    if (Accepts(0, cl, ch, r)) alts.push_back({});
    for (Seq& s : Digits(0, cl, ch, r)) {
      Seq with_point = {b_.Byte('.')};
      with_point.insert(with_point.end(), s.begin(), s.end());
      alts.push_back(std::move(with_point));
    }
    if (alts.empty()) return std::nullopt;
    return b_.Rule(alts);
  }

 private:
  static constexpr int kEq = 0, kBeyond = 1, kDead = 2;

  char LoDigit(int k) const {
    return k < static_cast<int>(lo_->size()) ? (*lo_)[static_cast<size_t>(k)] : '0';
  }
  char HiDigit(int k) const {
    return k < static_cast<int>(hi_->size()) ? (*hi_)[static_cast<size_t>(k)] : '0';
  }

  // After k digits: the number is within the bounds, and a multiple, if it ends here.
  bool Accepts(int k, int cl, int ch, int64_t r) const {
    // Equal so far to the lower bound's digits: equal to it when its remaining digits are none
    // (it has no trailing zeros), otherwise below it.
    const bool lo_ok = cl == kBeyond || (k >= static_cast<int>(lo_->size()) && !lo_excl_);
    const bool hi_ok = ch == kBeyond || k < static_cast<int>(hi_->size()) || !hi_excl_;
    return lo_ok && hi_ok && r * scale_[static_cast<size_t>(max_ - k)] % n_ == 0;
  }

  // The next digit (position k) and what may follow it, digits with the same continuation
  // grouped in ranges.
  std::vector<Seq> Digits(int k, int cl, int ch, int64_t r) {
    std::vector<Seq> alts;
    if (k >= max_) return alts;
    int start = -1;
    std::optional<uint32_t> current;
    auto flush = [&](int end) {
      if (start < 0) return;
      alts.push_back({b_.Range(static_cast<uint8_t>('0' + start), static_cast<uint8_t>('0' + end)),
                      GrammarBuilder::Ref(*current)});
      start = -1;
    };
    for (int d = 0; d <= 9; ++d) {
      const auto [ncl, nch] = Next(k, cl, ch, d);
      std::optional<uint32_t> tail;
      if (ncl != kDead && nch != kDead) tail = Tail(k + 1, ncl, nch, (r * 10 + d) % n_);
      if (start >= 0 && tail != current) flush(d - 1);
      if (tail && start < 0) {
        start = d;
        current = tail;
      }
    }
    flush(9);
    return alts;
  }

  std::pair<int, int> Next(int k, int cl, int ch, int d) const {
    int ncl = cl, nch = ch;
    if (cl == kEq) {
      const int l = LoDigit(k) - '0';
      ncl = d > l ? kBeyond : d == l ? kEq : kDead;
    }
    if (ch == kEq) {
      const int h = HiDigit(k) - '0';
      nch = d < h ? kBeyond : d == h ? kEq : kDead;
    }
    return {ncl, nch};
  }

  // What may follow k >= 1 digits (nullopt: nothing fits).
  std::optional<uint32_t> Tail(int k, int cl, int ch, int64_t r) {
    const auto key = std::make_tuple(k, cl, ch, r);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (b_.too_large()) return std::nullopt;  // Build fails anyway: stop early
    std::vector<Seq> alts;
    if (Accepts(k, cl, ch, r)) alts.push_back({});
    for (Seq& s : Digits(k, cl, ch, r)) alts.push_back(std::move(s));
    std::optional<uint32_t> rule;
    if (!alts.empty()) rule = b_.Rule(alts);
    memo_.emplace(key, rule);
    return rule;
  }

  const std::string* lo_;
  const std::string* hi_;
  bool lo_excl_, hi_excl_;
  int max_;
  int64_t n_;
  std::vector<int64_t> scale_;  // 10^j modulo n
  GrammarBuilder& b_;
  std::map<std::tuple<int, int, int, int64_t>, std::optional<uint32_t>> memo_;
};

// The fraction part after the integer part `integer` (nullptr bounds: none).
std::optional<uint32_t> Fraction(const std::string* lo, bool lo_excl, const std::string* hi,
                                 bool hi_excl, int max_digits, int64_t n, uint64_t integer,
                                 GrammarBuilder* b) {
  return FractionRules(lo, lo_excl, hi, hi_excl, max_digits, n, b)
      .Top(static_cast<int64_t>(integer % static_cast<uint64_t>(n)));
}

// Multiples of N between digit strings, as a DFA over the digits: position, whether the digits
// so far equal the lower / upper bound's, and the remainder modulo N so far. With `tails`, the
// integers that are not multiples too: the last digit is followed by tails[remainder] (nullopt:
// none), the fraction part that completes a multiple of N·10^-k.
class MultipleRules {
 public:
  MultipleRules(int64_t n, GrammarBuilder* b,
                const std::vector<std::optional<uint32_t>>* tails = nullptr)
      : n_(n), b_(*b), tails_(tails) {}

  // Magnitudes lo..hi (!bounded: up to 16 digits, or as many as lo has) that are multiples.
  // (Not an optional hi: GCC 12 warns, wrongly, that it may be used uninitialized.)
  void Add(uint64_t lo, bool bounded, uint64_t hi, const Seq& prefix, std::vector<Seq>* out) {
    const std::string los = std::to_string(lo);
    const size_t max_len =
        bounded ? std::to_string(hi).size() : std::max<size_t>(los.size(), kUnboundedDigits);
    for (size_t len = los.size(); len <= max_len; ++len) {
      std::string from(len, '0'), to(len, '9');
      from[0] = len == 1 ? '0' : '1';
      if (len == los.size()) from = los;
      if (bounded && len == max_len) to = std::to_string(hi);
      if (from > to) continue;
      from_ = from;
      to_ = to;
      ++bound_id_;
      for (Seq& s : Alternatives(0, true, true, 0)) {
        Seq full = prefix;
        full.insert(full.end(), s.begin(), s.end());
        out->push_back(std::move(full));
      }
    }
  }

 private:
  std::vector<Seq> Alternatives(size_t pos, bool tl, bool th, int64_t r) {
    std::vector<Seq> alts;
    const int dlo = tl ? from_[pos] - '0' : 0, dhi = th ? to_[pos] - '0' : 9;
    const bool last = pos + 1 == from_.size();
    // Consecutive digits with the same continuation share one alternative.
    int start = -1;
    std::optional<uint32_t> current;
    auto flush = [&](int end) {
      if (start < 0) return;
      Seq s = {b_.Range(static_cast<uint8_t>('0' + start), static_cast<uint8_t>('0' + end))};
      if (current) s.push_back(GrammarBuilder::Ref(*current));
      alts.push_back(std::move(s));
      start = -1;
    };
    for (int d = dlo; d <= dhi; ++d) {
      const int64_t nr = (r * 10 + d) % n_;
      std::optional<uint32_t> next;
      bool ok = false;
      if (last && tails_) {
        next = (*tails_)[static_cast<size_t>(nr)];
        ok = next.has_value();
      } else if (last) {
        ok = nr == 0;
      } else {
        next = State(pos + 1, tl && d == dlo, th && d == dhi, nr);
        ok = next.has_value();
      }
      if (!ok) {
        flush(d - 1);
        continue;
      }
      if (start >= 0 && next != current) flush(d - 1);
      if (start < 0) {
        start = d;
        current = next;
      }
    }
    flush(dhi);
    return alts;
  }

  std::optional<uint32_t> State(size_t pos, bool tl, bool th, int64_t r) {
    // Free states (no bound digit to follow) are shared by every length and bound.
    const auto key = tl || th ? std::make_tuple(bound_id_, pos, tl, th, r)
                              : std::make_tuple(0, from_.size() - pos, false, false, r);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (b_.too_large()) return std::nullopt;  // Build fails anyway: stop early
    std::vector<Seq> alts = Alternatives(pos, tl, th, r);
    std::optional<uint32_t> rule;
    if (!alts.empty()) rule = b_.Rule(alts);
    memo_.emplace(key, rule);
    return rule;
  }

  int64_t n_;
  GrammarBuilder& b_;
  const std::vector<std::optional<uint32_t>>* tails_;
  std::string from_, to_;
  int bound_id_ = 0;
  std::map<std::tuple<int, size_t, bool, bool, int64_t>, std::optional<uint32_t>> memo_;
};

// The multiples of N·10^-k among the numbers whose integer part lies in a range and whose
// fraction is free: MultipleRules over the integer part, whose remainder modulo N picks the
// fraction parts that complete a multiple. Shared by both signs and all ranges of one rule.
class FreeMultiples {
 public:
  FreeMultiples(int64_t n, int fraction_digits, GrammarBuilder* b)
      : n_(n), b_(*b), fractions_(nullptr, false, nullptr, false, fraction_digits, n, b) {}

  int64_t n() const { return n_; }

  // Integer parts lo..hi (!bounded: up to 16 digits, or as many as lo has), each followed by
  // the fractions that make a multiple.
  void Add(uint64_t lo, bool bounded, uint64_t hi, std::vector<Seq>* out) {
    if (!integers_) {
      for (int64_t r = 0; r < n_; ++r) tails_.push_back(fractions_.Top(r));
      integers_.emplace(n_, &b_, &tails_);
    }
    integers_->Add(lo, bounded, hi, {}, out);
  }

 private:
  int64_t n_;
  GrammarBuilder& b_;
  FractionRules fractions_;
  std::vector<std::optional<uint32_t>> tails_;  // by the integer part's remainder
  std::optional<MultipleRules> integers_;
};

// Magnitudes m with lo <= m <= hi (strict where exclusive; hi nullopt: no upper bound), and
// with `multiples` only the multiples of its N·10^-max_digits.
std::vector<Seq> MagRange(const Mag& lo, bool lo_excl, const std::optional<Mag>& hi, bool hi_excl,
                          int max_digits, FreeMultiples* multiples, GrammarBuilder* b) {
  std::vector<Seq> alts;
  if (hi && CompareMag(lo, *hi) > 0) return alts;
  const int64_t n = multiples ? multiples->n() : 1;
  auto with_integer = [&](uint64_t integer, uint32_t fraction) {
    Seq s = b->Literal(std::to_string(integer));
    s.push_back(GrammarBuilder::Ref(fraction));
    alts.push_back(std::move(s));
  };
  if (hi && lo.integer == hi->integer) {
    if (auto f =
            Fraction(&lo.fraction, lo_excl, &hi->fraction, hi_excl, max_digits, n, lo.integer, b)) {
      with_integer(lo.integer, *f);
    }
    return alts;
  }
  if (auto f = Fraction(&lo.fraction, lo_excl, nullptr, false, max_digits, n, lo.integer, b)) {
    with_integer(lo.integer, *f);
  }
  const int64_t mid_lo = static_cast<int64_t>(lo.integer) + 1;
  const std::optional<int64_t> mid_hi =
      hi ? std::optional<int64_t>(static_cast<int64_t>(hi->integer) - 1) : std::nullopt;
  if (!mid_hi || mid_lo <= *mid_hi) {
    if (multiples) {
      multiples->Add(static_cast<uint64_t>(mid_lo), mid_hi.has_value(),
                     mid_hi ? static_cast<uint64_t>(*mid_hi) : 0, &alts);
    } else {
      const auto any = Fraction(nullptr, false, nullptr, false, max_digits, 1, 0, b);
      alts.push_back(
          {GrammarBuilder::Ref(IntegerRangeRule(mid_lo, mid_hi, b)), GrammarBuilder::Ref(*any)});
    }
  }
  if (hi) {
    if (auto f = Fraction(nullptr, false, &hi->fraction, hi_excl, max_digits, n, hi->integer, b)) {
      with_integer(hi->integer, *f);
    }
  }
  return alts;
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

}  // namespace

StatusOr<Decimal> ParseDecimal(std::string_view text) {
  size_t i = 0;
  Decimal out;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  std::string digits;
  int64_t point = 0;  // digits before the decimal point
  bool seen_point = false, any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      any = true;
      if (digits.empty() && c == '0') {
        if (seen_point) --point;  // leading zeros after the point shift it
        continue;
      }
      if (digits.size() > 64) return InvalidArgument("has too many digits");
      digits += c;
      if (!seen_point) ++point;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any) return InvalidArgument("is not a number");
  if (i < text.size()) {
    if (text[i] != 'e' && text[i] != 'E') return InvalidArgument("is not a number");
    ++i;
    bool exp_negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) exp_negative = text[i++] == '-';
    int64_t exp = 0;
    bool exp_any = false;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      exp_any = true;
      exp = std::min<int64_t>(exp * 10 + (text[i] - '0'), 100000);
    }
    if (!exp_any || i != text.size()) return InvalidArgument("is not a number");
    point += exp_negative ? -exp : exp;
  }
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
  }
  if (digits.empty()) return out;  // zero (never negative)
  if (point > 19) return InvalidArgument("beyond 10^18 is not supported");
  const int64_t fraction_digits = static_cast<int64_t>(digits.size()) - point;
  if (fraction_digits > kMaxBoundFractionDigits) {
    return InvalidArgument("with more than " + std::to_string(kMaxBoundFractionDigits) +
                           " digits after the decimal point is not supported");
  }
  std::string integer;
  const int64_t n = static_cast<int64_t>(digits.size());
  if (point > 0) {
    integer = digits.substr(0, static_cast<size_t>(std::min(point, n)));
    integer.append(static_cast<size_t>(std::max<int64_t>(point - n, 0)), '0');
    if (point < n) {
      out.fraction = digits.substr(static_cast<size_t>(point));
    }
  } else {
    out.fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  }
  if (!integer.empty()) {
    const uint64_t v = std::stoull(integer);
    if (integer.size() > 19 || v > static_cast<uint64_t>(kMaxIntegerBound) ||
        (v == static_cast<uint64_t>(kMaxIntegerBound) && !out.fraction.empty())) {
      return InvalidArgument("beyond 10^18 is not supported");
    }
    out.integer = v;
  }
  out.negative = negative;
  return out;
}

int CompareDecimal(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int m = CompareMag({a.integer, a.fraction}, {b.integer, b.fraction});
  return a.negative ? -m : m;
}

std::optional<uint32_t> NumberRangeRule(const std::optional<DecimalBound>& min,
                                        const std::optional<DecimalBound>& max,
                                        int max_fraction_digits, GrammarBuilder* b) {
  return DecimalMultipleRule(min, max, max_fraction_digits, 1, b);
}

std::optional<uint32_t> DecimalMultipleRule(const std::optional<DecimalBound>& min,
                                            const std::optional<DecimalBound>& max,
                                            int max_fraction_digits, int64_t multiple_of,
                                            GrammarBuilder* b) {
  std::optional<FreeMultiples> multiples;
  if (multiple_of > 1) multiples.emplace(multiple_of, max_fraction_digits, b);
  FreeMultiples* const shared = multiples ? &*multiples : nullptr;
  if (min && max) {
    const int c = CompareDecimal(min->value, max->value);
    if (c > 0 || (c == 0 && (min->exclusive || max->exclusive))) return std::nullopt;
  }
  std::vector<Seq> alts;
  auto mag = [](const Decimal& d) { return Mag{d.integer, d.fraction}; };
  auto is_zero = [](const Decimal& d) { return d.integer == 0 && d.fraction.empty(); };
  if (!min || min->value.negative) {  // "-" and a magnitude above zero
    Mag lo;
    bool lo_excl = true;
    if (max && max->value.negative) {
      lo = mag(max->value);
      lo_excl = max->exclusive;
    }
    std::optional<Mag> hi;
    if (min) hi = mag(min->value);
    for (Seq& s :
         MagRange(lo, lo_excl, hi, min && min->exclusive, max_fraction_digits, shared, b)) {
      s.insert(s.begin(), b->Byte('-'));
      alts.push_back(std::move(s));
    }
  }
  if (!max || (!max->value.negative && !(is_zero(max->value) && max->exclusive))) {
    Mag lo;
    bool lo_excl = false;
    if (min && !min->value.negative) {
      lo = mag(min->value);
      lo_excl = min->exclusive;
    }
    std::optional<Mag> hi;
    if (max) hi = mag(max->value);
    for (Seq& s :
         MagRange(lo, lo_excl, hi, max && max->exclusive, max_fraction_digits, shared, b)) {
      alts.push_back(std::move(s));
    }
  }
  if (alts.empty()) return std::nullopt;
  return b->Rule(alts);
}

std::optional<uint32_t> IntegerMultipleRule(std::optional<int64_t> min, std::optional<int64_t> max,
                                            int64_t multiple_of, GrammarBuilder* b) {
  if (min && max && *min > *max) return std::nullopt;
  if (multiple_of <= 1) return IntegerRangeRule(min, max, b);
  MultipleRules rules(multiple_of, b);
  std::vector<Seq> alts;
  if (!min || *min < 0) {
    const uint64_t lo = max && *max < 0 ? Magnitude(*max) : 1;
    rules.Add(lo, min.has_value(), min ? Magnitude(*min) : 0, {b->Byte('-')}, &alts);
  }
  if (!max || *max >= 0) {
    const uint64_t lo = min && *min > 0 ? static_cast<uint64_t>(*min) : 0;
    rules.Add(lo, max.has_value(), max ? static_cast<uint64_t>(*max) : 0, {}, &alts);
  }
  if (alts.empty()) return std::nullopt;
  return b->Rule(alts);
}

}  // namespace llm
