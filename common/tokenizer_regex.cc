#include "common/tokenizer_regex.h"

#include <oniguruma.h>

#include <mutex>

#include "common/utf8.h"

namespace llm {
namespace {

void InitOniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

StatusOr<std::unique_ptr<TokRegex>> TokRegex::Compile(std::string_view pattern,
                                                      const std::string& what) {
  InitOniguruma();
  OnigRegex reg = nullptr;
  OnigErrorInfo einfo;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int r = onig_new(&reg, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                         ONIG_SYNTAX_DEFAULT, &einfo);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &einfo);
    return InvalidArgument(what + ": bad regex '" + std::string(pattern) +
                           "': " + reinterpret_cast<const char*>(msg));
  }
  std::unique_ptr<TokRegex> out(new TokRegex());
  out->regex_ = reg;
  return out;
}

TokRegex::~TokRegex() {
  if (regex_ != nullptr) onig_free(static_cast<OnigRegex>(regex_));
}

std::vector<std::pair<size_t, size_t>> TokRegex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (text.empty()) return out;
  auto reg = static_cast<OnigRegex>(regex_);
  OnigRegion* region = onig_region_new();
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  size_t start = 0;
  while (start <= text.size()) {
    const int r = onig_search(reg, str, end, str + start, end, region, ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH or an error: no more matches
    const auto b = static_cast<size_t>(region->beg[0]);
    const auto e = static_cast<size_t>(region->end[0]);
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one character (never emitted, as it would be an empty split).
      if (b >= text.size()) break;
      size_t next = b;
      utf8::Next(text, &next);
      start = next;
    }
  }
  onig_region_free(region, 1);
  return out;
}

}  // namespace llm
